// NCCL collectives as their algorithm's steps. A ring step is n transfers, one per rank to its
// successor; the send of step s on a rank waits for the receive of step s-1 on that rank (the
// data it forwards). Every transfer carries its hop's NCCL per-hop latency as software latency,
// the first step also the launch (base) latency, and moves wire bytes = data / protocol
// efficiency: LL stores 8 B per 4 B of data, so it halves the reachable bandwidth. Algorithm,
// protocol and channels come from NCCL's tuner (nccl_tuner.cpp); channels that use the same
// links run as one lane (collective_parts.hpp), rings over several nodes as one lane per rail.
#include "schedule/collectives.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "schedule/collective_parts.hpp"

namespace cpsim::schedule {

namespace detail {

Hop make_hop(const model::Topology& topo, int src, int dst) {
  return hop_on_route(topo, src, dst, topo.route(src, dst));
}

Hop hop_on_route(const model::Topology& topo, int src, int dst, const std::vector<uint32_t>& route) {
  Hop h;
  h.src = src;
  h.dst = dst;
  h.latency_s = 0;
  h.bw_Bps = std::numeric_limits<double>::infinity();
  for (uint32_t l : route) {
    const auto& link = topo.links()[l];
    h.latency_s += link.latency_s;
    h.bw_Bps = std::min(h.bw_Bps, link.bw_Bps);
    h.cls = std::max(h.cls, link.cls);
  }
  return h;
}

double lane_step_latency_s(const scenario::NcclSpec& nc, const std::vector<Hop>& hops, int p) {
  double sum = 0;
  for (const Hop& h : hops) sum += hop_latency_s(nc, h.cls, p) + h.latency_s;
  return hops.empty() ? 0 : sum / static_cast<double>(hops.size());
}

double pipelined_latency_s(const scenario::NcclSpec& nc, const Hop& h, int p, int steps, double lane_step_s) {
  // Every hop of a lane once took the latency of its own class for all the steps: a ring over
  // 128 nodes then paid the network's 14 us (Simple) on each of its 1,023 steps where NCCL's
  // ring pays it on 127 (all-gather of 8 GiB: 200 GB/s busbw, 53 % of its NIC bound).
  return nc.base_latency_s[p] + steps * lane_step_s - h.latency_s;
}

float fair_sharers(const model::Topology& topo, const std::vector<uint32_t>& route,
                   const std::function<uint32_t(uint32_t)>& transfers_on) {
  // Each link splits its bandwidth over the transfers on it; the transfer runs at the worst
  // such share, which need not be on its narrowest link (the fat spine links are not).
  double alone = std::numeric_limits<double>::infinity(), fair = alone;
  for (uint32_t l : route) {
    const double bw = topo.links()[l].bw_Bps;
    alone = std::min(alone, bw);
    fair = std::min(fair, bw / transfers_on(l));
  }
  return route.empty() ? 1.0f : static_cast<float>(std::max(1.0, alone / fair));
}

double hop_latency_s(const scenario::NcclSpec& nc, model::LinkClass c, int p) {
  switch (c) {
    case model::LinkClass::NVLink:
      return nc.hop_nvlink_s[p];
    case model::LinkClass::PCIe:
    case model::LinkClass::CpuLink:
      return nc.hop_pcie_s[p];
    case model::LinkClass::Nic:
    case model::LinkClass::Spine:
      return nc.hop_net_s[p];
  }
  return nc.hop_net_s[p];
}

/// (collective_parts.hpp)
std::vector<std::vector<int>> nodes_of(const model::Topology& topo, const std::vector<int>& ranks) {
  std::vector<int> ids;
  std::map<int, std::vector<int>> m;
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    const int node = topo.node_of(ranks[i]);
    if (!m.count(node)) ids.push_back(node);
    m[node].push_back(i);
  }
  std::vector<std::vector<int>> out;
  for (int id : ids) out.push_back(m[id]);
  return out;
}

/// (collective_parts.hpp)
std::vector<std::vector<int>> domains_of(const model::Topology& topo, const std::vector<int>& ranks) {
  const auto& s = topo.spec();
  const int domain = s.intra == scenario::IntraFabric::NVSwitch
                         ? std::max(s.nvlink_domain_gpus, s.gpus_per_node) : s.gpus_per_node;
  std::vector<int> ids;
  std::map<int, std::vector<int>> m;
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    const int d = ranks[i] / domain;
    if (!m.count(d)) ids.push_back(d);
    m[d].push_back(i);
  }
  std::vector<std::vector<int>> out;
  for (int id : ids) out.push_back(m[id]);
  return out;
}

std::vector<Lane> ring_lanes(const model::Topology& topo, const std::vector<int>& ranks,
                             int lanes, int channels) {
  const int n = static_cast<int>(ranks.size());
  lanes = std::max(1, std::min(lanes, channels));
  std::vector<Lane> out(lanes);
  for (int l = 0; l < lanes; ++l)
    out[l].share = static_cast<double>(channels / lanes + (l < channels % lanes ? 1 : 0)) / channels;
  if (lanes == 1) {
    for (int i = 0; i < n; ++i) out[0].order.push_back(i);
    return out;
  }
  // Members per node, nodes in order of first appearance, members sorted by local index.
  std::vector<std::vector<int>> members = nodes_of(topo, ranks);
  for (auto& m : members) std::sort(m.begin(), m.end(), [&](int a, int b) { return ranks[a] < ranks[b]; });
  for (int l = 0; l < lanes; ++l) {
    for (size_t k = 0; k < members.size(); ++k) {
      const auto& m = members[k];
      const int sz = static_cast<int>(m.size());
      // Lane l leaves from the node's l-th member (by local index), each on its own rail. A
      // match on rail number l instead gave two lanes the same start wherever the members'
      // rails are not 0, 1, 2, ...: at tp 4, TP index 1's DP group (rails 1 and 5) ran both
      // lanes through rail 1's NIC, 68 % slower than TP index 0's; the Llama-3 8B on 4 nodes
      // (tp 2, CP 16: rails 0, 2, 4, 6) reduced its gradients over 3 NICs of 4 (step -1.1 %).
      const int start = l % sz;
      for (int j = 0; j < sz; ++j) {
        // Even nodes: rail l's member first, forwards. Odd nodes: backwards, ending there, so
        // the crossing into them leaves and enters on the rail before l.
        const int idx = k % 2 == 0 ? (start + j) % sz : (start - 1 - j + 2 * sz) % sz;
        out[l].order.push_back(m[idx]);
      }
    }
  }
  return out;
}

Fence open_fence(TaskGraph& g, const CollectiveRequest& req, const OpLabel& label) {
  const int n = static_cast<int>(req.ranks.size());
  Fence f;
  f.sends.resize(n);
  f.recvs.resize(n);
  OpLabel l = label;
  l.name = g.intern("collective_begin");
  for (int i = 0; i < n; ++i) {
    f.begin.push_back(g.add_compute(req.ranks[i], req.send_stream, 0.0, l));
    if (!req.deps.empty()) g.add_edge(req.deps[i], f.begin.back());
  }
  return f;
}

OpId fenced_transfer(TaskGraph& g, Fence& f, const CollectiveRequest& req, int from, int to,
                     double wire_bytes, const OpLabel& label, double extra_s, OpId after, double max_Bps) {
  const OpId t = g.add_transfer(req.ranks[from], req.send_stream, req.ranks[to], req.recv_stream,
                                wire_bytes, label, max_Bps, extra_s, /*unordered=*/true);
  if (after == kNoOp) {
    g.add_edge(f.begin[from], t);
    g.add_edge(f.begin[to], t);
  } else {
    g.add_edge(after, t);
  }
  f.sends[from].push_back(t);
  f.recvs[to].push_back(t);
  return t;
}

std::vector<OpId> close_fence(TaskGraph& g, const model::Topology& topo, Fence& f,
                              const CollectiveRequest& req, const OpLabel& label, bool by_step) {
  const int n = static_cast<int>(req.ranks.size());
  std::map<std::pair<int32_t, uint32_t>, uint32_t> load;  // (step, link) -> transfers
  std::vector<std::pair<OpId, std::vector<uint32_t>>> routes;
  for (const auto& sends : f.sends)
    for (OpId t : sends) {
      if (f.sharers_set) break;
      const Op& op = g.op(t);
      routes.emplace_back(t, topo.route(op.rank, op.peer));
      for (uint32_t l : routes.back().second) ++load[{by_step ? op.label.step : 0, l}];
    }
  for (const auto& [t, route] : routes) {
    const int32_t step = by_step ? g.op(t).label.step : 0;
    g.op_mut(t).sharers = fair_sharers(topo, route, [&](uint32_t l) { return load[{step, l}]; });
  }
  OpLabel l = label;
  l.name = g.intern("collective_end");
  std::vector<OpId> done(n);
  for (int i = 0; i < n; ++i) {
    const OpId es = g.add_compute(req.ranks[i], req.send_stream, 0.0, l);
    g.add_edge(f.begin[i], es);
    for (OpId t : f.sends[i]) g.add_edge(t, es);
    done[i] = g.add_compute(req.ranks[i], req.recv_stream, 0.0, l);
    g.add_edge(es, done[i]);
    for (OpId t : f.recvs[i]) g.add_edge(t, done[i]);
  }
  return done;
}

}  // namespace detail

namespace {

using detail::Hop;
using detail::hop_latency_s;
using detail::make_hop;

/// Broadcast pipelines the buffer: the first chunk travels hop by hop, the rest streams behind.
constexpr double kBroadcastChunkBytes = 512.0 * 1024;

int proto_index(Protocol p) { return p == Protocol::LL ? 0 : p == Protocol::LL128 ? 1 : 2; }

}  // namespace

CollectiveResult add_collective(TaskGraph& g, const model::Topology& topo,
                                const CollectiveRequest& in) {
  // NCCL's host-side launch on every member (platform runtime:), an "overhead" op on the
  // member's send stream that the collective's first step waits for.
  CollectiveRequest req = in;
  const int n = static_cast<int>(req.ranks.size());
  if (n == 0) throw std::invalid_argument("collective: empty rank group");
  if (!req.deps.empty() && static_cast<int>(req.deps.size()) != n)
    throw std::invalid_argument("collective: deps has " + std::to_string(req.deps.size()) +
                                " entries for " + std::to_string(n) + " ranks");
  if (!(req.bytes >= 0)) throw std::invalid_argument("collective: negative size");
  if (req.channels < 0) throw std::invalid_argument("collective: negative channel count");
  if (std::set<int>(req.ranks.begin(), req.ranks.end()).size() != req.ranks.size())
    throw std::invalid_argument("collective: a rank appears twice in the group");
  for (int r : req.ranks)
    if (r < 0 || r >= topo.gpus())
      throw std::out_of_range("collective: rank " + std::to_string(r) + " outside the platform's " +
                              std::to_string(topo.gpus()) + " GPUs");

  CollectiveResult res;
  auto dep = [&](int i) { return req.deps.empty() ? kNoOp : req.deps[i]; };
  if (n == 1) {
    res.done = {dep(0)};
    res.protocol = req.protocol == Protocol::Auto ? Protocol::Simple : req.protocol;
    return res;
  }

  const auto& nc = topo.spec().nccl;
  detail::CollectiveMemo* memo = detail::memo_of(g);
  const std::string group = memo ? detail::ranks_key(req.ranks) : std::string();
  GroupShape shape;
  if (!memo) {
    shape = group_shape(topo, req.ranks);
  } else {
    auto it = memo->shapes.find(group);
    if (it == memo->shapes.end()) it = memo->shapes.emplace(group, group_shape(topo, req.ranks)).first;
    shape = it->second;
  }
  // All-to-all is NCCL p2p (no tuner algorithm): the protocol by each peer's bytes, as NCCL
  // picks it (all_to_all.cpp); the tuner's figures as for a ring of that protocol.
  const bool p2p_op = req.op == CollOp::AllToAll;
  if (p2p_op && req.algorithm != Algorithm::Auto && req.algorithm != Algorithm::Ring)
    throw std::invalid_argument("collective: all-to-all runs as NCCL p2p, not " +
                                std::string(algorithm_name(req.algorithm)));
  const Protocol proto =
      p2p_op && req.protocol == Protocol::Auto ? detail::all_to_all_protocol(req.bytes, n) : req.protocol;
  const TunerChoice choice =
      nccl_tune(topo, req.op, shape, req.bytes, p2p_op ? Algorithm::Ring : req.algorithm, proto, req.channels);
  const int p = proto_index(choice.protocol);
  res.protocol = choice.protocol;
  res.algorithm = choice.algorithm;
  res.channels = choice.channels;
  res.predicted_s = choice.predicted_s;
  const double eff = nc.protocol_efficiency[p];

  // A lean build (TaskGraph::has_phantoms) leaves out the phantom members of a pipelined
  // single-lane ring that others alike stand for (lean_ring_members); the multi-rail one drops
  // transfers only (lean_lanes); any other keeps every member.
  const bool ring = choice.algorithm != Algorithm::Tree && choice.algorithm != Algorithm::NVLS &&
                    choice.algorithm != Algorithm::NVLSTree && req.op != CollOp::Broadcast &&
                    req.op != CollOp::Reduce && req.op != CollOp::AllToAll;
  const int steps = req.op == CollOp::AllReduce ? 2 * (n - 1) : n - 1;
  std::vector<detail::Lane> lane_set;
  if (ring) {
    const int lanes = shape.nodes > 1 ? shape.rails : 1, channels = std::max(1, choice.channels);
    if (!memo) {
      lane_set = detail::ring_lanes(topo, req.ranks, lanes, channels);
    } else {
      const std::string key = group + std::to_string(lanes) + "/" + std::to_string(channels);
      auto it = memo->lanes.find(key);
      if (it == memo->lanes.end()) it = memo->lanes.emplace(key, detail::ring_lanes(topo, req.ranks, lanes, channels)).first;
      lane_set = it->second;
    }
  }
  std::vector<char> built(static_cast<size_t>(n), 1);
  if (ring && lane_set.size() == 1 && g.pipelined_collectives())
    built = detail::lean_ring_members(g, topo, req, lane_set[0]);
  else if (!(ring && g.pipelined_collectives()))
    detail::keep_phantoms(g, req);  // (multi-rail pipelined lanes: lean_lanes)

  // NCCL's host-side launch on every member (platform runtime:), an "overhead" op on the
  // member's send stream that the collective's first step waits for.
  if (const double launch = topo.spec().runtime.nccl_launch_s; launch > 0) {
    req.deps.resize(req.ranks.size(), kNoOp);
    OpLabel l = req.label;
    l.name = g.intern("nccl_launch");
    l.category = g.intern("overhead");
    // A pipelined ring's transfers all wait for its join (below), so a bystander member's launch
    // (TaskGraph::set_bystanders) only feeds that join, which waits for the last of them: one
    // op after every bystander's dependency and send-stream tail, as long as one launch, ends
    // when the last of theirs would have (not slowed: overheads are host work). The same join
    // and the same step, exactly (tests/engine/bystander_test.cpp). The 405B with ZeRO-3, tp 8
    // cp 16 pp 2 dp 64, SimGrid: 18.6 M of its 61.2 M ops were bystanders' launches.
    const bool fold = g.has_bystanders() && ring && g.pipelined_collectives();
    OpId folded = kNoOp;
    for (size_t i = 0; i < req.ranks.size(); ++i) {
      if (!built[i]) continue;
      if (fold && g.bystander(req.ranks[i])) {
        if (folded == kNoOp) {
          Op f;
          f.rank = req.ranks[i];
          f.stream = req.send_stream;
          f.duration_s = launch;
          f.label = l;
          f.unordered = true;  // in no stream: it stands for launches on many
          folded = g.add(f);
        }
        g.add_edge(req.deps[i], folded);
        g.add_edge(g.bystander_tail(req.ranks[i], req.send_stream), folded);
        req.deps[i] = folded;
        continue;
      }
      const OpId o = g.add_compute(req.ranks[i], req.send_stream, launch, l);
      g.add_edge(req.deps[i], o);
      req.deps[i] = o;
    }
  }

  OpLabel label = req.label;
  if (label.name == 0) label.name = g.intern(coll_op_name(req.op));
  if (label.category == 0) label.category = g.intern("collective");
  if (choice.algorithm == Algorithm::Tree) {
    CollectiveResult r = detail::build_tree(g, topo, req, choice, label);
    r.protocol = res.protocol, r.algorithm = res.algorithm, r.channels = res.channels;
    r.predicted_s = res.predicted_s;
    return r;
  }
  if (choice.algorithm == Algorithm::NVLS || choice.algorithm == Algorithm::NVLSTree) {
    CollectiveResult r = detail::build_nvls(g, topo, req, choice, label);
    r.protocol = res.protocol, r.algorithm = res.algorithm, r.channels = res.channels;
    r.predicted_s = res.predicted_s;
    return r;
  }
  auto add = [&](const Hop& h, int step, double data_bytes, double extra_s) {
    OpLabel l = label;
    l.step = step;
    return g.add_transfer(h.src, req.send_stream, h.dst, req.recv_stream, data_bytes / eff, l, 0,
                          extra_s);
  };
  res.done.assign(n, kNoOp);

  if (req.op == CollOp::Broadcast || req.op == CollOp::Reduce) {
    // Root ranks[0]. Broadcast: a chain from the root; reduce: the same chain towards the root.
    // Per hop: the first chunk (forwarded as soon as it arrived) and the rest behind it.
    // NCCL runs them on its ring channels (tuning.cc: Ring only), each channel's ring leaving a
    // node through its own NIC (search.cc), and splits the buffer over the channels
    // (src/device/broadcast.h: each channel takes its slice of every loop): across nodes the
    // chain is one per rail, each with its lanes' share, as the ring collectives' lanes.
    const bool down = req.op == CollOp::Broadcast;
    const auto lanes = detail::ring_lanes(topo, req.ranks, shape.nodes > 1 ? shape.rails : 1,
                                          std::max(1, choice.channels));
    if (lanes.size() > 1) {
      detail::Fence fence = detail::open_fence(g, req, label);
      for (const auto& lane : lanes) {
        // The lane's ring, rotated to start at the root: every crossing between nodes but the
        // one back into the root's node is on the lane's rail.
        const auto at = std::find(lane.order.begin(), lane.order.end(), 0);
        std::vector<int> chain(lane.order.size());
        std::rotate_copy(lane.order.begin(), at, lane.order.end(), chain.begin());
        if (!down) std::reverse(chain.begin(), chain.end());
        const double bytes = req.bytes * lane.share;
        const double first = std::min(bytes, kBroadcastChunkBytes), rest = bytes - first;
        OpId prev_first = kNoOp;
        for (int j = 0; j + 1 < n; ++j) {
          const Hop h = make_hop(topo, req.ranks[chain[j]], req.ranks[chain[j + 1]]);
          OpLabel l = label;
          l.step = j;
          const OpId f = detail::fenced_transfer(
              g, fence, req, chain[j], chain[j + 1], first / eff, l,
              hop_latency_s(nc, h.cls, p) + (j == 0 ? nc.base_latency_s[p] : 0), prev_first);
          if (prev_first != kNoOp) {
            g.add_edge(fence.begin[chain[j]], f);
            g.add_edge(fence.begin[chain[j + 1]], f);
          }
          if (rest > 0)
            detail::fenced_transfer(g, fence, req, chain[j], chain[j + 1], rest / eff, l, 0, f);
          prev_first = f;
        }
      }
      res.done = detail::close_fence(g, topo, fence, req, label);
      return res;
    }
    std::vector<int> chain(n);
    for (int j = 0; j < n; ++j) chain[j] = down ? j : n - 1 - j;
    const double first = std::min(req.bytes, kBroadcastChunkBytes), rest = req.bytes - first;
    OpId prev_first = kNoOp;
    for (int j = 0; j + 1 < n; ++j) {
      const Hop h = make_hop(topo, req.ranks[chain[j]], req.ranks[chain[j + 1]]);
      const OpId f =
          add(h, j, first, hop_latency_s(nc, h.cls, p) + (j == 0 ? nc.base_latency_s[p] : 0));
      g.add_edge(dep(chain[j]), f);
      g.add_edge(dep(chain[j + 1]), f);
      g.add_edge(prev_first, f);
      OpId last = f;
      if (rest > 0) {
        last = add(h, j, rest, 0);
        g.add_edge(f, last);
      }
      res.done[chain[j + 1]] = last;
      if (j == 0) res.done[chain[0]] = last;
      prev_first = f;
    }
    if (!down)  // the sources are done once their data left; the root once it all arrived
      for (int j = 0; j + 1 < n; ++j) res.done[chain[j]] = res.done[chain[n - 1]];
    return res;
  }

  if (req.op == CollOp::AllToAll) {
    res.done = detail::build_all_to_all(g, topo, req, shape, label, p, eff);
    // Across nodes a network peer's part runs on its p2p plan's channels (all_to_all.cpp).
    const auto far = std::find_if(req.ranks.begin(), req.ranks.end(),
                                  [&](int r) { return !topo.same_nvlink_domain(req.ranks[0], r); });
    if (shape.nodes > 1 && far != req.ranks.end())
      res.channels = p2p_plan(topo, shape, req.ranks[0], *far, req.bytes / n, choice.protocol).channels;
    return res;
  }

  // Ring all-gather / reduce-scatter / all-reduce: one ring per lane (rail), each with its
  // channels' share of the data (lane_set, above).
  if (lane_set.size() > 1) {
    // Several rails: the lanes' transfers run concurrently inside fenced streams.
    detail::Fence fence = detail::open_fence(g, req, label);
    OpId join = kNoOp;
    if (g.pipelined_collectives()) {
      OpLabel sl = label;
      sl.name = g.intern("collective_join");
      join = g.add_compute(req.ranks[0], req.send_stream, 0.0, sl);
      for (OpId b : fence.begin) g.add_edge(b, join);
      if (detail::lean_group(g, req)) {
        detail::lean_lanes(g, topo, fence, req, lane_set, label, join, {steps, p, eff});
        res.done = detail::close_fence(g, topo, fence, req, label);
        return res;
      }
    }
    for (const auto& lane : lane_set) {
      const double step_bytes = req.bytes * lane.share / n;
      std::vector<Hop> hops;
      for (int k = 0; k < n; ++k)
        hops.push_back(make_hop(topo, req.ranks[lane.order[k]], req.ranks[lane.order[(k + 1) % n]]));
      if (g.pipelined_collectives()) {
        // The lane's ring is one pipeline (TaskGraph::Pipeline): it moves at its slowest hop.
        const auto first = static_cast<OpId>(g.size());
        const double lane_step = detail::lane_step_latency_s(nc, hops, p);
        for (int k = 0; k < n; ++k) {
          const Hop& h = hops[k];
          const double extra = detail::pipelined_latency_s(nc, h, p, steps, lane_step);
          detail::fenced_transfer(g, fence, req, lane.order[k], lane.order[(k + 1) % n],
                                  step_bytes * steps / eff, label, extra, join);
        }
        g.add_pipeline(first, static_cast<OpId>(g.size()));
        continue;
      }
      std::vector<OpId> prev(n, kNoOp), cur(n, kNoOp);
      for (int s = 0; s < steps; ++s) {
        OpLabel l = label;
        l.step = s;
        for (int k = 0; k < n; ++k) {
          const Hop& h = hops[k];
          cur[k] = detail::fenced_transfer(
              g, fence, req, lane.order[k], lane.order[(k + 1) % n], step_bytes / eff, l,
              hop_latency_s(nc, h.cls, p) + (s == 0 ? nc.base_latency_s[p] : 0),
              s == 0 ? kNoOp : prev[(k + n - 1) % n]);  // forwards what it received last step
        }
        std::swap(prev, cur);
      }
    }
    res.done = detail::close_fence(g, topo, fence, req, label);
    return res;
  }
  const auto& lane = lane_set[0];
  const double step_bytes = req.bytes / n;
  if (g.pipelined_collectives()) {
    // Pipelined: once every member has joined, each rank streams all its steps' data to its
    // successor as one transfer. Latency as the steps would pay it: base + steps x (NCCL hop +
    // wire latency); the engine adds the wire latency once, the rest is software latency.
    OpLabel sl = label;
    sl.name = g.intern("collective_join");
    const OpId join = g.add_compute(req.ranks[0], req.send_stream, 0.0, sl);
    OpId joined = kNoOp;  // (bystanders' folded launch: one edge per run of them)
    for (int i = 0; i < n; ++i)
      if (built[static_cast<size_t>(i)] && dep(i) != joined) g.add_edge(joined = dep(i), join);
    // The lane's per-step latency needs every hop, built or not (once per group in a lean build).
    auto lane_step_of = [&] {
      std::vector<Hop> hops;
      for (int k = 0; k < n; ++k)
        hops.push_back(make_hop(topo, req.ranks[lane.order[k]], req.ranks[lane.order[(k + 1) % n]]));
      return detail::lane_step_latency_s(nc, hops, p);
    };
    double lane_step = 0;
    if (!memo) {
      lane_step = lane_step_of();
    } else {
      const std::string key = group + "/1/" + std::to_string(p);
      auto it = memo->lane_steps.find(key);
      if (it == memo->lane_steps.end()) it = memo->lane_steps.emplace(key, std::vector<double>{lane_step_of()}).first;
      lane_step = it->second[0];
    }
    for (int k = 0; k < n; ++k) {
      const int from = lane.order[k], to = lane.order[(k + 1) % n];
      if (!built[static_cast<size_t>(from)] && !built[static_cast<size_t>(to)]) continue;
      const Hop h = make_hop(topo, req.ranks[from], req.ranks[to]);
      const double extra = detail::pipelined_latency_s(nc, h, p, steps, lane_step);
      const OpId t = add(h, 0, step_bytes * steps, extra);
      g.add_edge(join, t);
      res.done[to] = t;
    }
    return res;
  }
  std::vector<Hop> hops;
  for (int k = 0; k < n; ++k)
    hops.push_back(make_hop(topo, req.ranks[lane.order[k]], req.ranks[lane.order[(k + 1) % n]]));
  std::vector<OpId> prev(n, kNoOp), cur(n, kNoOp);
  for (int s = 0; s < steps; ++s) {
    for (int k = 0; k < n; ++k) {
      const Hop& h = hops[k];
      cur[k] = add(h, s, step_bytes,
                   hop_latency_s(nc, h.cls, p) + (s == 0 ? nc.base_latency_s[p] : 0));
      if (s == 0) {
        g.add_edge(dep(lane.order[k]), cur[k]);
        g.add_edge(dep(lane.order[(k + 1) % n]), cur[k]);
      } else {
        g.add_edge(prev[(k + n - 1) % n], cur[k]);  // forwards what it received last step
      }
    }
    std::swap(prev, cur);
  }
  for (int k = 0; k < n; ++k) res.done[lane.order[(k + 1) % n]] = prev[k];
  return res;
}

OpId add_p2p(TaskGraph& g, const model::Topology& topo, int src, int dst, double bytes,
             const OpLabel& label, OpId dep, uint16_t send_stream, uint16_t recv_stream,
             const GroupShape* comm) {
  const P2pPlan p = p2p_plan(topo, comm ? *comm : group_shape(topo, {src, dst}), src, dst, bytes);
  // LL's half-data lines are not charged: a send runs LL only while a channel's share is at
  // most 16 KiB, which the step latency (>= 2.5 us) outweighs (16 KiB at 47 GB/s is 0.35 us),
  // and the transfer's bytes stay the data bytes the reports count.
  const OpId id = g.add_transfer(src, send_stream, dst, recv_stream, bytes, label, p.max_Bps, p.latency_s);
  g.add_edge(dep, id);
  return id;
}

}  // namespace cpsim::schedule
