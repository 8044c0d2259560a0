// All-to-all as NCCL runs it: grouped send/recv (ncclGroupStart, one ncclSend and ncclRecv per
// peer), which NCCL puts in one kernel with every peer's work spread over its p2p channels
// (init.cc ncclP2pSchedule, enqueue.cc scheduleP2pTasksToPlan). The peers' transfers therefore
// run at once, not one round after another: the NVLink ones beside the network ones, and the
// network ones sharing the NIC. NCCL's maintainers give the result (nccl-tests issue #130):
// the network part sets the time, so busbw = N/(N-1) x one NIC's bandwidth on N nodes.
//
// Built one after another on the rank's stream (as it was), the 7 NVLink rounds of a 2-node
// all-to-all added to its 8 network rounds, and ranks that drifted out of step met on NICs:
// 1 GiB gave busbw 78.1 GB/s on 2 H100 nodes and 39.5 on 16, against 88.1 and 49.7 by that rule
// (x (n-1)/n) with 47 GB/s per NDR NIC (platforms/dgx-h100.yaml); now 87.9 and 49.7.
#include <algorithm>
#include <optional>

#include "schedule/collective_parts.hpp"

namespace cpsim::schedule::detail {

namespace {

/// Pairwise peers, round k = 1..n-1 (as MPICH's): with a power-of-two group rank i's peer is
/// i XOR k, otherwise i + k. All rounds run at once; the order only names the transfers.
int a2a_peer(int i, int k, int n) { return (n & (n - 1)) == 0 ? i ^ k : (i + k) % n; }

/// Pipelined: each rank's network share goes to this many nodes (or every other node, when
/// fewer), spread evenly around them, so the share that leaves a leaf switch for the spines is
/// close to an all-to-all's own. The pairs and this form gave the same 1 GiB times to 5 digits
/// on 2 and 16 nodes, and agree to 0.2 % on 4 (tests/engine/collective_curves_test.cpp).
constexpr int kNetPeers = 8;

/// enqueue.cc addP2pToPlan: a peer's send runs LL when its bytes are at most NCCL_P2P_LL_THRESHOLD
/// (16 KiB) per channel, Simple otherwise; up to 64 KiB a send has one channel.
constexpr double kP2pLLThreshold = 16384;

}  // namespace

Protocol all_to_all_protocol(double bytes, int n) {
  return n > 0 && bytes / n <= kP2pLLThreshold ? Protocol::LL : Protocol::Simple;
}

std::vector<OpId> build_all_to_all(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                                   const GroupShape& comm, const OpLabel& label, int p, double eff) {
  const int n = static_cast<int>(req.ranks.size());
  const auto& nc = topo.spec().nccl;
  Fence f = open_fence(g, req, label);
  // Across NVLink domains each peer's send is priced as any NCCL send/recv of the communicator
  // (p2p_plan, as add_p2p prices one): nccl-tests' alltoall is ncclSend/ncclRecv per peer in one
  // group, and NCCL schedules those parts like any others (enqueue.cc scheduleP2pTasksToPlan:
  // nChannelsMin/Max from the communicator's p2pnChannelsPerPeer, paths.cc
  // ncclTopoComputeP2pChannels; addP2pToPlan: a channel per 64 KiB across nodes, doubling while
  // a part is over 128 KiB, LL up to NCCL_P2P_LL_THRESHOLD per channel). A network peer's part
  // then carries NCCL_P2P_PER_CHANNEL_NET_BW (14 GB/s) per channel and pays the net
  // transport's step latency; an NVLink peer of the same communicator the platform's p2p
  // latency and pair cap. The plan depends on the pair only through the path (network or not).
  const bool p2p_rules = comm.nodes > 1;
  const Protocol forced = p == 0 ? Protocol::LL : p == 1 ? Protocol::LL128 : Protocol::Simple;
  std::optional<P2pPlan> plans[2];
  auto plan_for = [&](int src, int dst) -> const P2pPlan& {
    auto& pl = plans[topo.same_nvlink_domain(src, dst) ? 0 : 1];
    if (!pl) pl = p2p_plan(topo, comm, src, dst, req.bytes / n, forced);
    return *pl;
  };
  // Each transfer stands for `pairs` send/recv pairs, each at its pair's rate cap where below
  // the path's own (a pair over NVLink: 180 of 450 GB/s). Within one domain, NCCL's one-step
  // latency for its protocol and path.
  auto send = [&](int from, int to, double bytes, int32_t step, int pairs) {
    const Hop h = make_hop(topo, req.ranks[from], req.ranks[to]);
    OpLabel l = label;
    l.step = step;
    double cap = nc.p2p_max_Bps * pairs, latency = nc.base_latency_s[p] + hop_latency_s(nc, h.cls, p);
    if (p2p_rules) {
      const P2pPlan& pl = plan_for(req.ranks[from], req.ranks[to]);
      cap = pl.max_Bps * pairs;
      latency = pl.latency_s;
    }
    fenced_transfer(g, f, req, from, to, bytes / eff, l, latency, kNoOp, cap > 0 && cap < h.bw_Bps ? cap : 0);
  };
  if (!g.pipelined_collectives() && static_cast<double>(n) * (n - 1) <= kMaxAllToAllPairs) {
    for (int k = 1; k < n; ++k)
      for (int i = 0; i < n; ++i) send(i, a2a_peer(i, k, n), req.bytes / n, k - 1, 1);
    return close_fence(g, topo, f, req, label, /*by_step=*/false);
  }
  // Pipelined, or too many pairs (16,384 ranks are 268 M pairs): per rank one transfer
  // with its node's share, to the next member, and the network share split over a few nodes,
  // each to the member in the same place (its NIC rail, as NCCL's PXN sends it). Every NVLink
  // port and NIC then carries what the pairs would have put on it, and with destination-based
  // spines (topology.cpp) so does every leaf-spine link. Each of these sets moves in lockstep
  // (TaskGraph::Pipeline; even loads, so the pairs would end together too): on 16,384 GPUs two
  // flows instead of 147,456, which SimGrid re-solved one end at a time (86 s); as nine (one per
  // peer node) they shared the NICs, and SimGrid's constraint expansion of such long routes
  // took 10 s per size.
  const auto nodes = nodes_of(topo, req.ranks);
  const int nn = static_cast<int>(nodes.size());
  const int peers = std::min(nn - 1, kNetPeers);
  auto each_member = [&](auto&& visit) {
    for (int a = 0; a < nn; ++a)
      for (size_t j = 0; j < nodes[static_cast<size_t>(a)].size(); ++j) visit(a, j);
  };
  auto pipeline = [&](auto&& add) {
    const auto first = static_cast<OpId>(g.size());
    each_member(add);
    g.add_pipeline(first, static_cast<OpId>(g.size()));  // (refused where shares differ: alone)
  };
  // With PXN (topology.cpp) the pairs to another rail first cross NVLink to the local GPU on
  // the receiver's rail: (local-1)/local of the network share also loads the NVLink ports.
  const bool pxn = nc.pxn && topo.spec().intra == scenario::IntraFabric::NVSwitch && nn > 1;
  pipeline([&](int a, size_t j) {
    const auto& m = nodes[static_cast<size_t>(a)];
    const int local = static_cast<int>(m.size());
    const double net = req.bytes * (n - local) / n;
    if (local > 1)
      send(m[j], m[(j + 1) % m.size()],
           req.bytes * (local - 1) / n + (pxn ? net * (local - 1) / local : 0), 0, local - 1);
  });
  pipeline([&](int a, size_t j) {
    const auto& m = nodes[static_cast<size_t>(a)];
    for (int q = 0; q < peers; ++q) {
      const auto& far = nodes[static_cast<size_t>((a + 1 + q * (nn - 1) / peers) % nn)];
      send(m[j], far[j % far.size()], req.bytes * (n - static_cast<int>(m.size())) / n / peers, 1 + q,
           (n - static_cast<int>(m.size()) + peers - 1) / peers);
    }
  });
  return close_fence(g, topo, f, req, label, /*by_step=*/false);
}

}  // namespace cpsim::schedule::detail
