// Lean pipelined ring lanes (collective_parts.hpp: lean_lanes).
//
// Why the analytic step time does not change: every member of a pipelined lane starts when the
// collective's join ends (fenced_transfer after the join; unordered, so in no stream queue),
// and all of them end at the join plus the longest latency plus the longest serialisation
// (engine/analytic.cpp, TaskGraph::Pipeline). A transfer between two phantom GPUs carries
// nothing a built GPU computes on and slows no built GPU's kernels (interference counts a GPU's
// own transfers): it enters the lane only through those two maxima, which the members that
// attain them carry. The phantom members keep their fence ops (their streams pace the later
// collectives they join), ending once every lane has, as they did when their transfers did.
//
// What it saves: the 405B on 16,384 GPUs with ZeRO-3 gathers each layer's weights over DP x CP
// = 1,024 GPUs per micro-batch and pass, on 8 rails: 8 transfers and 4 fence ops per member, of
// which one replica's 16-256 GPUs are built. A lean member keeps its 4 fence ops.
#include <algorithm>
#include <array>
#include <tuple>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "schedule/collective_parts.hpp"
#include "schedule/lone_transfer.hpp"
#include "schedule/step.hpp"

namespace cpsim::schedule::detail {

bool lean_group(const TaskGraph& g, const CollectiveRequest& req) {
  if (!g.has_phantoms()) return false;
  return std::any_of(req.ranks.begin(), req.ranks.end(), [&](int r) { return g.phantom(r); });
}

CollectiveMemo* memo_of(TaskGraph& g) {
  if (!g.has_phantoms()) return nullptr;
  if (!g.collective_memo()) g.collective_memo() = std::make_shared<CollectiveMemo>();
  return g.collective_memo().get();
}

std::string ranks_key(const std::vector<int>& ranks) {
  return std::string(reinterpret_cast<const char*>(ranks.data()), ranks.size() * sizeof(int));
}

void keep_phantoms(TaskGraph& g, const CollectiveRequest& req) {
  if (!g.has_phantoms()) return;
  Phantoms& ph = g.phantoms();
  for (int r : req.ranks) {
    if (!g.phantom(r)) continue;
    const auto i = static_cast<size_t>(r);
    if (ph.state[i] == Phantoms::kDropped)
      throw LeanRefused("lean build refused: GPU " + std::to_string(r) +
                        ", left out of a collective, joins one that builds every member");
    ph.state[i] = Phantoms::kKept;
    ph.history[i] = ++ph.histories;  // its own from now on
  }
}

std::vector<char> lean_ring_members(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                                    const Lane& lane) {
  const int n = static_cast<int>(req.ranks.size());
  std::vector<char> full(static_cast<size_t>(n), 1);
  if (!lean_group(g, req)) return full;
  Phantoms& ph = g.phantoms();
  CollectiveMemo& memo = *memo_of(g);
  std::string group = ranks_key(req.ranks);
  for (int i : lane.order) group.append(reinterpret_cast<const char*>(&i), sizeof i);
  auto memo_hops = memo.hops.find(group);
  if (memo_hops == memo.hops.end()) {
    // Each hop's kind: equal latency, bandwidth and class (what times a transfer here).
    std::vector<uint32_t> kind;
    std::map<std::tuple<int, double, double>, uint32_t> kinds;
    for (int k = 0; k < n; ++k) {
      const Hop h = make_hop(topo, req.ranks[lane.order[k]], req.ranks[lane.order[(k + 1) % n]]);
      kind.push_back(kinds.emplace(std::tuple{static_cast<int>(h.cls), h.latency_s, h.bw_Bps},
                                   static_cast<uint32_t>(kinds.size()))
                         .first->second);
    }
    memo_hops = memo.hops.emplace(group, std::move(kind)).first;
  }
  const std::vector<uint32_t>& kind = memo_hops->second;
  // A member's part is its launch (after its dependency and its send stream's last op), its
  // send and its receive, both after the join: what its history, dependency and the two hops'
  // kinds decide. Members alike in these are alike after it too; those of different twins are
  // kept apart, as the collectives after the step's backward wait for their twin's gradients
  // (step.cpp: a mirrored replica waits as its twin does).
  std::map<std::array<uint32_t, 5>, std::vector<int>> alike;  // -> group indices, in ring order
  for (int k = 0; k < n; ++k) {
    const int i = lane.order[k];
    const int r = req.ranks[i];
    if (!g.phantom(r)) continue;
    full[static_cast<size_t>(i)] = 0;
    const auto ri = static_cast<size_t>(r);
    alike[{ph.history[ri], static_cast<uint32_t>(ph.twin[ri]), req.deps.empty() ? kNoOp : req.deps[static_cast<size_t>(i)],
           kind[static_cast<size_t>(k)], kind[static_cast<size_t>((k + n - 1) % n)]}]
        .push_back(i);
  }
  for (const auto& [key, members] : alike) {
    int stand = -1;
    for (int i : members)
      if (ph.state[static_cast<size_t>(req.ranks[i])] == Phantoms::kKept) {
        full[static_cast<size_t>(i)] = 1;  // every op of a kept phantom is built
        if (stand < 0) stand = i;
      }
    if (stand < 0) {
      // None built so far: only phantoms without ops yet (history 0) may start now.
      if (ph.history[static_cast<size_t>(req.ranks[members.front()])] != 0)
        throw LeanRefused("lean build refused: no phantom GPU of GPU " + std::to_string(req.ranks[members.front()]) +
                          "'s history was built");
      stand = members.front();
      full[static_cast<size_t>(stand)] = 1;
      ph.state[static_cast<size_t>(req.ranks[stand])] = Phantoms::kKept;
    }
    const uint32_t next = ++ph.histories;
    for (int i : members) {
      const auto r = static_cast<size_t>(req.ranks[i]);
      if (ph.state[r] == Phantoms::kUnseen) ph.state[r] = Phantoms::kDropped;
      ph.history[r] = next;
    }
  }
  return full;
}

namespace {

/// What decides a collective's lanes: its group, size, cost and lanes (the lane orders follow
/// from the group and the number of lanes on this graph's topology).
std::string lanes_key(const CollectiveRequest& req, const std::vector<Lane>& lanes, const LaneCost& c,
                      const OpLabel& label) {
  std::string k;
  auto put = [&k](const auto& v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(req.bytes);
  put(c.steps);
  put(c.protocol);
  put(c.efficiency);
  put(label.step);
  put(lanes.size());
  for (const Lane& l : lanes) put(l.share);
  for (int r : req.ranks) put(r);
  return k;
}

/// One lane member as close_fence prices it and the analytic engine times it.
struct MemberCost {
  float sharers = 1;
  LoneTransfer time;
};

MemberCost member_cost(const model::Topology& topo, const Hop& h, const std::vector<uint32_t>& route,
                       const std::unordered_map<uint32_t, uint32_t>& load, double wire_bytes, const LaneCost& c,
                       double lane_step_s) {
  MemberCost m;
  m.sharers = fair_sharers(topo, route, [&load](uint32_t l) { return load.at(l); });
  m.time = lone_transfer(pipelined_latency_s(topo.spec().nccl, h, c.protocol, c.steps, lane_step_s), h.latency_s,
                         h.bw_Bps, 0, m.sharers, wire_bytes);
  return m;
}

/// Each lane's lane_step_latency_s, from every member's hop.
std::vector<double> lane_steps(const model::Topology& topo, const CollectiveRequest& req,
                               const std::vector<Lane>& lanes, int protocol) {
  const int n = static_cast<int>(req.ranks.size());
  std::vector<double> out;
  for (const Lane& lane : lanes) {
    std::vector<Hop> hops;
    for (int k = 0; k < n; ++k)
      hops.push_back(make_hop(topo, req.ranks[lane.order[k]], req.ranks[lane.order[(k + 1) % n]]));
    out.push_back(lane_step_latency_s(topo.spec().nccl, hops, protocol));
  }
  return out;
}

LeanLanes work_out(const TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                   const std::vector<Lane>& lanes, const LaneCost& c, const std::vector<double>& lane_step) {
  const int n = static_cast<int>(req.ranks.size());
  // close_fence counts every transfer of the collective on each link (one step: pipelined).
  std::vector<std::vector<std::vector<uint32_t>>> routes(lanes.size());
  std::unordered_map<uint32_t, uint32_t> load;
  for (size_t l = 0; l < lanes.size(); ++l)
    for (int k = 0; k < n; ++k) {
      routes[l].push_back(topo.route(req.ranks[lanes[l].order[k]], req.ranks[lanes[l].order[(k + 1) % n]]));
      for (uint32_t link : routes[l].back()) ++load[link];
    }
  LeanLanes out;
  out.kept.resize(lanes.size());
  out.sharers.resize(lanes.size());
  for (size_t l = 0; l < lanes.size(); ++l) {
    const double step_bytes = req.bytes * lanes[l].share / n;
    const double wire = step_bytes * c.steps / c.efficiency;
    std::vector<MemberCost> m;
    int latest = 0, longest = 0;
    for (int k = 0; k < n; ++k) {
      const int src = req.ranks[lanes[l].order[k]], dst = req.ranks[lanes[l].order[(k + 1) % n]];
      const auto& route = routes[l][static_cast<size_t>(k)];
      m.push_back(member_cost(topo, hop_on_route(topo, src, dst, route), route, load, wire, c, lane_step[l]));
      if (m.back().time.latency_s > m[static_cast<size_t>(latest)].time.latency_s) latest = k;
      if (m.back().time.serialisation_s() > m[static_cast<size_t>(longest)].time.serialisation_s()) longest = k;
    }
    std::vector<char> keep(static_cast<size_t>(n), 0);
    for (int k = 0; k < n; ++k)
      keep[static_cast<size_t>(k)] = !g.phantom(req.ranks[lanes[l].order[k]]) ||
                                     !g.phantom(req.ranks[lanes[l].order[(k + 1) % n]]) || k == latest ||
                                     k == longest;
    // A pipeline has two members at least (TaskGraph::add_pipeline).
    for (int k = 0; k < n && std::count(keep.begin(), keep.end(), 1) < 2; ++k) keep[static_cast<size_t>(k)] = 1;
    for (int k = 0; k < n; ++k)
      if (keep[static_cast<size_t>(k)]) {
        out.kept[l].push_back(static_cast<uint32_t>(k));
        out.sharers[l].push_back(m[static_cast<size_t>(k)].sharers);
      }
  }
  return out;
}

}  // namespace

void lean_lanes(TaskGraph& g, const model::Topology& topo, Fence& f, const CollectiveRequest& req,
                const std::vector<Lane>& lanes, const OpLabel& label, OpId join, const LaneCost& c) {
  const int n = static_cast<int>(req.ranks.size());
  const std::string key = lanes_key(req, lanes, c, label);
  keep_phantoms(g, req);
  // The lanes' per-step latencies, once per group, lanes and protocol (memo_of: a lean build).
  CollectiveMemo& memo = *memo_of(g);
  const std::string step_key = ranks_key(req.ranks) + "/" + std::to_string(lanes.size()) + "/" +
                               std::to_string(c.protocol);
  auto st = memo.lane_steps.find(step_key);
  if (st == memo.lane_steps.end()) st = memo.lane_steps.emplace(step_key, lane_steps(topo, req, lanes, c.protocol)).first;
  const std::vector<double>& lane_step = st->second;
  auto& cache = g.phantoms().lanes;
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, work_out(g, topo, req, lanes, c, lane_step)).first;
  const LeanLanes& ll = it->second;
  const auto& nc = topo.spec().nccl;
  std::vector<OpId> firsts;
  std::vector<char> dropped(static_cast<size_t>(n), 0);
  for (size_t l = 0; l < lanes.size(); ++l) {
    const Lane& lane = lanes[l];
    const double step_bytes = req.bytes * lane.share / n;
    const auto first = static_cast<OpId>(g.size());
    size_t j = 0;
    for (int k = 0; k < n; ++k) {
      const int from = lane.order[k], to = lane.order[(k + 1) % n];
      if (j == ll.kept[l].size() || ll.kept[l][j] != static_cast<uint32_t>(k)) {
        dropped[static_cast<size_t>(from)] = dropped[static_cast<size_t>(to)] = 1;
        continue;
      }
      const Hop h = make_hop(topo, req.ranks[from], req.ranks[to]);
      const double extra = pipelined_latency_s(nc, h, c.protocol, c.steps, lane_step[l]);
      const OpId t = fenced_transfer(g, f, req, from, to, step_bytes * c.steps / c.efficiency, label, extra, join);
      g.op_mut(t).sharers = ll.sharers[l][j];
      ++j;
    }
    if (!g.add_pipeline(first, static_cast<OpId>(g.size())))
      throw std::logic_error("lean_lanes: a lane's kept transfers do not form a pipeline");
    firsts.push_back(first);
  }
  f.sharers_set = true;
  // The lanes' end, on the first member's send stream between the join and its end op (which
  // waits for its own transfers in every lane, so no later than this): a member whose transfers
  // were left out ends with the lanes, as its transfers did.
  OpLabel dl = label;
  dl.name = g.intern("collective_lanes_done");
  const OpId lanes_done = g.add_compute(req.ranks[0], req.send_stream, 0.0, dl);
  g.add_edge(join, lanes_done);
  for (OpId t : firsts) g.add_edge(t, lanes_done);
  for (int i = 0; i < n; ++i)
    if (dropped[static_cast<size_t>(i)]) {
      f.sends[static_cast<size_t>(i)].push_back(lanes_done);
      f.recvs[static_cast<size_t>(i)].push_back(lanes_done);
    }
}

}  // namespace cpsim::schedule::detail
