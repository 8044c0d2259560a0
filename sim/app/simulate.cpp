#include "app/simulate.hpp"

#include <stdexcept>

#include "engine/replay.hpp"
#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "schedule/step.hpp"

namespace cpsim::app {

SimulateOutput simulate(const scenario::Scenario& sc, const SimulateOptions& opt) {
  const model::Topology topo(sc.platform);
  const auto cost = model::CostModel::make(sc.cost.profile, sc.platform.gpu);
  schedule::TaskGraph g;
  schedule::Pricer pricer(*cost, sc, topo.gpus());
  const schedule::BuildInfo info = schedule::build_scenario(sc, topo, pricer, g);
  g.finalize();
  engine::ReplayOptions ro;
  ro.interference = sc.perturb.interference >= 0 ? sc.perturb.interference
                                                 : sc.platform.compute_interference;
  const engine::Trace tr = sc.simulation.engine == scenario::EngineKind::SimGrid
                               ? engine::replay_simgrid(g, topo, ro)
                               : engine::replay_analytic(g, topo, ro);
  const report::Result r = report::analyze(sc, g, tr, info, pricer);
  SimulateOutput out;
  out.result = report::result_json(r, sc, g);
  out.result["cost_model"] = cost->describe();
  out.summary = report::summary_table(r, sc);
  if (!opt.json_path.empty()) report::write_atomic(opt.json_path, out.result.dump(2) + "\n");
  if (!opt.trace_path.empty())
    report::write_atomic(opt.trace_path, report::chrome_trace(g, tr, opt.trace_filter).dump() + "\n");
  return out;
}

std::vector<int> parse_index_list(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string part = s.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    try {
      if (dash == std::string::npos) {
        out.push_back(std::stoi(part));
      } else {
        const int a = std::stoi(part.substr(0, dash)), b = std::stoi(part.substr(dash + 1));
        if (b < a || b - a > 1000000) throw std::invalid_argument("range");
        for (int i = a; i <= b; ++i) out.push_back(i);
      }
    } catch (const std::exception&) {
      throw std::invalid_argument("expected a list like 0-3,7; got '" + s + "'");
    }
    pos = comma + 1;
  }
  return out;
}

}  // namespace cpsim::app
