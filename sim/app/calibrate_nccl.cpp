// The nccl-tests fit: multiplicative updates of the rates from the bandwidth-bound rows, a
// golden-section search of each latency scale over the latency-bound rows, three rounds.
#include "app/calibrate_nccl.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "app/collective_args.hpp"
#include "app/collective_curve.hpp"

namespace cpsim::app {

namespace {

using scenario::NcclLog;
using scenario::PlatformSpec;

constexpr double kMinEfficiency = 0.05;
constexpr double kMinLatencyScale = 0.1, kMaxLatencyScale = 20.0;
constexpr int kRounds = 3;

/// nccl-tests' busbw / algbw (src/*.cu, *GetBw): what turns a time into the bus bandwidth.
double busbw_factor(const std::string& op, int n) {
  if (n < 2) return 1;
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "allgather" || op == "reducescatter" || op == "alltoall") return double(n - 1) / n;
  return 1;  // broadcast, reduce, sendrecv
}

bool p2p_op(const std::string& op) { return op == "sendrecv" || op == "alltoall"; }

/// The knobs a fit moves, as scales of the preset's values (so one fitted number is one key).
struct Knobs {
  double intra_eff = 1, nic_eff = 1, p2p_Bps = 0, lat_intra = 1, lat_net = 1;
  bool nvls = false;
};

struct Model {
  PlatformSpec base;
  bool pcie = false;

  Knobs knobs_of(const PlatformSpec& s) const {
    Knobs k;
    k.intra_eff = pcie ? s.pcie.efficiency : s.nvlink.efficiency;
    k.nic_eff = s.nic.efficiency;
    k.p2p_Bps = s.nccl.p2p_max_Bps > 0 ? s.nccl.p2p_max_Bps : intra_line_Bps();
    k.nvls = s.nccl.nvls;
    return k;
  }
  double intra_line_Bps() const { return pcie ? base.pcie.bw_Bps : base.nvlink.bw_Bps; }

  PlatformSpec apply(const Knobs& k) const {
    PlatformSpec s = base;
    (pcie ? s.pcie : s.nvlink).efficiency = k.intra_eff;
    s.nic.efficiency = k.nic_eff;
    s.nccl.p2p_max_Bps = k.p2p_Bps;
    s.nccl.nvls = k.nvls;
    for (int i = 0; i < 3; ++i) {
      s.nccl.base_latency_s[i] = base.nccl.base_latency_s[i] * k.lat_intra;
      s.nccl.hop_nvlink_s[i] = base.nccl.hop_nvlink_s[i] * k.lat_intra;
      s.nccl.hop_pcie_s[i] = base.nccl.hop_pcie_s[i] * k.lat_intra;
      s.nccl.hop_net_s[i] = base.nccl.hop_net_s[i] * k.lat_net;
    }
    s.nccl.p2p_latency_s = base.nccl.p2p_latency_s * k.lat_intra;
    return s;
  }
};

std::string describe(const NcclLog& l) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d-%d", l.first_line, l.last_line);
  return l.file + ":" + buf + " (" + l.op + ", " + std::to_string(l.ranks) + " ranks" +
         (l.nccl_version.empty() ? "" : ", NCCL " + l.nccl_version) + ")";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

class Fitter {
 public:
  Fitter(const PlatformSpec& base, const std::vector<NcclLog>& logs, scenario::EngineKind engine)
      : engine_(engine) {
    model_.base = base;
    model_.pcie = base.intra == scenario::IntraFabric::PCIe;
    const int domain = model_.pcie ? base.gpus_per_node
                                   : std::max(base.gpus_per_node, base.nvlink_domain_gpus);
    for (const NcclLog& l : logs) {
      if (l.ranks > base.total_gpus())
        throw UsageError(describe(l) + ": " + std::to_string(l.ranks) + " ranks, but the platform " +
                         base.name + " has " + std::to_string(base.total_gpus()) +
                         " GPUs (give --param nodes=N for a cluster preset)");
      if (l.ranks < 2)
        throw UsageError(describe(l) + ": one rank moves no data between GPUs; nothing to fit");
      LogFit f;
      f.log = &l;
      f.crosses_nodes = l.ranks > domain;
      const double factor = busbw_factor(l.op, l.ranks);
      for (const auto& r : l.rows) {
        if (r.size_bytes <= 0 || r.time_us <= 0) continue;
        FitPoint p;
        p.bytes = r.size_bytes;
        p.line = r.line;
        p.measured_s = r.time_us * 1e-6;
        p.busbw_factor = factor;
        f.points.push_back(p);
      }
      if (!f.points.empty()) fits_.push_back(std::move(f));
    }
    if (fits_.empty()) throw UsageError("no row with a size and a time above zero in any log");
  }

  NcclFit run() {
    const Knobs start = model_.knobs_of(model_.base);
    evaluate(start, /*after=*/false);
    Knobs best = fit_from(start);
    double best_err = total_error(best);
    bool tried_nvls = false;
    if (start.nvls && any_op("allreduce")) {
      Knobs off = start;
      off.nvls = false;
      off = fit_from(off);
      tried_nvls = true;
      if (const double e = total_error(off); e < best_err) {
        best = off;
        best_err = e;
      }
    }
    evaluate(best, /*after=*/true);
    NcclFit out;
    out.spec = model_.apply(best);
    out.nvls_before = start.nvls;
    out.nvls_after = best.nvls;
    if (tried_nvls) out.nvls_from = sources([&](const LogFit& f) { return f.log->op == "allreduce"; });
    report_values(start, best, out);
    for (const auto& f : fits_)
      for (const auto& p : f.points) {
        const double e = busbw_error(p, true);
        const bool large = p.bytes >= kCalibLargeBytes;
        if (e > (large ? 0.05 : 0.15)) {
          char buf[256];
          std::snprintf(buf, sizeof buf, "%s:%d: %s %.0f B: busbw %+.1f %% after the fit (%s %s)",
                        f.log->file.c_str(), p.line, f.log->op.c_str(), p.bytes,
                        100 * (p.measured_s / p.after_s - 1), p.algo.c_str(), p.proto.c_str());
          out.unexplained.push_back(buf);
        }
      }
    out.logs = fits_;
    return out;
  }

 private:
  bool any_op(const std::string& op) const {
    return std::any_of(fits_.begin(), fits_.end(), [&](const LogFit& f) { return f.log->op == op; });
  }

  std::string sources(const std::function<bool(const LogFit&)>& use) const {
    std::string s;
    for (const auto& f : fits_)
      if (use(f)) s += (s.empty() ? "" : "; ") + describe(*f.log);
    return s;
  }

  /// Simulated times of every point of the logs selected by `use` under `k`.
  void simulate(const Knobs& k, const std::function<bool(const LogFit&)>& use,
                std::vector<std::vector<double>>& times, std::vector<std::vector<CurvePoint>>* curves = nullptr) {
    const PlatformSpec s = model_.apply(k);
    times.assign(fits_.size(), {});
    if (curves) curves->assign(fits_.size(), {});
    for (size_t i = 0; i < fits_.size(); ++i) {
      if (!use(fits_[i])) continue;
      std::vector<double> sizes;
      for (const auto& p : fits_[i].points) sizes.push_back(p.bytes);
      auto c = simulate_curve(s, fits_[i].log->op, fits_[i].log->ranks, sizes, engine_);
      for (const auto& p : c) times[i].push_back(p.time_s);
      if (curves) (*curves)[i] = std::move(c);
    }
  }

  void evaluate(const Knobs& k, bool after) {
    std::vector<std::vector<double>> t;
    std::vector<std::vector<CurvePoint>> c;
    simulate(k, [](const LogFit&) { return true; }, t, &c);
    for (size_t i = 0; i < fits_.size(); ++i)
      for (size_t j = 0; j < fits_[i].points.size(); ++j) {
        FitPoint& p = fits_[i].points[j];
        (after ? p.after_s : p.before_s) = t[i][j];
        if (after) {
          p.algo = c[i][j].algo;
          p.proto = c[i][j].proto;
        }
      }
  }

  /// Sum of squared log time errors over the points `use` selects (and size filter `which`:
  /// 0 every size, 1 large only, 2 small only).
  double error_of(const Knobs& k, const std::function<bool(const LogFit&)>& use, int which) {
    std::vector<std::vector<double>> t;
    simulate(k, use, t);
    double sum = 0;
    for (size_t i = 0; i < fits_.size(); ++i) {
      if (!use(fits_[i])) continue;
      for (size_t j = 0; j < fits_[i].points.size(); ++j) {
        const FitPoint& p = fits_[i].points[j];
        const bool large = p.bytes >= kCalibLargeBytes;
        if ((which == 1 && !large) || (which == 2 && large)) continue;
        if (t[i][j] <= 0) continue;
        const double d = std::log(p.measured_s / t[i][j]);
        sum += d * d;
      }
    }
    return sum;
  }

  double total_error(const Knobs& k) { return error_of(k, [](const LogFit&) { return true; }, 0); }

  /// The rows a rate is fitted on: >= kCalibLargeBytes, else the largest third of the sizes.
  static std::vector<size_t> rate_rows(const LogFit& f) {
    std::vector<size_t> idx;
    for (size_t j = 0; j < f.points.size(); ++j)
      if (f.points[j].bytes >= kCalibLargeBytes) idx.push_back(j);
    if (idx.empty())
      for (size_t j = f.points.size() - std::max<size_t>(1, f.points.size() / 3); j < f.points.size(); ++j)
        idx.push_back(j);
    return idx;
  }

  /// One multiplicative step of a rate: the median measured/simulated bandwidth ratio.
  double rate_ratio(const Knobs& k, const std::function<bool(const LogFit&)>& use) {
    std::vector<std::vector<double>> t;
    simulate(k, use, t);
    std::vector<double> ratios;
    for (size_t i = 0; i < fits_.size(); ++i) {
      if (!use(fits_[i])) continue;
      for (size_t j : rate_rows(fits_[i]))
        if (t[i][j] > 0) ratios.push_back(t[i][j] / fits_[i].points[j].measured_s);
    }
    return ratios.empty() ? 1.0 : median(ratios);
  }

  /// log(scale) in [log 0.1, log 20] on the small rows of `use`: a scan of 16 points first
  /// (the error is not unimodal in the scale: NCCL's tuner switches algorithm and protocol as
  /// latencies grow, and a switch can match a few rows at a wrong scale), then a golden-section
  /// search between the best point's neighbours.
  double fit_scale(Knobs k, double Knobs::*field, const std::function<bool(const LogFit&)>& use) {
    auto f = [&](double x) {
      k.*field = std::exp(x);
      return error_of(k, use, 2);
    };
    constexpr int kScan = 16;
    const double x0 = std::log(kMinLatencyScale), x1 = std::log(kMaxLatencyScale);
    const double step = (x1 - x0) / (kScan - 1);
    int best = 0;
    double best_err = 0;
    for (int i = 0; i < kScan; ++i) {
      const double e = f(x0 + i * step);
      if (i == 0 || e < best_err) {
        best = i;
        best_err = e;
      }
    }
    double lo = x0 + std::max(0, best - 1) * step, hi = x0 + std::min(kScan - 1, best + 1) * step;
    const double g = (std::sqrt(5.0) - 1) / 2;
    double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    double fa = f(a), fb = f(b);
    for (int it = 0; it < 10; ++it) {
      if (fa < fb) {
        hi = b;
        b = a;
        fb = fa;
        a = hi - g * (hi - lo);
        fa = f(a);
      } else {
        lo = a;
        a = b;
        fa = fb;
        b = lo + g * (hi - lo);
        fb = f(b);
      }
    }
    const double x = fa < fb ? a : b;
    return std::exp(std::min(fa, fb) <= best_err ? x : x0 + best * step);
  }

  bool has_small(const std::function<bool(const LogFit&)>& use) const {
    for (const auto& f : fits_)
      if (use(f))
        for (const auto& p : f.points)
          if (p.bytes < kCalibLargeBytes) return true;
    return false;
  }

  Knobs fit_from(Knobs k) {
    const auto intra_coll = [](const LogFit& f) { return !f.crosses_nodes && !p2p_op(f.log->op); };
    const auto intra_p2p = [](const LogFit& f) { return !f.crosses_nodes && p2p_op(f.log->op); };
    const auto inter = [](const LogFit& f) { return f.crosses_nodes; };
    const auto intra = [](const LogFit& f) { return !f.crosses_nodes; };
    const bool has_nic = model_.base.nics_per_node > 0;
    for (int round = 0; round < kRounds; ++round) {
      if (std::any_of(fits_.begin(), fits_.end(), intra_coll))
        k.intra_eff = std::clamp(k.intra_eff * rate_ratio(k, intra_coll), kMinEfficiency, 1.0);
      if (std::any_of(fits_.begin(), fits_.end(), intra_p2p))
        k.p2p_Bps = std::clamp(k.p2p_Bps * rate_ratio(k, intra_p2p), 1e9, model_.intra_line_Bps());
      if (has_nic && std::any_of(fits_.begin(), fits_.end(), inter))
        k.nic_eff = std::clamp(k.nic_eff * rate_ratio(k, inter), kMinEfficiency, 1.0);
      if (has_small(intra)) k.lat_intra = fit_scale(k, &Knobs::lat_intra, intra);
      if (has_nic && has_small(inter)) k.lat_net = fit_scale(k, &Knobs::lat_net, inter);
    }
    return k;
  }

  void add_value(NcclFit& out, const std::string& key, double before, double after,
                 const std::string& unit, const std::function<bool(const LogFit&)>& use,
                 bool large_rows, double lo, double hi) {
    FittedValue v;
    v.key = key;
    v.before = before;
    v.after = after;
    v.unit = unit;
    v.from = sources(use);
    std::vector<double> errs;
    for (const auto& f : fits_)
      if (use(f))
        for (const auto& p : f.points)
          if ((p.bytes >= kCalibLargeBytes) == large_rows) errs.push_back(busbw_error(p, true));
    v.median_err = median(errs);
    v.max_err = errs.empty() ? 0 : *std::max_element(errs.begin(), errs.end());
    if (after <= lo * 1.0001 || after >= hi * 0.9999) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "held at its physical bound %.4g%s: the logs ask for more",
                    after, unit == "GBps" ? " GB/s" : "");
      v.note = buf;
    }
    out.values.push_back(v);
  }

  void report_values(const Knobs& s, const Knobs& k, NcclFit& out) {
    const auto intra_coll = [](const LogFit& f) { return !f.crosses_nodes && !p2p_op(f.log->op); };
    const auto intra_p2p = [](const LogFit& f) { return !f.crosses_nodes && p2p_op(f.log->op); };
    const auto inter = [](const LogFit& f) { return f.crosses_nodes; };
    const auto intra = [](const LogFit& f) { return !f.crosses_nodes; };
    const bool has_nic = model_.base.nics_per_node > 0;
    if (std::any_of(fits_.begin(), fits_.end(), intra_coll))
      add_value(out, model_.pcie ? "intra.pcie.efficiency" : "intra.nvlink.efficiency", s.intra_eff,
                k.intra_eff, "", intra_coll, true, kMinEfficiency, 1.0);
    if (std::any_of(fits_.begin(), fits_.end(), intra_p2p))
      add_value(out, "nccl.p2p_max_bw", s.p2p_Bps / 1e9, k.p2p_Bps / 1e9, "GBps", intra_p2p, true,
                1.0, model_.intra_line_Bps() / 1e9);
    if (has_nic && std::any_of(fits_.begin(), fits_.end(), inter))
      add_value(out, "network.nic.efficiency", s.nic_eff, k.nic_eff, "", inter, true,
                kMinEfficiency, 1.0);
    if (has_small(intra))
      add_value(out, "latency_scale.intra", 1.0, k.lat_intra, "x", intra, false, kMinLatencyScale,
                kMaxLatencyScale);
    if (has_nic && has_small(inter))
      add_value(out, "latency_scale.network", 1.0, k.lat_net, "x", inter, false, kMinLatencyScale,
                kMaxLatencyScale);
  }

  Model model_;
  scenario::EngineKind engine_;
  std::vector<LogFit> fits_;
};

}  // namespace

double busbw_error(const FitPoint& p, bool after) {
  const double pred = after ? p.after_s : p.before_s;
  return pred > 0 ? std::abs(p.measured_s / pred - 1) : 1.0;
}

NcclFit fit_nccl(const PlatformSpec& base, const std::vector<NcclLog>& logs,
                 scenario::EngineKind engine) {
  return Fitter(base, logs, engine).run();
}

}  // namespace cpsim::app
