// NCCL's send/recv as cpsim prices it (p2p_plan): channels per peer from paths.cc and enqueue.cc,
// 14 GB/s per channel through the network, LL up to NCCL_P2P_LL_THRESHOLD, the network
// transport's step latency and its slot window; and which
// rail a CP neighbour's K,V leave on, which the scenario's rank order decides.
#include <gtest/gtest.h>

#include <string>

#include "model/topology.hpp"
#include "scenario/load.hpp"
#include "schedule/collectives.hpp"
#include "schedule/mesh.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::model::Topology;
using namespace cpsim::schedule;

namespace {

Topology cluster(int nodes, double nic_Bps = 0) {
  auto spec = cpsim::scenario::load_platform("h100-cluster", {"nodes=" + std::to_string(nodes)});
  if (nic_Bps > 0) spec.nic.bw_Bps = nic_Bps;
  return Topology(spec);
}

std::vector<int> stride(int n, int step) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i * step);
  return r;
}

}  // namespace

TEST(P2pPlan, APairAcrossTwoNodesRunsFourChannelsThroughTheNetTransport) {
  const Topology t = cluster(2);
  const GroupShape pair = group_shape(t, {0, 8});
  const P2pPlan big = p2p_plan(t, pair, 0, 8, 1e9);
  EXPECT_TRUE(big.network);
  // paths.cc: divUp(50 GB/s NDR, NCCL_P2P_PER_CHANNEL_NET_BW 14) = 4 channels per net peer.
  EXPECT_EQ(big.channels, 4);
  EXPECT_EQ(big.protocol, Protocol::Simple);
  // p2p launch 2.5 us + tuning.cc's Simple network step 14 us.
  EXPECT_NEAR(big.latency_s, 16.5e-6, 1e-12);
  // 4 channels at 14 GB/s each: 56 GB/s, under the 4-channel slot window
  // (4 x 8 x 128 KiB per 14 us + 128 KiB at 47 GB/s + 2.7 us) and above the NIC's 47.
  const double rt = 14e-6 + 131072 / 47e9 + 2.7e-6;
  EXPECT_LT(4 * 14e9, 4 * 8 * 131072 / rt);
  EXPECT_NEAR(big.max_Bps, 4 * 14e9, 1e3);
  // enqueue.cc: an operation starts on one channel per 64 KiB across nodes, so 16 KiB and
  // 32 KiB both run on one channel, and LL takes up to 16 KiB per channel.
  const P2pPlan small = p2p_plan(t, pair, 0, 8, 16384);
  EXPECT_EQ(small.channels, 1);
  EXPECT_EQ(small.protocol, Protocol::LL);
  EXPECT_NEAR(small.latency_s, 5.2e-6, 1e-12);
  EXPECT_EQ(p2p_plan(t, pair, 0, 8, 16385).protocol, Protocol::Simple);
  EXPECT_EQ(p2p_plan(t, pair, 0, 8, 32768).channels, 1);
  // Parts double while over one 128 KiB step: 256 KiB runs on 2, 512 KiB and up on 4.
  EXPECT_EQ(p2p_plan(t, pair, 0, 8, 262144).channels, 2);
  EXPECT_EQ(p2p_plan(t, pair, 0, 8, 524288).channels, 4);
}

TEST(P2pPlan, ChannelsPerNetworkPeerHalveAsTheCommunicatorGrowsAndEachCarries14GBps) {
  // A CP group of 32, one rank per node: its ring search finds 2 channels (one NDR rail,
  // doubled), 4 p2p channels; 4 per peer x divUp(32, 8) peers per round > 4 halves them to 1.
  const Topology t = cluster(32);
  const GroupShape cp = group_shape(t, stride(32, 8));
  const P2pPlan p = p2p_plan(t, cp, 0, 8, 64e6);
  EXPECT_EQ(p.channels, 1);
  EXPECT_NEAR(p.max_Bps, 14e9, 1e3);
  // nccl-tests sendrecv over every GPU, 8 per node, 16 p2p channels: 4 per peer x
  // divUp(n, 8) stays within 16 up to 32 ranks, halves to 2 at 64 and to 1 from 128; the
  // smallest any peer needs holds for NVLink peers too.
  const struct { int nodes, channels; } rows[] = {{2, 4}, {4, 4}, {8, 2}, {16, 1}, {64, 1}};
  for (const auto& r : rows) {
    const Topology c = cluster(r.nodes);
    const GroupShape all = group_shape(c, stride(8 * r.nodes, 1));
    const P2pPlan net = p2p_plan(c, all, 7, 8, 64e6);
    EXPECT_EQ(net.channels, r.channels) << r.nodes << " nodes";
    EXPECT_NEAR(net.max_Bps, r.channels * 14e9, 1e3) << r.nodes << " nodes";
    EXPECT_EQ(p2p_plan(c, all, 0, 1, 64e6).channels, r.channels) << r.nodes << " nodes";
  }
}

TEST(P2pPlan, WithinANodeThePairKeepsThePlatformsNvlinkFigures) {
  const Topology t(cpsim::scenario::load_platform("dgx-h100"));
  const GroupShape node = group_shape(t, stride(8, 1));
  const P2pPlan p = p2p_plan(t, node, 0, 1, 1e9);
  EXPECT_FALSE(p.network);
  EXPECT_EQ(p.channels, 32);  // 2 x 12 ring channels rounded up; an NVLink peer needs 2 x 18
  EXPECT_DOUBLE_EQ(p.latency_s, t.spec().nccl.p2p_latency_s);
  EXPECT_DOUBLE_EQ(p.max_Bps, t.spec().nccl.p2p_max_Bps);
}

TEST(P2pPlan, AFasterNicGetsMoreChannelsPerPeer) {
  // An 800 Gb/s NIC (100 GB/s): divUp(100, 14) = 8 channels per net peer on a 2-node pair,
  // 112 GB/s of channels, so the NIC (94 GB/s) binds, not one channel's 14.
  const Topology t = cluster(2, 100e9);
  const P2pPlan p = p2p_plan(t, group_shape(t, {0, 8}), 0, 8, 1e9);
  EXPECT_EQ(p.channels, 8);
  EXPECT_GT(p.max_Bps, 0.94 * 100e9);
}

TEST(CpRail, MegatronOrderPutsACpNeighbourOnTheSameRailOfTheNextNode) {
  // tp-cp-dp-pp, TP 8 x CP 4 on 4 nodes: the CP group of TP rank t is local GPU t of every
  // node, so its ring's sends leave and arrive through NIC t and never touch NVLink.
  const Topology t = cluster(4);
  cpsim::scenario::ParallelSpec ps;
  ps.tp = 8;
  ps.cp = 4;
  ps.order = {"tp", "cp", "dp", "pp"};
  const Mesh mesh(ps);
  for (int tp = 0; tp < 8; ++tp) {
    const auto group = mesh.group(mesh.rank_of({tp, 0, 0, 0}), Mesh::kCp);
    ASSERT_EQ(group.size(), 4u);
    for (size_t c = 0; c < group.size(); ++c) {
      const int src = group[c], dst = group[(c + 1) % group.size()];
      const std::string up = "n" + std::to_string(src / 8) + ".nic" + std::to_string(tp) + ".up";
      const std::string down = "n" + std::to_string(dst / 8) + ".nic" + std::to_string(tp) + ".down";
      bool saw_up = false, saw_down = false;
      for (uint32_t l : t.route(src, dst)) {
        const auto& link = t.links()[l];
        EXPECT_NE(link.cls, cpsim::model::LinkClass::NVLink) << link.name;
        saw_up |= link.name == up;
        saw_down |= link.name == down;
      }
      EXPECT_TRUE(saw_up && saw_down) << src << " -> " << dst;
    }
  }
  // cp-tp-dp-pp: the CP group is one node's 4 GPUs, its sends NVLink only.
  ps.order = {"cp", "tp", "dp", "pp"};
  const Mesh inner(ps);
  const auto group = inner.group(0, Mesh::kCp);
  for (size_t c = 0; c < group.size(); ++c)
    for (uint32_t l : t.route(group[c], group[(c + 1) % group.size()]))
      EXPECT_EQ(t.links()[l].cls, cpsim::model::LinkClass::NVLink) << t.links()[l].name;
}

}  // namespace CPSIM_TEST_TU
