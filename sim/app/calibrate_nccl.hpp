#pragma once
/// Fits a platform's collective parameters to nccl-tests logs (`cpsim calibrate nccl`).
///
/// What is fitted, and from which rows (every value stays inside its physical bounds):
///   - the NVLink (or PCIe) efficiency, from collectives inside one NVLink domain at >= 16 MiB;
///   - the NIC efficiency, from collectives that cross nodes at >= 16 MiB (never above 1: no
///     NIC runs faster than its line rate);
///   - the NCCL p2p pair cap, from sendrecv / alltoall inside a domain at >= 16 MiB (at most the
///     link's rate);
///   - one scale of NCCL's base and NVLink/PCIe hop latencies and of the p2p latency, from the
///     rows below 16 MiB inside a domain, and one of the network hop latencies from the rows
///     below 16 MiB that cross nodes (0.1x to 20x of the preset's NCCL tuning.cc figures);
///   - NVLink SHARP on or off (all-reduce logs only, where the platform has NVLS): both are
///     fitted and the one with the smaller error is kept (a cluster run with NCCL_NVLS_ENABLE=0).
/// Protocol switch points follow from the fitted latencies and rates through the NCCL tuner
/// model (schedule/nccl_tuner.cpp), as NCCL's own tuner derives them.
#include <string>
#include <vector>

#include "scenario/nccl_log.hpp"
#include "scenario/specs.hpp"

namespace cpsim::app {

/// Sizes from which a row counts as bandwidth-bound in the fit and the report (nccl-tests'
/// large-message regime; below it latency and protocol choice decide).
constexpr double kCalibLargeBytes = 16.0 * 1024 * 1024;

struct FitPoint {
  double bytes = 0;
  int line = 0;
  double measured_s = 0;   ///< out-of-place time
  double busbw_factor = 1; ///< busbw = bytes / time x factor
  double before_s = 0, after_s = 0;
  std::string algo, proto;  ///< after the fit
};

struct LogFit {
  const scenario::NcclLog* log = nullptr;
  bool crosses_nodes = false;
  std::vector<FitPoint> points;
};

struct FittedValue {
  std::string key;        ///< YAML path in a platform file, e.g. "intra.nvlink.efficiency"
  double before = 0, after = 0;
  std::string unit;       ///< "" (a ratio), "GBps", "x" (a latency scale)
  std::string from;       ///< "file:lines (op, N ranks)" of every log that set it
  double median_err = 0, max_err = 0;  ///< |busbw error| after the fit over the rows it used
  std::string note;       ///< a bound that was hit, or "" 
};

struct NcclFit {
  scenario::PlatformSpec spec;      ///< the fitted platform
  std::vector<FittedValue> values;
  bool nvls_before = false, nvls_after = false;
  std::string nvls_from;
  std::vector<LogFit> logs;
  std::vector<std::string> unexplained;  ///< rows still off by more than 5 % / 15 % after the fit
};

/// Fits `base` to `logs`. Throws UsageError when a log has more ranks than the platform has
/// GPUs, or when no log has a row the fit can use.
NcclFit fit_nccl(const scenario::PlatformSpec& base, const std::vector<scenario::NcclLog>& logs,
                 scenario::EngineKind engine);

/// |predicted / measured busbw - 1| of one point (the same as measured / predicted time - 1).
double busbw_error(const FitPoint& p, bool after);

}  // namespace cpsim::app
