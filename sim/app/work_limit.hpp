#pragma once
/// Work bounded before it starts: an estimate of the task graph's ops and of the memory the
/// run needs, from a cheap probe of the scenario, checked against a limit before the real graph
/// is built. A run over the limit is refused (exit 2) with the estimate, instead of running
/// for minutes and then dying of std::bad_alloc.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "scenario/specs.hpp"

namespace cpsim::app {

struct WorkLimits {
  double max_memory_bytes = 0;  ///< 0 = default_max_memory()
  bool force = false;           ///< estimate, but never refuse
  bool trace = false;           ///< a Chrome trace is written (it costs memory per op)
};

struct WorkEstimate {
  double ops = 0;
  double copied = 0;  ///< of which copies of a replica's ops (stored once, cheaper)
  double bytes = 0;
  bool probed = false;  ///< false: small enough that no probe was needed
};

/// The run is over its limit: exit code 2 (the input asks for more than the machine has).
class WorkLimitError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// $CPSIM_MAX_MEMORY (a size, e.g. 8GiB), else half of physical memory: the rest stays for the
/// system and a second run.
double default_max_memory();

/// What `cpsim plan`'s children running at once may hold together without --max-memory: three
/// quarters of physical memory ($CPSIM_MAX_MEMORY where set), while one child keeps
/// default_max_memory(). Two 7 GB graphs of the 405B's search then run side by side where
/// half of 24 GB held them to one at a time (measured: 527 s of analytic steps in 503 s).
double default_plan_memory();

/// "8G", "512MiB", "0.5T" -> bytes; throws std::invalid_argument.
double parse_memory_limit(const std::string& s);

constexpr int kProbeMicroBatches = 16;

/// Estimates the scenario's graph: when a step (or layer) has more than `probe_above`
/// micro-batches, builds it with 1 and 2 (cheap, and a pipeline schedule's ops grow linearly in
/// the micro-batches) and extrapolates; otherwise nothing is probed (the build is bounded by the
/// loader's limits) and `probed` is false.
WorkEstimate estimate_work(const scenario::Scenario& sc, bool trace, int probe_above = kProbeMicroBatches);

/// The memory a run whose graph has `ops` ops, `copied` of them copies of a replica's,
/// needs (the estimate's per-op and base figures).
double graph_bytes(double ops, bool trace = false, double copied = 0);

/// The memory a step time alone needs, on either engine (no trace times, no report;
/// app::simulate_step_time): less per op than graph_bytes.
double step_time_bytes(double ops, double copied = 0);

/// The most ops a step-time-alone graph may have to stay within `bytes` (step_time_bytes'
/// figures), at least 1,000; for schedule::TaskGraph::set_op_limit.
uint64_t ops_within(double bytes);

/// What a copied op counts for in set_op_limit: its bytes over a stored op's.
double copied_op_weight();

/// Throws WorkLimitError with the estimate when it is over the limit and not forced.
WorkEstimate check_work(const scenario::Scenario& sc, const WorkLimits& limits);

}  // namespace cpsim::app
