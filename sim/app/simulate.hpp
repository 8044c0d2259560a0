#pragma once
/// One scenario from resolved input to results: topology, cost model, graph, replay, analysis.
/// Shared by `run` and by `sweep`'s per-scenario child processes.
#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/process_pool.hpp"
#include "app/worker_pool.hpp"
#include "report/output.hpp"
#include "scenario/specs.hpp"

namespace cpsim::app {

struct SimulateOptions {
  std::string json_path;            ///< write the result JSON here ("" = don't)
  std::string trace_path;           ///< write a Chrome trace here ("" = don't)
  std::ostream* trace_stream = nullptr;  ///< and/or into this stream (`compare --timeline`)
  report::TraceFilter trace_filter;
  /// Re-simulate without the straggler: for each candidate rank (the most slowed ranks and the
  /// critical path's straggler, up to what_if_candidates), the step with that rank's static
  /// slowdown removed; reports the one that shrinks the step most. Unset: on when the scenario
  /// has perturbations (scenario::PerturbSpec::any), so `run` and `sweep` agree.
  std::optional<bool> what_if_straggler;
  int what_if_candidates = 4;
  /// With perturbations: the step without each of the first N of them
  /// (scenario::perturb_items' order: the most severe of each kind in turn) and without all
  /// of them, each one more simulation; 0 = none.
  int what_if_perturbations = 4;
  /// > 0: also run this many seeds (seed, seed + 1, ...) and report the step-time distribution.
  int samples = 0;
  /// Child processes at once for the what-if and the samples (each replays in its own child:
  /// SimGrid allows one engine per process).
  int jobs = 1;
  /// Draw a progress line on stderr (phase, simulated time, ops done) once the run passes a
  /// second; `run` sets it unless -q or stderr is not a terminal (progress_wanted).
  bool progress = false;
};

struct SimulateOutput {
  nlohmann::json result;
  std::string summary;
};

/// Throws std::invalid_argument for combinations the schedule cannot build (exit code 2) and
/// std::runtime_error for failures while simulating or writing (exit code 1). With the what-if
/// or samples, every replay (the main one too) runs in a child process.
SimulateOutput simulate(const scenario::Scenario& sc, const SimulateOptions& opt);

/// Everything `run` checks before it replays, without replaying: topology (with its
/// perturbations), cost model (profile), the task graph's build and the work estimate. Throws
/// scenario::InputError or std::invalid_argument (exit code 2).
void validate_for_run(const scenario::Scenario& sc);

/// The scenario's task graph's ops, and how many of them are copies of a replica's
/// (TaskGraph::copy_ops, not stored), built as simulate() builds it, not replayed: the probe of
/// app/work_limit.hpp.
struct GraphSize {
  size_t ops = 0;
  size_t copied = 0;
};
GraphSize graph_size(const scenario::Scenario& sc);
/// graph_size(sc).ops.
size_t graph_ops(const scenario::Scenario& sc);

/// Builds and replays `sc` in this process with its own engine and returns the step time only
/// (no analysis). With the SimGrid engine this binds the process's one SimGrid engine: call it
/// in a child (run_step_times) unless the process replays nothing else.
double simulate_step_time(const scenario::Scenario& sc);

/// Step time of each scenario, each replayed in its own child process, `jobs` at once; a
/// scenario that fails (or whose child is killed) gives -1 instead of an error (the others
/// still count).
std::vector<double> run_step_times(const std::vector<scenario::Scenario>& scs, int jobs);

/// One step of run_bounded_steps.
struct StepOutcome {
  double step_s = -1;          ///< > 0 when it ran
  double estimate_bytes = 0;   ///< app/work_limit.hpp's estimate of its memory (0: not probed)
  /// Not run: estimate_bytes is over the limit, or (error says so) its resident memory
  /// reached the limit while it was probed, built or replayed.
  bool over_memory = false;
  std::string error;           ///< why it failed: its build, its replay, or the signal that killed it
  double wall_s = -1;          ///< the child's own wall seconds (probe, build and replay) when it reported
  double start_s = 0;          ///< when it started, steady-clock seconds (std::chrono::steady_clock)
};

/// One bounded step, in the process that runs it (run_bounded_steps' children, or a
/// pool::WorkerPool's worker): probes `s` unless `known_bytes` > 0, stops at `limit_bytes`'
/// ops (0: no limit), and returns what step_outcome reads.
std::string bounded_step_bytes(const scenario::Scenario& s, double limit_bytes, double known_bytes);
/// The StepOutcome in a child's answer to bounded_step_bytes (`limit_bytes`: the limit it had).
StepOutcome step_outcome(const pool::ChildOutcome& c, double limit_bytes);
/// The resident-memory limits of the children of run_bounded_steps: each limit plus this
/// process's resident bytes, which a child process starts with (0 stays 0: none).
std::vector<double> step_watch_limits(const std::vector<double>& limits, size_t n);

/// run_bounded_steps for analytic steps, in long-lived workers (pool::WorkerPool) that run one
/// step after another and keep their heap instead of a child each: measured on five 405B
/// layouts of 9.5-11.8 GB run in turn, a child each spent 52 s of 199 s in the kernel
/// (faulting the graphs in), one process keeping its heap ~32 s of 168 s. `cpsim plan`'s
/// attention layers (run_analytic_step_times) and whole steps (plan_steps.hpp) run here.
class StepWorkers {
 public:
  /// Steps of `scenario_of(id)` (analytic engine), `jobs` at once, whose limits, the workers'
  /// kept memory and this process's pages they share add up to at most `limit_bytes` (0: no
  /// limit). Workers are started on the first run() and call scenario_of in their copy of this
  /// process: what it reads must not change after that.
  StepWorkers(std::function<scenario::Scenario(size_t)> scenario_of, int jobs, double limit_bytes);
  /// As run_bounded_steps for ids: `limits` and `known` as its limits and known_bytes. A step
  /// whose worker stopped at its memory limit or died runs again in a child of its own
  /// (run_bounded_steps), whose answer is the one given: a worker's heap keeps fragments of its
  /// earlier jobs (the five layouts above in one process: 14.2 GB resident where the largest
  /// alone needed 11.8), and an answer must not depend on which jobs came before.
  std::vector<StepOutcome> run(const std::vector<size_t>& ids, const std::vector<double>& limits,
                               const std::vector<double>& known);

 private:
  std::function<scenario::Scenario(size_t)> scenario_of_;
  int jobs_;
  double limit_;
  pool::WorkerPool pool_;
};

/// run_step_times for scenarios of the analytic engine, in StepWorkers (`cpsim plan`'s
/// attention layers: 447 children on the 405B at 16,384 GPUs).
std::vector<double> run_analytic_step_times(const std::vector<scenario::Scenario>& scs, int jobs);

/// Like run_step_times, with each child's memory bounded: a scenario of more than 2
/// micro-batches is probed first (estimate_work) and not run when its estimate is over its
/// limit `limits[k]`, and a child whose resident memory passes it stops there. Children run
/// side by side while their limits add up to at most `total_bytes` (0: `jobs` at once
/// whatever their limits). `known_bytes[k]` > 0: the caller's own estimate of scenario k's
/// memory, used instead of the probe (which builds 3 micro-batches' worth of graph: 3/8 of the
/// build at 8 micro-batches).
std::vector<StepOutcome> run_bounded_steps(const std::vector<scenario::Scenario>& scs, int jobs,
                                           const std::vector<double>& limits, double total_bytes,
                                           const std::vector<double>& known_bytes = {});

}  // namespace cpsim::app
