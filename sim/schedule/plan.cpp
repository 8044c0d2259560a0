#include "schedule/plan.hpp"

#include <optional>

#include "log/log.hpp"
#include "schedule/attention.hpp"
#include "schedule/replicas.hpp"

namespace cpsim::schedule {

scenario::Scenario priced_scenario(const scenario::Scenario& sc) {
  scenario::Scenario s = sc;
  s.perturb.gpu_slowdown.clear();
  for (const auto& [rank, f] : sc.perturb.gpu_factors(sc.platform.gpus_per_node))
    if (f != 1) s.perturb.gpu_slowdown[rank] = f;
  s.perturb.node_slowdown.clear();
  scenario::PerturbSpec net;
  net.links = sc.perturb.links;
  net.rails_down = sc.perturb.rails_down;
  if (net.any()) s.simulation.symmetry = scenario::Symmetry::Off;
  return s;
}

Plan plan(const scenario::Scenario& sc, const model::Topology& topo, const model::CostModel& cost) {
  Plan p;
  p.scenario = priced_scenario(sc);
  std::optional<Pricer> pricer(std::in_place, cost);
  auto build = [&] {
    p.graph = TaskGraph();
    pricer.emplace(cost);
    p.info = build_scenario(p.scenario, topo, *pricer, p.graph);
  };
  try {
    build();
  } catch (const LeanRefused& e) {
    log::info(std::string("shortcut refused, building again: ") + e.what());
    // Phantoms must be built after all: a TP phantom left out of one TP collective joins one
    // that builds every member (again without mirroring TP ranks), or a replica's traffic
    // crosses shared spines (again, whole).
    bool built = false;
    if (tp_mirror(p.scenario, topo).empty()) {
      p.scenario.simulation.mirror_tp = false;
      try {
        build();
        built = true;
      } catch (const LeanRefused&) {
      }
    }
    if (!built) {
      p.scenario.simulation.lean_collectives = false;
      build();
    }
  }
  p.graph.finalize();
  p.pricing = pricer->sources();
  p.pricing_time_s = pricer->times();
  p.extrapolated_ops = pricer->extrapolated();
  return p;
}

}  // namespace cpsim::schedule
