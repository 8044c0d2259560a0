// `cpsim calibrate nccl LOG... --platform P [-o FILE]`: fits a platform to nccl-tests logs and
// writes the fitted values as a platform file that names the preset it amends, so it works
// wherever a platform does (`cpsim collective --platform FILE`, a scenario's `platform: FILE`).
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "app/calibrate_nccl.hpp"
#include "app/collective_args.hpp"
#include "app/commands.hpp"
#include "app/text_format.hpp"
#include "report/output.hpp"
#include "scenario/load.hpp"
#include "scenario/nccl_log.hpp"

namespace cpsim::app {

namespace {

struct CalibNcclArgs {
  std::vector<std::string> logs;
  std::string platform;
  std::vector<std::string> params;
  std::string op;
  std::string out;
  std::string json;
  std::string engine = "simgrid";
};

std::string us(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4gus", s * 1e6);
  return b;
}

std::string num(double v, const char* f = "%.4g") { return fmt(f, v); }

/// A YAML tree of scalars with comments, emitted through yaml-cpp (every key and value quoted
/// as YAML needs; a file name in a comment cannot start a line of its own).
struct Tree {
  std::string value, comment;
  std::map<std::string, Tree> kids;
  std::vector<std::string> order;
  Tree& at(const std::string& k) {
    if (!kids.count(k)) order.push_back(k);
    return kids[k];
  }
  Tree& path(const std::string& dotted) {
    Tree* t = this;
    size_t start = 0;
    while (true) {
      const size_t dot = dotted.find('.', start);
      t = &t->at(dotted.substr(start, dot - start));
      if (dot == std::string::npos) return *t;
      start = dot + 1;
    }
  }
  void emit(YAML::Emitter& e) const {
    e << YAML::BeginMap;
    for (const auto& k : order) {
      const Tree& c = kids.at(k);
      e << YAML::Key << k << YAML::Value;
      if (c.kids.empty()) {
        e << c.value;
        if (!c.comment.empty()) e << YAML::Comment(one_line(c.comment));
      } else {
        c.emit(e);  // (comments sit on scalars: yaml-cpp loses a block map commented at its key)
      }
    }
    e << YAML::EndMap;
  }
  static std::string one_line(std::string s) {
    for (char& ch : s)
      if (ch == '\n' || ch == '\r') ch = ' ';
    return s;
  }
};

void set_protocols(Tree& t, const double (&v)[3], const std::string& comment) {
  t.at("ll").value = us(v[0]);
  t.at("ll").comment = comment;
  t.at("ll128").value = us(v[1]);
  t.at("simple").value = us(v[2]);
}

std::string evidence(const FittedValue& v) {
  std::string s = "from " + v.from + ": busbw error after the fit median " +
                  num(100 * v.median_err, "%.1f") + " %, max " + num(100 * v.max_err, "%.1f") + " %";
  if (!v.note.empty()) s += "; " + v.note;
  return s;
}

std::string overlay(const CalibNcclArgs& a, const scenario::PlatformSpec& base, const NcclFit& fit) {
  Tree root;
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool is_file = a.platform.find('/') != std::string::npos || fs::is_regular_file(a.platform, ec);
  root.at("preset").value = is_file ? fs::absolute(a.platform, ec).string() : a.platform;
  for (const auto& p : a.params) {
    const size_t eq = p.find('=');
    if (eq == std::string::npos) continue;
    Tree& t = root.path(p.substr(0, eq));
    t.value = p.substr(eq + 1);
    t.comment = "--param " + p;
  }
  const scenario::NcclSpec& n = fit.spec.nccl;
  for (const auto& v : fit.values) {
    const std::string ev = evidence(v);
    if (v.key == "intra.nvlink.efficiency" || v.key == "intra.pcie.efficiency" ||
        v.key == "network.nic.efficiency") {
      Tree& t = root.path(v.key);
      t.value = num(v.after, "%.4f");
      t.comment = "was " + num(v.before, "%.4f") + "; " + ev;
    } else if (v.key == "nccl.p2p_max_bw") {
      Tree& t = root.path("nccl.p2p_max_bw");
      t.value = num(v.after, "%.4g") + "GBps";
      t.comment = "was " + num(v.before, "%.4g") + " GB/s; " + ev;
    } else if (v.key == "latency_scale.intra") {
      const std::string c = "x" + num(v.after, "%.3g") + " of " + base.name + "'s; " + ev;
      set_protocols(root.path("nccl.base_latency"), n.base_latency_s, c);
      set_protocols(root.path("nccl.hop_latency.nvlink"), n.hop_nvlink_s, c);
      set_protocols(root.path("nccl.hop_latency.pcie"), n.hop_pcie_s, c);
      Tree& t = root.path("nccl.p2p_latency");
      t.value = us(n.p2p_latency_s);
      t.comment = c;
    } else if (v.key == "latency_scale.network") {
      set_protocols(root.path("nccl.hop_latency.network"), n.hop_net_s,
                    "x" + num(v.after, "%.3g") + " of " + base.name + "'s; " + ev);
    }
  }
  if (!fit.nvls_from.empty()) {
    Tree& t = root.path("nccl.nvls");
    t.value = fit.nvls_after ? "true" : "false";
    t.comment = std::string(fit.nvls_after == fit.nvls_before ? "kept" : "NVLS off fits better") +
                " (both fitted) on " + fit.nvls_from;
  }
  YAML::Emitter e;
  root.emit(e);
  if (!e.good()) throw std::runtime_error("writing the calibrated platform: " + e.GetLastError());
  std::string head =
      "# A platform calibrated by `cpsim calibrate nccl` against nccl-tests logs: the preset it\n"
      "# names, amended by the values below; each says which log, lines and op set it and how\n"
      "# well the fit reproduces them. Use it wherever a platform goes:\n"
      "#   cpsim collective --platform THIS_FILE ...   or, in a scenario, platform: THIS_FILE\n";
  return head + e.c_str() + "\n";
}

void print_report(const CalibNcclArgs& a, const scenario::PlatformSpec& base, const NcclFit& fit) {
  std::printf("# cpsim calibrate nccl: %zu test(s) on %s (%d GPUs), engine %s\n", fit.logs.size(),
              base.name.c_str(), base.total_gpus(), a.engine.c_str());
  std::vector<double> before_l, after_l, before_s, after_s;
  for (const auto& f : fit.logs) {
    const auto& l = *f.log;
    std::printf("#\n# %s:%d-%d  %s (%s), %d ranks%s%s%s\n", l.file.c_str(), l.first_line,
                l.last_line, l.program.empty() ? "-" : l.program.c_str(), l.op.c_str(), l.ranks,
                l.device.empty() ? "" : (", " + l.device).c_str(),
                l.hosts.empty() ? "" : (" on " + std::to_string(l.hosts.size()) + " host(s)").c_str(),
                l.nccl_version.empty() ? "" : (", NCCL " + l.nccl_version).c_str());
    std::printf("# %12s %10s %10s %7s %10s %7s  %-8s %s\n", "size (B)", "measured", "before", "err %",
                "after", "err %", "algo", "proto");
    std::printf("# %12s %10s %10s %7s %10s %7s\n", "", "busbw GB/s", "GB/s", "", "GB/s", "");
    for (const auto& p : f.points) {
      const double m = p.bytes / p.measured_s / 1e9 * p.busbw_factor;
      const double b = p.before_s > 0 ? p.bytes / p.before_s / 1e9 * p.busbw_factor : 0;
      const double af = p.after_s > 0 ? p.bytes / p.after_s / 1e9 * p.busbw_factor : 0;
      std::printf("  %12.0f %10.2f %10.2f %+7.1f %10.2f %+7.1f  %-8s %s\n", p.bytes, m, b,
                  m > 0 ? 100 * (b / m - 1) : 0.0, af, m > 0 ? 100 * (af / m - 1) : 0.0,
                  p.algo.c_str(), p.proto.c_str());
      const bool large = p.bytes >= kCalibLargeBytes;
      (large ? before_l : before_s).push_back(busbw_error(p, false));
      (large ? after_l : after_s).push_back(busbw_error(p, true));
    }
  }
  auto med = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("#\n# fitted values (physical bounds: efficiencies <= 1, p2p cap <= the link's rate, "
              "latency scales 0.1x..20x)\n");
  for (const auto& v : fit.values)
    std::printf("  %-26s %10s -> %-10s %s\n", v.key.c_str(),
                (num(v.before, "%.4g") + (v.unit == "GBps" ? " GB/s" : v.unit == "x" ? "x" : "")).c_str(),
                (num(v.after, "%.4g") + (v.unit == "GBps" ? " GB/s" : v.unit == "x" ? "x" : "")).c_str(),
                evidence(v).c_str());
  if (!fit.nvls_from.empty())
    std::printf("  %-26s %10s -> %-10s (both fitted; the smaller error kept)\n", "nccl.nvls",
                fit.nvls_before ? "true" : "false", fit.nvls_after ? "true" : "false");
  std::printf("#\n# busbw |error|, median: rows >= 16 MiB %.1f %% -> %.1f %% (target 5 %%), "
              "below %.1f %% -> %.1f %% (target 15 %%)\n",
              100 * med(before_l), 100 * med(after_l), 100 * med(before_s), 100 * med(after_s));
  if (fit.unexplained.empty()) {
    std::printf("# not explained by the fit: none\n");
  } else {
    std::printf("# not explained by the fit (%zu rows past 5 %% at >= 16 MiB or 15 %% below):\n",
                fit.unexplained.size());
    for (const auto& u : fit.unexplained) std::printf("#   %s\n", u.c_str());
  }
}

int run_calibrate_nccl(const CalibNcclArgs& a) {
  try {
    scenario::EngineKind engine = scenario::EngineKind::SimGrid;
    if (a.engine == "analytic") engine = scenario::EngineKind::Analytic;
    else if (a.engine != "simgrid")
      throw UsageError("--engine: '" + a.engine + "' is not one of: simgrid, analytic");
    if (!a.op.empty() && scenario::nccl_test_op(a.op + "_perf").empty() && a.op != "allreduce" &&
        a.op != "allgather" && a.op != "reducescatter" && a.op != "alltoall" &&
        a.op != "sendrecv" && a.op != "broadcast" && a.op != "reduce")
      throw UsageError("--op: '" + a.op + "' is not one of: allreduce, allgather, reducescatter, "
                       "alltoall, sendrecv, broadcast, reduce");
    for (const auto& path : a.logs) {
      std::error_code ec;
      for (const std::string& out : {a.out, a.json})
        if (!out.empty() && std::filesystem::equivalent(path, out, ec))
          throw UsageError(out + " is one of the logs: it would be overwritten");
    }
    const scenario::PlatformSpec base = scenario::load_platform(a.platform, a.params);
    std::vector<scenario::NcclLog> logs;
    for (const auto& path : a.logs) {
      auto some = scenario::read_nccl_log(path, a.op);
      for (auto& l : some) logs.push_back(std::move(l));
    }
    const NcclFit fit = fit_nccl(base, logs, engine);
    print_report(a, base, fit);
    if (!a.out.empty()) {
      report::write_atomic(a.out, overlay(a, base, fit));
      std::printf("# wrote %s (use: cpsim collective --platform %s ...)\n", a.out.c_str(), a.out.c_str());
    } else {
      std::printf("# give -o FILE to write the calibrated platform\n");
    }
    if (!a.json.empty()) {
      nlohmann::json doc = {{"platform", base.name}, {"engine", a.engine}};
      for (const auto& v : fit.values)
        doc["values"].push_back({{"key", v.key}, {"before", v.before}, {"after", v.after},
                                 {"unit", v.unit}, {"from", v.from}, {"median_error", v.median_err},
                                 {"max_error", v.max_err}, {"note", v.note}});
      doc["nvls"] = {{"before", fit.nvls_before}, {"after", fit.nvls_after}};
      for (const auto& f : fit.logs) {
        nlohmann::json rows = nlohmann::json::array();
        for (const auto& p : f.points)
          rows.push_back({{"size_bytes", p.bytes}, {"line", p.line},
                          {"measured_busbw_GBps", p.bytes / p.measured_s / 1e9 * p.busbw_factor},
                          {"before_busbw_GBps", p.bytes / p.before_s / 1e9 * p.busbw_factor},
                          {"after_busbw_GBps", p.bytes / p.after_s / 1e9 * p.busbw_factor},
                          {"algo", p.algo}, {"proto", p.proto}});
        doc["logs"].push_back({{"file", f.log->file}, {"first_line", f.log->first_line},
                               {"op", f.log->op}, {"ranks", f.log->ranks}, {"rows", rows}});
      }
      doc["unexplained"] = fit.unexplained;
      report::write_atomic(a.json, doc.dump(2) + "\n");
    }
    std::fflush(stdout);
    if (std::ferror(stdout)) {
      std::cerr << "cpsim calibrate nccl: error: writing the report to standard output failed\n";
      return 1;
    }
    return 0;
  } catch (const UsageError& e) {
    std::cerr << "cpsim calibrate nccl: error: " << e.what() << "\n";
    return 2;
  } catch (const scenario::InputError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    std::cerr << "cpsim calibrate nccl: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cpsim calibrate nccl: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

void register_calibrate(CLI::App& app, int& rc) {
  CLI::App* cal = app.add_subcommand(
      "calibrate", "fit cpsim to your cluster's measurements (nccl-tests logs)");
  cal->require_subcommand(1);
  auto a = std::make_shared<CalibNcclArgs>();
  CLI::App* n = cal->add_subcommand(
      "nccl", "fit a platform's link efficiencies, latencies, p2p cap and NVLS to nccl-tests logs "
              "and write the calibrated platform");
  n->add_option("logs", a->logs, "nccl-tests output files (all_reduce_perf, all_gather_perf, "
                                 "reduce_scatter_perf, alltoall_perf, sendrecv_perf, "
                                 "broadcast_perf; mpirun/srun logs welcome)")
      ->required();
  n->add_option("--platform", a->platform, "the platform preset or file the cluster is closest to")
      ->required();
  n->add_option("--param", a->params, "preset parameter KEY=VALUE (e.g. nodes=4), repeatable");
  n->add_option("--op", a->op, "the op, where a log does not say which test wrote it");
  n->add_option("-o,--out", a->out, "write the calibrated platform here");
  n->add_option("--json", a->json, "write the fit (values, rows before/after) as JSON");
  n->add_option("--engine", a->engine, "simgrid (default, as cpsim collective) | analytic");
  n->callback([a, &rc] { rc = run_calibrate_nccl(*a); });
  register_calibrate_kernels(cal, rc);
}

}  // namespace cpsim::app
