#pragma once
/// The schedule stage's product: the finished (finalized) task graph of a scenario with what
/// the build and the pricing found. Engines replay `graph`; the report reads the Plan and the
/// engine's Trace, nothing else (so it links neither an engine nor SimGrid).
#include <map>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "scenario/specs.hpp"
#include "schedule/step.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

struct Plan {
  /// The scenario as the builders and the pricing saw it (see priced_scenario).
  scenario::Scenario scenario;
  TaskGraph graph;   ///< finalized; graph.noise() holds the fleet noise (per-rank factors, jitter)
  BuildInfo info;
  /// op kind ("attention", "gemm", ...) -> cost source -> ops priced from it
  std::map<std::string, std::map<std::string, long>> pricing;
  /// op kind -> cost source -> nominal seconds of the ops it priced (the shares the summary shows)
  std::map<std::string, std::map<std::string, double>> pricing_time_s;
  long extrapolated_ops = 0;
};

/// The scenario the builders and the pricing see: slow_nodes folded into slow_gpus (the
/// pricing reads only those) and factors of 1 dropped (they change nothing, and the builder
/// takes any slow GPU as a reason to simulate every data-parallel replica); no replica standing
/// for all when links or rails are perturbed (replicas then differ; the builder checks only
/// per-GPU perturbations).
scenario::Scenario priced_scenario(const scenario::Scenario& sc);

/// Builds and finalizes the graph of priced_scenario(sc). Throws std::invalid_argument for
/// combinations the schedule cannot build.
Plan plan(const scenario::Scenario& sc, const model::Topology& topo, const model::CostModel& cost);

}  // namespace cpsim::schedule
