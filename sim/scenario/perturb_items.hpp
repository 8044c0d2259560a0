#pragma once
/// A scenario's `perturb:` section one perturbation at a time, each with what removing it
/// leaves: the what-if prices each fault (a rail down, a degraded link, a slow GPU or node, the
/// fleet's noise) by simulating the step without it.
#include <string>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::scenario {

struct PerturbItem {
  std::string kind;    ///< "rail_down", "link", "slow_node", "slow_gpu", "gpu_variation", "jitter"
  std::string label;   ///< "rail 0 down on every node", "GPU 3 slowed x1.2"
  /// Within a kind, how far it is from nominal (|factor - 1|, 1 / bw_factor - 1, cv): the
  /// order in which a capped what-if takes them.
  double severity = 0;
  /// Whether it changes the network (links, rails): the topology and the graph are built
  /// again without it; the others change only the fleet noise the same graph is replayed with.
  bool network = false;
  PerturbSpec without;  ///< the scenario's perturbations with this one removed
};

/// Every perturbation of `p` that changes something (factors of 1, zero spreads and zero
/// latencies are none; interference, the same on every GPU, is a platform property and not
/// counted, as PerturbSpec::any). Ordered so that the first N are the most severe of each kind
/// in turn: round robin over the kinds in the order above, each kind most severe first (ties
/// in the scenario's order).
std::vector<PerturbItem> perturb_items(const PerturbSpec& p);

/// `p` with every perturbation perturb_items lists removed.
PerturbSpec without_all(const PerturbSpec& p);

}  // namespace cpsim::scenario
