#pragma once
/// One scenario from resolved input to results: topology, cost model, graph, replay, analysis.
/// Shared by `run` and by `sweep`'s per-scenario child processes.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/output.hpp"
#include "model/topology.hpp"
#include "scenario/specs.hpp"

namespace cpsim::app {

struct SimulateOptions {
  std::string json_path;            ///< write the result JSON here ("" = don't)
  std::string trace_path;           ///< write a Chrome trace here ("" = don't)
  report::TraceFilter trace_filter;
  /// Re-simulate without the straggler: for each candidate rank (the most slowed ranks and the
  /// critical path's straggler, up to what_if_candidates), the step with that rank's static
  /// slowdown removed; reports the one that shrinks the step most. Unset: on when the scenario
  /// has perturbations (scenario::PerturbSpec::any), so `run` and `sweep` agree.
  std::optional<bool> what_if_straggler;
  int what_if_candidates = 4;
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

/// One transformer layer of `sc` built, not replayed: one pipeline stage, one replica, one
/// micro-batch and one period of its layer pattern (tp x cp GPUs, placed as the first stage of
/// the first replica when the mesh order is the default).
struct LayerProbe {
  /// The most time one GPU's compute stream spends per layer and micro-batch, forward and
  /// backward (recomputation included), as the cost model prices it. A lower bound on that
  /// work in any step of the same layer geometry, since a GPU's kernels run one after another
  /// on its compute stream. -1 when layers or micro-batches differ by draw (MoE routing, drawn
  /// documents) or by GPU (perturbations), where one sample bounds nothing.
  double compute_s = -1;
  /// Ops per layer and micro-batch of one replica (all its GPUs), its DP collectives aside: a
  /// step's graph has at least layers x micro-batches x this many per replica it builds.
  double ops = 0;
  /// DP collectives (scheme "dp"), which span DP x CP and are built once for the whole mesh
  /// however many replicas are built; the probe (dp 1) builds them over CP only. Per layer, once
  /// a step (gradient reduce-scatters, parameter all-gathers), at the probe's size; and one
  /// DP-group all-gather's ops at the probe's size (schedule::dp_group_gather_ops).
  double dp_step_ops = 0, probe_group_ops = 0;
  /// The same at a mesh's size (scaled_to_mesh): per layer and micro-batch (ZeRO-3's parameter
  /// gathers, which the probe leaves out) and per layer once a step.
  double shared_ops = 0, shared_step_ops = 0;
  /// Whether the layer's traffic crosses spine links (then replicas that share leaves meet, and
  /// every replica is built: schedule/replicas.hpp).
  bool uses_spines = false;
  bool built = false;  ///< false: the reduced scenario does not build (nothing above is known)
};
/// Built with ZeRO stage min(sc's, 2): ZeRO-3's gathers are counted by scaled_to_mesh. Its DP
/// collectives are scaled to sc's own mesh.
LayerProbe probe_layer(const scenario::Scenario& sc);

/// `lp` (a probe of the same layer geometry) with its DP collectives counted for `sc`'s mesh:
/// its DP degree and ZeRO stage, which the probe need not share (`cpsim plan` probes each
/// TP x CP x scheme x recomputation once). `group_ops`: dp_group_gather_ops(sc, topo).
LayerProbe scaled_to_mesh(LayerProbe lp, const scenario::Scenario& sc, double group_ops);

/// Whether `sc`'s build simulates every DP replica (replica symmetry refused), as far as the
/// probe can tell (schedule/replicas.hpp; a replica that fills no whole leaf group is checked
/// by the probe's spine use).
bool builds_every_replica(const scenario::Scenario& sc, const model::Topology& topo, const LayerProbe& lp);

/// The ops of `sc`'s step graph estimated from its layer probe: the replica's ops x the
/// replicas built, plus the DP collectives, x layers x micro-batches. Within 0.8-1.25 x the
/// built graph on the bundled scenarios (tests/app/compute_bound_test.cpp).
double estimate_graph_ops(const scenario::Scenario& sc, const LayerProbe& lp, bool every_replica);

/// Builds and replays `sc` in this process with its own engine and returns the step time only
/// (no analysis). With the SimGrid engine this binds the process's one SimGrid engine: call it
/// in a child (run_step_times) unless the process replays nothing else.
double simulate_step_time(const scenario::Scenario& sc);

/// Step time of each scenario, each replayed in its own forked child, `jobs` at once; a
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
};

/// Like run_step_times, with each child's memory bounded: a scenario of more than 2
/// micro-batches is probed first (estimate_work) and not run when its estimate is over
/// `limit_bytes`, and a child whose resident memory passes `limit_bytes` stops there. For
/// searches, whose children run side by side: `limit_bytes` is their share.
std::vector<StepOutcome> run_bounded_steps(const std::vector<scenario::Scenario>& scs, int jobs,
                                           double limit_bytes);

}  // namespace cpsim::app
