// All-to-all (schedule/all_to_all.cpp): the pairs run at once, NCCL's p2p protocol rule, and
// the pipelined form puts on every NIC and NVLink port what the pairs would.
#include <gtest/gtest.h>

#include <map>

#include "support/platforms.hpp"
#include "schedule/collectives.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::model::Topology;
using namespace cpsim::schedule;

namespace {

CollectiveResult build(TaskGraph& g, const Topology& topo, int n, double bytes, bool pipelined = false,
                       Protocol p = Protocol::Auto) {
  g.set_pipelined_collectives(pipelined);
  CollectiveRequest req;
  req.op = CollOp::AllToAll;
  for (int i = 0; i < n; ++i) req.ranks.push_back(i);
  req.bytes = bytes;
  req.protocol = p;
  return add_collective(g, topo, req);
}

/// Bytes each Topology link carries over the collective's transfers.
std::map<uint32_t, double> link_bytes(const TaskGraph& g, const Topology& topo) {
  std::map<uint32_t, double> out;
  for (const auto& op : g.ops())
    if (op.kind == OpKind::Transfer)
      for (uint32_t l : topo.route(op.rank, op.peer)) out[l] += op.bytes;
  return out;
}

}  // namespace

TEST(AllToAll, EveryPairAtOnceInsideOneFence) {
  Topology topo(cpsim::test::dgx_h100(2));
  TaskGraph g;
  const double S = 1 << 30;
  const auto res = build(g, topo, 16, S);
  std::map<int, double> sent;
  int transfers = 0;
  for (const auto& op : g.ops()) {
    if (op.kind != OpKind::Transfer) continue;
    ++transfers;
    EXPECT_TRUE(op.unordered);  // none waits for another: NCCL's one kernel, all peers
    sent[op.rank] += op.bytes;
  }
  EXPECT_EQ(transfers, 16 * 15);
  for (int r = 0; r < 16; ++r) EXPECT_NEAR(sent[r], S * 15 / 16, 1);
  EXPECT_EQ(res.done.size(), 16u);
  EXPECT_NO_THROW(g.finalize());
}

TEST(AllToAll, ProtocolIsNcclsP2pRuleByEachPeersBytes) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph a, b, c;
  // enqueue.cc: LL while a peer's send is at most 16 KiB (NCCL_P2P_LL_THRESHOLD), else Simple;
  // never LL128, whatever a ring of the same size would take.
  EXPECT_EQ(build(a, topo, 8, 8 * 16384.0).protocol, Protocol::LL);
  EXPECT_EQ(build(b, topo, 8, 8 * 16384.0 + 8).protocol, Protocol::Simple);
  EXPECT_EQ(build(c, topo, 8, 8 * 16384.0, false, Protocol::Simple).protocol, Protocol::Simple);
}

TEST(AllToAll, PipelinedLoadsEveryNicAndPortAsThePairs) {
  Topology topo(cpsim::test::dgx_h100(4));
  const double S = 1 << 30;
  TaskGraph pairs, piped;
  build(pairs, topo, 32, S);
  build(piped, topo, 32, S, true);
  int transfers = 0;
  for (const auto& op : piped.ops()) transfers += op.kind == OpKind::Transfer;
  EXPECT_EQ(transfers, 32 * (1 + 3));  // one inside the node, one to each other node
  const auto lp = link_bytes(pairs, topo), lq = link_bytes(piped, topo);
  int compared = 0;
  for (const auto& [l, bytes] : lp) {
    const auto cls = topo.links()[l].cls;
    if (cls != cpsim::model::LinkClass::Nic && cls != cpsim::model::LinkClass::NVLink) continue;
    // (the pairs' NVLink ports also carry their PXN hops: the pipelined node share adds them)
    ASSERT_TRUE(lq.count(l)) << topo.links()[l].name;
    EXPECT_NEAR(lq.at(l), bytes, 1e-6 * bytes) << topo.links()[l].name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
  EXPECT_NO_THROW(piped.finalize());
}

TEST(AllToAll, AcrossNodesEachPeersSendIsNcclsP2pPlan) {
  // 2 nodes x 8 GPUs, 64 KiB per peer: NCCL runs each peer's part as any send/recv of the
  // communicator (enqueue.cc addP2pToPlan): one channel per 64 KiB across nodes, so a network
  // peer gets one channel at NCCL_P2P_PER_CHANNEL_NET_BW (14 GB/s, under the NIC's 47) and the
  // net transport's Simple step (p2p launch 2.5 us + 14 us); an NVLink peer of the same
  // communicator the platform's p2p latency (2.5 us) and pair cap (180 GB/s). Before, both
  // paid the ring tuner's base latency (8.4 us) plus a hop, and a network peer had no cap.
  Topology topo(cpsim::test::dgx_h100(2));
  TaskGraph g;
  build(g, topo, 16, 16 * 65536.0);
  int net = 0, nvl = 0;
  for (const auto& op : g.ops()) {
    if (op.kind != OpKind::Transfer) continue;
    if (topo.same_nvlink_domain(op.rank, op.peer)) {
      ++nvl;
      EXPECT_NEAR(op.extra_latency_s, 2.5e-6, 1e-12);
      EXPECT_NEAR(op.max_rate_Bps, 180e9, 1);
    } else {
      ++net;
      EXPECT_NEAR(op.extra_latency_s, 16.5e-6, 1e-12);
      EXPECT_NEAR(op.max_rate_Bps, 14e9, 1);
    }
  }
  EXPECT_EQ(net, 16 * 8);
  EXPECT_EQ(nvl, 16 * 7);
  // Within one node nothing changes: the tuner's base latency plus an NVLink hop.
  Topology node(cpsim::test::dgx_h100());
  TaskGraph one;
  build(one, node, 8, 8 * 65536.0);
  const auto& nc = node.spec().nccl;
  for (const auto& op : one.ops()) {
    if (op.kind != OpKind::Transfer) continue;
    EXPECT_NEAR(op.extra_latency_s, nc.base_latency_s[2] + nc.hop_nvlink_s[2], 1e-12);
  }
}

TEST(AllToAll, ManyRanksArePipelinedWhateverTheGraphSays) {
  // 256 ranks are 65,280 pairs at once: past kMaxAllToAllPairs, a few flows per rank instead.
  Topology topo(cpsim::test::dgx_h100(32));
  TaskGraph g;
  build(g, topo, 256, 1 << 30);
  int transfers = 0;
  for (const auto& op : g.ops()) transfers += op.kind == OpKind::Transfer;
  EXPECT_EQ(transfers, 256 * (1 + 8));
  EXPECT_EQ(g.pipelines().size(), 2u);  // the NVLink shares, the network shares
}

}  // namespace CPSIM_TEST_TU
