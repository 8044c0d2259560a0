// The SimGrid platform: simgrid_platform.hpp (and simgrid.cpp, why it is built this way).
#include "engine/simgrid_platform.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace cpsim::engine::detail {

namespace sg4 = simgrid::s4u;
namespace kr = simgrid::kernel::routing;
using schedule::OpKind;

/// Hosts only anchor comms (compute does not run on them); any speed will do.
constexpr double kHostSpeed = 1e12;

void TopologyZone::get_local_route(const kr::NetPoint* src, const kr::NetPoint* dst, kr::Route* into,
                                   double* /*latency: zero, see the top of simgrid.cpp*/) {
  if (const int slot = slot_of_vertex.at(src->id()); slot >= 0) {
    if (slot_capped[slot]) into->link_list_.push_back(slot_cap[slot]->get_impl());
    for (uint32_t l : slot_links[slot]) into->link_list_.push_back(links[l]->get_impl());
    return;
  }
  const int s = gpu_of_vertex.at(src->id()), d = gpu_of_vertex.at(dst->id());
  if (sg4::Link* cap = cap_of_vertex[src->id()]) into->link_list_.push_back(cap->get_impl());
  for (uint32_t l : topo_.route(s, d)) into->link_list_.push_back(links[l]->get_impl());
}

std::vector<std::pair<int, double>> capped_pairs(const schedule::TaskGraph& g) {
  std::vector<std::pair<int, double>> pairs;
  std::set<std::pair<int, double>> seen;
  auto add = [&](int rank, double cap_Bps) {
    if (seen.insert({rank, cap_Bps}).second) pairs.emplace_back(rank, cap_Bps);
  };
  auto capped = [&](schedule::OpId lo, schedule::OpId hi, auto&& on) {
    g.for_each_op_in(lo, hi, [&](schedule::OpId, const schedule::Op& op) {
      if (op.kind == OpKind::Transfer && op.max_rate_Bps > 0 && op.rank != op.peer) on(op.rank, op.max_rate_Bps);
    });
  };
  // A copied range's pairs are its original's shifted, in the order they first come there: the
  // original is read once for all its copies. Through every op (for_each_op) this pass was 5 %
  // of the 70B full replay's instructions (counted with its 80 layers cut to 16).
  std::map<std::pair<schedule::OpId, uint32_t>, std::vector<std::pair<int, double>>> firsts;  // by source range
  g.for_each_stretch([&](schedule::OpId lo, schedule::OpId hi) { capped(lo, hi, add); },
                     [&](schedule::OpId, uint32_t count, schedule::OpId src, int32_t rank_offset) {
                       auto [it, fresh] = firsts.try_emplace({src, count});
                       if (fresh) {
                         std::set<std::pair<int, double>> own;
                         capped(src, src + count, [&](int rank, double cap_Bps) {
                           if (own.insert({rank, cap_Bps}).second) it->second.emplace_back(rank, cap_Bps);
                         });
                       }
                       for (const auto& [rank, cap_Bps] : it->second) add(rank + rank_offset, cap_Bps);
                     });
  return pairs;
}

SimgridPlatform build_platform(const schedule::TaskGraph& g, const model::Topology& topo, bool pipelines) {
  SimgridPlatform pf;
  auto* zone = pf.zone = new TopologyZone(topo);  // the root zone; the Engine owns and frees it
  const int gpus = topo.gpus();
  pf.hosts.resize(gpus);
  for (int gpu = 0; gpu < gpus; ++gpu) {
    pf.hosts[gpu] = zone->create_host("gpu" + std::to_string(gpu), std::vector<double>{kHostSpeed});
    zone->gpu_of_vertex.push_back(gpu);
    zone->cap_of_vertex.push_back(nullptr);
    zone->slot_of_vertex.push_back(-1);
  }
  for (const auto& l : topo.links())
    zone->links.push_back(zone->create_link(l.name, std::vector<double>{l.bw_Bps})
                              ->set_latency(0)
                              ->set_sharing_policy(sg4::Link::SharingPolicy::SHARED)
                              ->seal());
  // One cap link per (GPU, cap), not one per cap: a link shared by every capped flow of the
  // platform would join them all into one max-min component, so that each transfer start/end
  // re-solved every capped flow (selective update works per connected component).
  for (const auto& [rank, cap_Bps] : capped_pairs(g)) {
    const std::string name = "gpu" + std::to_string(rank) + ".cap" + std::to_string(pf.capped_hosts.size() + 1);
    sg4::Link* cap = zone->create_link(name, std::vector<double>{cap_Bps})
                         ->set_latency(0)
                         ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                         ->seal();
    pf.capped_hosts[{rank, cap_Bps}] = zone->create_host(name, std::vector<double>{kHostSpeed});
    zone->gpu_of_vertex.push_back(rank);
    zone->cap_of_vertex.push_back(cap);
    zone->slot_of_vertex.push_back(-1);
  }
  // Pipeline host pairs: as many as pipelines can run at once, at most one per GPU (a GPU is
  // in a few collectives at a time, each of a few pipelines per GPU it spans).
  if (pipelines) {
    const size_t slots = std::min(g.pipelines().size(), static_cast<size_t>(gpus) + 64);
    zone->slot_links.resize(slots);
    zone->slot_capped.assign(slots, 0);
    for (size_t k = 0; k < slots; ++k) {
      std::pair<sg4::Host*, sg4::Host*> pair;
      for (int end = 0; end < 2; ++end) {
        const std::string name = "pipe" + std::to_string(k) + (end == 0 ? ".src" : ".dst");
        (end == 0 ? pair.first : pair.second) = zone->create_host(name, std::vector<double>{kHostSpeed});
        zone->gpu_of_vertex.push_back(-1);
        zone->cap_of_vertex.push_back(nullptr);
        zone->slot_of_vertex.push_back(end == 0 ? static_cast<int>(k) : -1);
      }
      pf.pipe_hosts.push_back(pair);
      zone->slot_cap.push_back(zone->create_link("pipe" + std::to_string(k) + ".cap", std::vector<double>{1.0})
                                   ->set_latency(0)
                                   ->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)
                                   ->seal());
    }
  }
  zone->seal();
  return pf;
}

/// Pipelines of this many members or more make SimGrid solve the whole max-min system at each
/// event (network/optim:Full) instead of the connected part that changed (Lazy, the default).
/// A pipeline's Comm joins every link its members cross, so one DP x CP ring lane makes the
/// platform one component, and Lazy's walk of it (System::update_modified_cnst_set_rec) costs
/// ~k^2 / 2 per solve for a variable of k links (see route_pipeline). Measured, whole SimGrid
/// run, Lazy -> Full (both with private links left out):
///  - 405B, 16,384 GPUs, tp 2, cp 16, pp 8, dp 64, USP (1,024-member lanes): 150 -> 59 s;
///  - the same, tp 2, cp 8, pp 16, dp 64 (512-member lanes): 26.8 -> 18.0 s;
///  - Llama-3 70B, 1,024 GPUs, tp 4, cp 8, dp 32 (256-member lanes, before the private
///    links): 162 -> 71 s;  tp 2, cp 16, dp 32, ZeRO-2 (512): 1,050 -> 188 s;
///  - Llama-3 8B, 4 nodes, pipelined (32-member lanes): 0.74 -> 0.61 s.
/// Without pipelines Lazy wins where the platform falls into many small components (the 70B
/// full replay, 1,024 GPUs: 34 -> 82 s with Full; DeepSeek-V3, 32 nodes: 8.3 -> 10.9 s), so the
/// graph decides. Both are SimGrid's exact solve; Full keeps each flow's remaining bytes by
/// subtraction at every event, Lazy by date, so times differ by rounding: 3e-11 relative on
/// the 405B runs above, 1.3e-5 on the 70B tp 2 one (compute interference feeds transfer times
/// back into compute and amplifies it, as for the solo timers).
constexpr uint32_t kFullUpdateMembers = 128;

bool full_update(const schedule::TaskGraph& g) {
  for (const schedule::Pipeline& p : g.pipelines())
    if (p.count >= kFullUpdateMembers) return true;
  return false;
}

}  // namespace cpsim::engine::detail
