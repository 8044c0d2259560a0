// NCCL-like collectives as their algorithm's steps. A ring step is n transfers, one per rank to
// its successor; the send of step s on a rank waits for the receive of step s-1 on that rank
// (the data it forwards). Every transfer carries its hop's NCCL per-hop latency as software
// latency, the first step also the launch (base) latency, and moves wire bytes = data /
// protocol efficiency: LL stores 8 B per 4 B of data, so it halves the reachable bandwidth.
#include "schedule/collectives.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

namespace cpsim::schedule {

const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::AllGather:
      return "allgather";
    case CollOp::ReduceScatter:
      return "reducescatter";
    case CollOp::AllReduce:
      return "allreduce";
    case CollOp::AllToAll:
      return "alltoall";
    case CollOp::Broadcast:
      return "broadcast";
  }
  return "?";
}

const char* protocol_name(Protocol p) {
  switch (p) {
    case Protocol::Auto:
      return "auto";
    case Protocol::LL:
      return "LL";
    case Protocol::LL128:
      return "LL128";
    case Protocol::Simple:
      return "Simple";
  }
  return "?";
}

namespace {

constexpr Protocol kProtocols[3] = {Protocol::LL, Protocol::LL128, Protocol::Simple};

/// Broadcast pipelines the buffer: the first chunk travels hop by hop, the rest streams behind.
constexpr double kBroadcastChunkBytes = 512.0 * 1024;

/// All-to-all pairwise exchange, round k = 1..n-1 (as MPICH's): with a power-of-two group,
/// rank i exchanges with i XOR k, so rounds k < node size stay inside aligned nodes and the
/// others all cross the network together; otherwise i sends to i + k and receives from i - k.
int a2a_peer(int i, int k, int n) { return (n & (n - 1)) == 0 ? i ^ k : (i + k) % n; }

int proto_index(Protocol p) { return p == Protocol::LL ? 0 : p == Protocol::LL128 ? 1 : 2; }

/// What one transfer of the algorithm needs: its endpoints and route facts.
struct Hop {
  int src = 0, dst = 0;
  model::LinkClass cls = model::LinkClass::NVLink;
  double latency_s = 0;
  double bw_Bps = 0;
};

Hop make_hop(const model::Topology& topo, int src, int dst) {
  Hop h;
  h.src = src;
  h.dst = dst;
  h.latency_s = 0;
  h.bw_Bps = std::numeric_limits<double>::infinity();
  for (uint32_t l : topo.route(src, dst)) {
    const auto& link = topo.links()[l];
    h.latency_s += link.latency_s;
    h.bw_Bps = std::min(h.bw_Bps, link.bw_Bps);
    h.cls = std::max(h.cls, link.cls);
  }
  return h;
}

/// NCCL's per-hop latency for the path class (NVLink / PCIe / network).
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

/// Contention-free time of one transfer of `data_bytes` payload under protocol p.
double hop_time_s(const scenario::NcclSpec& nc, const Hop& h, double data_bytes, int p) {
  const double wire = data_bytes / nc.protocol_efficiency[p];
  return hop_latency_s(nc, h.cls, p) + h.latency_s + (wire > 0 ? wire / h.bw_Bps : 0.0);
}

/// The algorithm as rounds of hops: a ring repeats the same n hops every step; all-to-all
/// round k pairs i with i + k; broadcast is a chain of n - 1 hops.
struct Algo {
  std::vector<std::vector<Hop>> rounds;  ///< distinct hop sets
  std::vector<int> round_of_step;        ///< which hop set each step uses
  double step_bytes = 0;                 ///< payload per transfer per step
};

Algo plan(const model::Topology& topo, const CollectiveRequest& req) {
  const int n = static_cast<int>(req.ranks.size());
  Algo a;
  auto ring = [&] {
    std::vector<Hop> hops;
    for (int i = 0; i < n; ++i)
      hops.push_back(make_hop(topo, req.ranks[i], req.ranks[(i + 1) % n]));
    a.rounds.push_back(std::move(hops));
  };
  switch (req.op) {
    case CollOp::AllGather:
    case CollOp::ReduceScatter:
      ring();
      a.round_of_step.assign(n - 1, 0);
      a.step_bytes = req.bytes / n;
      break;
    case CollOp::AllReduce:
      ring();
      a.round_of_step.assign(2 * (n - 1), 0);
      a.step_bytes = req.bytes / n;
      break;
    case CollOp::AllToAll:
      for (int k = 1; k < n; ++k) {
        std::vector<Hop> hops;
        for (int i = 0; i < n; ++i)
          hops.push_back(make_hop(topo, req.ranks[i], req.ranks[a2a_peer(i, k, n)]));
        a.rounds.push_back(std::move(hops));
        a.round_of_step.push_back(k - 1);
      }
      a.step_bytes = req.bytes / n;
      break;
    case CollOp::Broadcast: {
      std::vector<Hop> hops;
      for (int j = 0; j + 1 < n; ++j)
        hops.push_back(make_hop(topo, req.ranks[j], req.ranks[j + 1]));
      a.rounds.push_back(std::move(hops));
      a.step_bytes = req.bytes;
      break;
    }
  }
  return a;
}

/// The tuner's estimate: launch latency plus, per step, the slowest transfer of that step (ring
/// steps advance in lockstep). Broadcast: the first chunk hop by hop, then the rest streams.
double predict_s(const scenario::NcclSpec& nc, const CollectiveRequest& req, const Algo& a, int p) {
  double t = nc.base_latency_s[p];
  if (req.op == CollOp::Broadcast) {
    const auto& hops = a.rounds[0];
    const double first = std::min(req.bytes, kBroadcastChunkBytes), rest = req.bytes - first;
    for (const Hop& h : hops) t += hop_time_s(nc, h, first, p);
    if (rest > 0) {
      double slowest = 0;
      for (const Hop& h : hops)
        slowest = std::max(slowest, h.latency_s + rest / nc.protocol_efficiency[p] / h.bw_Bps);
      t += slowest;
    }
    return t;
  }
  std::vector<double> round_s(a.rounds.size(), 0.0);
  for (size_t r = 0; r < a.rounds.size(); ++r)
    for (const Hop& h : a.rounds[r])
      round_s[r] = std::max(round_s[r], hop_time_s(nc, h, a.step_bytes, p));
  for (int r : a.round_of_step) t += round_s[r];
  return t;
}

}  // namespace

CollectiveResult add_collective(TaskGraph& g, const model::Topology& topo,
                                const CollectiveRequest& in) {
  // NCCL's host-side launch on every member (platform runtime:), an "overhead" op on the
  // member's send stream that the collective's first step waits for.
  CollectiveRequest req = in;
  if (const double launch = topo.spec().runtime.nccl_launch_s; launch > 0 && req.ranks.size() > 1) {
    req.deps.resize(req.ranks.size(), kNoOp);
    OpLabel l = req.label;
    l.name = g.intern("nccl_launch");
    l.category = g.intern("overhead");
    for (size_t i = 0; i < req.ranks.size(); ++i) {
      const OpId o = g.add_compute(req.ranks[i], req.send_stream, launch, l);
      g.add_edge(req.deps[i], o);
      req.deps[i] = o;
    }
  }
  const int n = static_cast<int>(req.ranks.size());
  if (n == 0) throw std::invalid_argument("collective: empty rank group");
  if (!req.deps.empty() && static_cast<int>(req.deps.size()) != n)
    throw std::invalid_argument("collective: deps has " + std::to_string(req.deps.size()) +
                                " entries for " + std::to_string(n) + " ranks");
  if (!(req.bytes >= 0)) throw std::invalid_argument("collective: negative size");
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
  const Algo a = plan(topo, req);
  int p = 0;
  if (req.protocol == Protocol::Auto) {
    double best = std::numeric_limits<double>::infinity();
    for (int q = 0; q < 3; ++q)
      if (double t = predict_s(nc, req, a, q); t < best) {
        best = t;
        p = q;
      }
  } else {
    p = proto_index(req.protocol);
  }
  res.protocol = kProtocols[p];
  res.predicted_s = predict_s(nc, req, a, p);
  const double eff = nc.protocol_efficiency[p];

  OpLabel label = req.label;
  if (label.name == 0) label.name = g.intern(coll_op_name(req.op));
  if (label.category == 0) label.category = g.intern("collective");
  auto add = [&](const Hop& h, int step, double data_bytes, double extra_s) {
    OpLabel l = label;
    l.step = step;
    return g.add_transfer(h.src, req.send_stream, h.dst, req.recv_stream, data_bytes / eff, l, 0,
                          extra_s);
  };
  res.done.assign(n, kNoOp);

  if (req.op == CollOp::Broadcast) {
    // Root ranks[0]. Per hop: the first chunk (forwarded as soon as it arrived) and the rest.
    const double first = std::min(req.bytes, kBroadcastChunkBytes), rest = req.bytes - first;
    OpId prev_first = kNoOp;
    for (int j = 0; j + 1 < n; ++j) {
      const Hop& h = a.rounds[0][j];
      const OpId f =
          add(h, j, first, hop_latency_s(nc, h.cls, p) + (j == 0 ? nc.base_latency_s[p] : 0));
      g.add_edge(dep(j), f);
      g.add_edge(dep(j + 1), f);
      g.add_edge(prev_first, f);
      OpId last = f;
      if (rest > 0) {
        last = add(h, j, rest, 0);
        g.add_edge(f, last);
      }
      res.done[j + 1] = last;
      if (j == 0) res.done[0] = last;
      prev_first = f;
    }
    return res;
  }

  if (req.op == CollOp::AllToAll) {
    for (int k = 1; k < n; ++k)
      for (int i = 0; i < n; ++i) {
        const Hop& h = a.rounds[k - 1][i];
        const OpId t = add(h, k - 1, a.step_bytes,
                           hop_latency_s(nc, h.cls, p) + (k == 1 ? nc.base_latency_s[p] : 0));
        if (k == 1) {
          g.add_edge(dep(i), t);
          g.add_edge(dep(a2a_peer(i, k, n)), t);
        }
        if (k == n - 1) res.done[a2a_peer(i, k, n)] = t;
      }
    return res;
  }

  // Ring all-gather / reduce-scatter / all-reduce.
  const auto& hops = a.rounds[0];
  if (g.pipelined_collectives()) {
    // Pipelined: once every member has joined, each rank streams all its steps' data to its
    // successor as one transfer. Latency as the steps would pay it: base + steps x (NCCL hop +
    // wire latency); the engine adds the wire latency once, the rest is software latency.
    const int steps = static_cast<int>(a.round_of_step.size());
    OpLabel sl = label;
    sl.name = g.intern("collective_join");
    const OpId join = g.add_compute(req.ranks[0], req.send_stream, 0.0, sl);
    for (int i = 0; i < n; ++i) g.add_edge(dep(i), join);
    for (int i = 0; i < n; ++i) {
      const Hop& h = hops[i];
      const double extra = nc.base_latency_s[p] + steps * hop_latency_s(nc, h.cls, p) +
                           (steps - 1) * h.latency_s;
      const OpId t = add(h, 0, a.step_bytes * steps, extra);
      g.add_edge(join, t);
      res.done[(i + 1) % n] = t;
    }
    return res;
  }
  std::vector<OpId> prev(n, kNoOp), cur(n, kNoOp);
  const int steps = static_cast<int>(a.round_of_step.size());
  for (int s = 0; s < steps; ++s) {
    for (int i = 0; i < n; ++i) {
      const Hop& h = hops[i];
      cur[i] = add(h, s, a.step_bytes,
                   hop_latency_s(nc, h.cls, p) + (s == 0 ? nc.base_latency_s[p] : 0));
      if (s == 0) {
        g.add_edge(dep(i), cur[i]);
        g.add_edge(dep((i + 1) % n), cur[i]);
      } else {
        g.add_edge(prev[(i + n - 1) % n], cur[i]);  // forwards what it received last step
      }
    }
    std::swap(prev, cur);
  }
  for (int i = 0; i < n; ++i) res.done[i] = prev[(i + n - 1) % n];
  return res;
}

OpId add_p2p(TaskGraph& g, const model::Topology& topo, int src, int dst, double bytes,
             const OpLabel& label, OpId dep, uint16_t send_stream, uint16_t recv_stream) {
  const auto& nc = topo.spec().nccl;
  const OpId id = g.add_transfer(src, send_stream, dst, recv_stream, bytes, label, nc.p2p_max_Bps,
                                 nc.p2p_latency_s);
  g.add_edge(dep, id);
  return id;
}

}  // namespace cpsim::schedule
