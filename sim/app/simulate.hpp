#pragma once
/// One scenario from resolved input to results: topology, cost model, graph, replay, analysis.
/// Shared by `run` and by `sweep`'s per-scenario child processes.
#include <nlohmann/json.hpp>
#include <string>

#include "report/output.hpp"
#include "scenario/specs.hpp"

namespace cpsim::app {

struct SimulateOptions {
  std::string json_path;            ///< write the result JSON here ("" = don't)
  std::string trace_path;           ///< write a Chrome trace here ("" = don't)
  report::TraceFilter trace_filter;
};

struct SimulateOutput {
  nlohmann::json result;
  std::string summary;
};

/// Throws std::invalid_argument for combinations the schedule cannot build (exit code 2) and
/// std::runtime_error for failures while simulating or writing (exit code 1).
SimulateOutput simulate(const scenario::Scenario& sc, const SimulateOptions& opt);

/// Parses "0-3,7" into {0,1,2,3,7}; throws std::invalid_argument.
std::vector<int> parse_index_list(const std::string& s);

}  // namespace cpsim::app
