// Engine dispatch.
#include "engine/replay.hpp"

namespace cpsim::engine {

Trace replay(const schedule::TaskGraph& g, const model::Topology& topo, scenario::EngineKind kind,
             const ReplayOptions& opt) {
  return kind == scenario::EngineKind::SimGrid ? replay_simgrid(g, topo, opt)
                                               : replay_analytic(g, topo, opt);
}

}  // namespace cpsim::engine
