// `cpsim compare SCENARIO TRACE...`: a real training step, as the PyTorch profiler recorded it on
// one or more ranks, against the same step simulated: GPU time per kernel class, compute,
// exposed communication and step time, per rank and side by side.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/command_errors.hpp"
#include "app/compare_timeline.hpp"
#include "app/commands.hpp"
#include "app/simulate.hpp"
#include "report/output.hpp"
#include "scenario/kineto_trace.hpp"
#include "scenario/load.hpp"
#include "support/safe_write.hpp"

namespace cpsim::app {

namespace {

struct CompareArgs {
  std::string scenario;
  std::vector<std::string> traces;
  std::vector<std::string> sets;
  std::string engine;
  std::string json, timeline;
};

/// cpsim's op categories (the result's time_by_category_s); host overhead has no GPU kernel.
const char* const kClasses[] = {"attention", "gemm", "memory", "collective", "p2p"};

/// The class of a kernel by its name, as the libraries name them: NCCL's ncclDevKernel_* /
/// ncclKernel_*, FlashAttention's flash_fwd/bwd_*, cuDNN's and TE's fused attention (fmha,
/// sdpa, fort_native_sdpa), cuBLAS/CUTLASS GEMMs (sm90_xmma_gemm, nvjet, cutlass, ...); the
/// rest (elementwise, norms, softmax, reductions, the optimizer, copies) is memory-bound work.
std::string kernel_class(std::string n) {
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("nccl")) return has("sendrecv") || has("send") || has("recv") ? "p2p" : "collective";
  if (has("flash") || has("fmha") || has("sdpa") || has("attn") || has("attention")) return "attention";
  if (has("gemm") || has("cutlass") || has("xmma") || has("nvjet") || has("cublas") || has("matmul") ||
      has("s16816") || has("wgmma"))
    return "gemm";
  return "memory";
}

using Spans = std::vector<std::pair<double, double>>;

double union_len(Spans s) {
  std::sort(s.begin(), s.end());
  double total = 0, a = -1e300, b = -1e300;
  for (const auto& [x, y] : s) {
    if (x > b) {
      total += std::max(0.0, b - a);
      a = x;
      b = y;
    } else {
      b = std::max(b, y);
    }
  }
  return total + std::max(0.0, b - a);
}

/// Length of the union of `a` not covered by the union of `b`.
double exposed_len(const Spans& a, const Spans& b) {
  Spans both = a;
  both.insert(both.end(), b.begin(), b.end());
  return union_len(both) - union_len(b);
}

struct RankMeasure {
  int rank = 0;
  std::string file, window;
  std::map<std::string, double> by_class_s;
  double compute_s = 0, exposed_comm_s = 0, step_s = 0;
  size_t kernels = 0;
  MeasuredRank lanes;  ///< the window's kernels, classified, for --timeline
};

RankMeasure measure(const scenario::KinetoRank& r) {
  RankMeasure m;
  m.rank = r.rank;
  m.file = r.file;
  double lo = r.kernels.front().start_us, hi = 0;
  for (const auto& k : r.kernels) hi = std::max(hi, k.start_us + k.dur_us);
  if (!r.steps.empty()) {
    // The last recorded step: warm caches and a steady allocator, as training runs.
    lo = r.steps.back().first;
    hi = r.steps.back().second;
    m.window = "ProfilerStep " + std::to_string(r.steps.size()) + " of " + std::to_string(r.steps.size());
  } else {
    m.window = "first to last kernel (no ProfilerStep# annotation)";
  }
  std::map<std::string, Spans> spans;
  for (const auto& k : r.kernels) {
    const double a = std::max(lo, k.start_us), b = std::min(hi, k.start_us + k.dur_us);
    if (b <= a) continue;
    const std::string cls = kernel_class(k.name);
    spans[cls].emplace_back(a, b);
    m.lanes.kernels.push_back({k.name, cls, a - lo, b - a, k.stream});
    ++m.kernels;
  }
  Spans compute, comm;
  for (const char* c : kClasses) {
    m.by_class_s[c] = union_len(spans[c]) * 1e-6;
    auto& dst = std::string(c) == "collective" || std::string(c) == "p2p" ? comm : compute;
    dst.insert(dst.end(), spans[c].begin(), spans[c].end());
  }
  m.compute_s = union_len(compute) * 1e-6;
  m.exposed_comm_s = exposed_len(comm, compute) * 1e-6;
  m.step_s = (hi - lo) * 1e-6;
  m.lanes.rank = m.rank;
  m.lanes.file = m.file;
  m.lanes.window = m.window;
  m.lanes.window_us = hi - lo;
  return m;
}

int run_compare(const CompareArgs& a) {
  std::vector<support::NamedPath> inputs = {{"", a.scenario}};
  for (const auto& t : a.traces) inputs.push_back({"", t});
  // Before any work: an output that would overwrite an input or the other output is refused.
  support::check_outputs({{"--json", a.json}, {"--timeline", a.timeline}}, inputs);
  std::vector<std::string> sets = a.sets;
  if (!a.engine.empty()) sets.push_back("simulation.engine=" + a.engine);
  const scenario::Scenario sc = scenario::load_scenario(a.scenario, sets);
  std::vector<RankMeasure> ranks;
  for (size_t i = 0; i < a.traces.size(); ++i)
    ranks.push_back(measure(scenario::read_kineto_trace(a.traces[i], static_cast<int>(i))));
  SimulateOptions opt;
  opt.what_if_straggler = false;
  opt.what_if_perturbations = 0;
  std::ostringstream sim_trace;
  if (!a.timeline.empty()) {
    opt.trace_stream = &sim_trace;
    for (const auto& r : ranks) opt.trace_filter.ranks.push_back(r.rank);
  }
  const SimulateOutput sim = simulate(sc, opt);
  const auto& res = sim.result;
  std::map<std::string, double> simulated;
  for (const char* c : kClasses)
    simulated[c] = res.at("time_by_category_s").value(c, 0.0);
  simulated["compute"] = res.at("breakdown").at("compute_s").get<double>();
  simulated["exposed comm"] = res.at("breakdown").at("exposed_comm_s").get<double>();
  simulated["step"] = res.at("step_time_s").get<double>();

  std::printf("# cpsim compare: %s (engine %s) against %zu profiled rank(s)\n", a.scenario.c_str(),
              res.value("engine", "").c_str(), ranks.size());
  for (const auto& r : ranks)
    std::printf("#   rank %d: %s, %zu GPU kernels in %s\n", r.rank, r.file.c_str(), r.kernels,
                r.window.c_str());
  std::printf("# %-14s %12s %12s %12s %12s %9s\n", "class", "measured ms", "min ms", "max ms",
              "simulated ms", "sim/meas");
  nlohmann::json rows = nlohmann::json::array();
  auto row = [&](const std::string& name, const std::function<double(const RankMeasure&)>& get) {
    double sum = 0, lo = 1e300, hi = 0;
    for (const auto& r : ranks) {
      const double v = get(r);
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const double mean = sum / ranks.size(), s = simulated[name];
    std::printf("  %-14s %12.3f %12.3f %12.3f %12.3f %9s\n", name.c_str(), mean * 1e3, lo * 1e3,
                hi * 1e3, s * 1e3, mean > 0 ? (std::to_string(s / mean).substr(0, 5) + "x").c_str() : "-");
    rows.push_back({{"class", name}, {"measured_mean_s", mean}, {"measured_min_s", lo},
                    {"measured_max_s", hi}, {"simulated_s", s}});
    return std::make_pair(mean, s);
  };
  for (const char* c : kClasses) row(c, [c](const RankMeasure& r) { return r.by_class_s.at(c); });
  const auto compute = row("compute", [](const RankMeasure& r) { return r.compute_s; });
  row("exposed comm", [](const RankMeasure& r) { return r.exposed_comm_s; });
  row("step", [](const RankMeasure& r) { return r.step_s; });
  std::printf("# simulated per GPU (time_by_category_s, the breakdown's compute and exposed "
              "communication); measured: the union of each class's kernels in the window\n");
  if (compute.first > 0 && (compute.second / compute.first > 2 || compute.second / compute.first < 0.5))
    std::printf("# the trace's step computes %.3gx what the scenario's does: check that the scenario "
                "has the run's layers, micro-batches, sequence length and parallel layout\n",
                compute.first / compute.second);
  if (!a.json.empty()) {
    nlohmann::json doc = {{"scenario", a.scenario}, {"rows", rows}};
    for (const auto& r : ranks)
      doc["ranks"].push_back({{"rank", r.rank}, {"file", r.file}, {"window", r.window},
                              {"by_class_s", r.by_class_s}, {"compute_s", r.compute_s},
                              {"exposed_comm_s", r.exposed_comm_s}, {"step_s", r.step_s}});
    report::write_atomic(a.json, doc.dump(2) + "\n");
  }
  if (!a.timeline.empty()) {
    std::vector<MeasuredRank> lanes;
    for (auto& r : ranks) lanes.push_back(std::move(r.lanes));
    const auto merged = compare_timeline(lanes, nlohmann::json::parse(sim_trace.str()), simulated["step"] * 1e6, a.scenario);
    report::write_atomic(a.timeline, merged.dump() + "\n");
    std::printf("# timeline: %s (both steps from 0 on one axis; Perfetto, or tools/cpsim_plot.py measured)\n",
                a.timeline.c_str());
  }
  return 0;
}

}  // namespace

void register_compare(CLI::App& app, int& rc) {
  auto a = std::make_shared<CompareArgs>();
  CLI::App* c = app.add_subcommand(
      "compare", "a profiled training step (PyTorch profiler Chrome traces, one per rank) against "
                 "the scenario's simulated step");
  c->add_option("scenario", a->scenario, "the scenario of the profiled run")->required();
  c->add_option("traces", a->traces, "torch.profiler export_chrome_trace files, one per rank")->required();
  c->add_option("--set", a->sets, "override a scenario key: key.path=value (repeatable)");
  c->add_option("--engine", a->engine, "simgrid | analytic (default: the scenario's)");
  c->add_option("--json", a->json, "write the comparison as JSON");
  c->add_option("--timeline", a->timeline,
                "write the profiled ranks' kernels and their simulation as one Chrome trace on one time axis");
  c->callback([a, &rc] { rc = report_errors("cpsim compare", "", [&] { return run_compare(*a); }); });
}

}  // namespace cpsim::app
