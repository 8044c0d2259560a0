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
