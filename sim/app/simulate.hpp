#pragma once
/// One scenario from resolved input to results: topology, cost model, graph, replay, analysis.
/// Shared by `run` and by `sweep`'s per-scenario child processes.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "report/output.hpp"
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

/// Parses "0-3,7" into {0,1,2,3,7}; throws std::invalid_argument.
std::vector<int> parse_index_list(const std::string& s);

}  // namespace cpsim::app
