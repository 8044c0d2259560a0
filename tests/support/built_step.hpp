#pragma once
// A scenario's step built as `cpsim run` builds it, for the tests that hold a schedule in the
// graph and in time. Priced by the roofline cost model, so the expected numbers follow from the
// mechanisms rather than from measured kernel prices.
#include <memory>

#include "engine/replay.hpp"
#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "schedule/step.hpp"

namespace cpsim::test {

struct BuiltStep {
  explicit BuiltStep(const scenario::Scenario& sc)
      : topo(sc.platform, sc.perturb), cost(model::CostModel::roofline(sc.platform.gpu)), pricer(*cost) {
    info = schedule::build_scenario(sc, topo, pricer, g);
    g.finalize();
  }
  BuiltStep(const BuiltStep&) = delete;
  BuiltStep& operator=(const BuiltStep&) = delete;

  /// The step's time on the analytic engine.
  double analytic_s() const { return engine::replay_analytic(g, topo).makespan_s; }

  model::Topology topo;
  std::unique_ptr<model::CostModel> cost;
  schedule::Pricer pricer;  ///< the prices' sources and times (Pricer::sources, times)
  schedule::TaskGraph g;
  schedule::BuildInfo info;
};

}  // namespace cpsim::test
