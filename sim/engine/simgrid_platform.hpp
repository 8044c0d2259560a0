#pragma once
/// The SimGrid platform the replay runs on (simgrid.cpp says why it is built this way): one
/// host per GPU in a NetZone whose routes come from model::Topology when SimGrid asks, one
/// SHARED link per Topology link, a shadow host per (GPU, rate cap) behind a FATPIPE cap link,
/// and the host pairs pipelines run between. Only sim/engine includes SimGrid.
#include <map>
#include <utility>
#include <vector>

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u.hpp>

#include "model/topology.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::engine::detail {

/// Routes computed from the Topology when SimGrid asks for them (once per comm).
class TopologyZone final : public simgrid::kernel::routing::NetZoneImpl {
 public:
  explicit TopologyZone(const model::Topology& topo) : NetZoneImpl("cpsim"), topo_(topo) {}

  /// Per vertex (host netpoint id): its GPU and the cap link its flows cross first (or null);
  /// for a pipeline host, -1 and null.
  std::vector<int> gpu_of_vertex;
  std::vector<simgrid::s4u::Link*> cap_of_vertex;
  /// Per vertex: the pipeline slot it is the source host of, or -1; per slot: the Topology
  /// links of the pipeline that holds it (set before its Comm starts, which asks the route).
  std::vector<int> slot_of_vertex;
  std::vector<std::vector<uint32_t>> slot_links;
  /// Per slot: a FATPIPE link standing for the pipeline's private links (their tightest
  /// bandwidth per member), and whether its route crosses it now.
  std::vector<simgrid::s4u::Link*> slot_cap;
  std::vector<char> slot_capped;
  /// Per Topology link.
  std::vector<simgrid::s4u::Link*> links;

 protected:
  void get_local_route(const simgrid::kernel::routing::NetPoint* src, const simgrid::kernel::routing::NetPoint* dst,
                       simgrid::kernel::routing::Route* into, double* latency) override;

 private:
  const model::Topology& topo_;
};

struct SimgridPlatform {
  TopologyZone* zone = nullptr;  ///< the root zone; the Engine owns and frees it
  std::vector<simgrid::s4u::Host*> hosts;                                ///< per GPU
  std::map<std::pair<int, double>, simgrid::s4u::Host*> capped_hosts;    ///< (GPU, cap) -> shadow host
  /// Pipeline host pairs (source, destination), one per slot.
  std::vector<std::pair<simgrid::s4u::Host*, simgrid::s4u::Host*>> pipe_hosts;
};

/// The (GPU, cap) of every capped transfer of `g` (Op::max_rate_Bps), each once, in the order
/// of the first op with it: one cap link and shadow host each.
std::vector<std::pair<int, double>> capped_pairs(const schedule::TaskGraph& g);
/// The platform for replaying `g` on `topo` in the process's Engine (created first), sealed.
SimgridPlatform build_platform(const schedule::TaskGraph& g, const model::Topology& topo, bool pipelines);
/// Whether `g`'s pipelines are wide enough that SimGrid should solve the whole max-min system
/// at each event (network/optim:Full) rather than the part that changed (see the .cpp).
bool full_update(const schedule::TaskGraph& g);

}  // namespace cpsim::engine::detail
