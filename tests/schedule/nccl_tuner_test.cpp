// NCCL's tuner as cpsim models it: the graph search's channel counts, the algorithm and protocol
// NCCL picks at a few sizes (worked out by hand from tuning.cc's tables, below), the rails the
// ring lanes leave through, and NVLS on the NVSwitch presets that have it.
#include <gtest/gtest.h>

#include <set>

#include "model/topology.hpp"
#include "scenario/load.hpp"
#include "schedule/collective_parts.hpp"
#include "schedule/collectives.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::model::Topology;
using namespace cpsim::schedule;

namespace {

Topology preset(const std::string& name, std::vector<std::string> params = {}) {
  return Topology(cpsim::scenario::load_platform(name, params));
}

std::vector<int> iota(int n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return r;
}

}  // namespace

TEST(NcclTuner, RingGraphChannelsFollowTheSearch) {
  // H100: 18 x 20.6 = 370.8 GB/s per GPU; the SM90 intra speeds start at 60 -> 6 channels,
  // doubled by ncclTopoDupChannels to 12 x 30 GB/s.
  const Topology h100 = preset("dgx-h100");
  const NcclGraph g1 = ring_graph(h100.spec(), group_shape(h100, iota(8)));
  EXPECT_EQ(g1.channels, 12);
  EXPECT_DOUBLE_EQ(g1.bw_intra, 30);
  // A100: 12 x 20 = 240; 40 GB/s x 6, doubled -> 12 x 20.
  const Topology a100 = preset("dgx-a100");
  EXPECT_EQ(ring_graph(a100.spec(), group_shape(a100, iota(8))).channels, 12);
  // Two H100 nodes: one channel per rail at 45 GB/s (8 x 48 would exceed the NVLink's 370.8).
  const Topology two = preset("h100-cluster", {"nodes=2"});
  const GroupShape s2 = group_shape(two, iota(16));
  EXPECT_EQ(s2.nodes, 2);
  EXPECT_EQ(s2.rails, 8);
  const NcclGraph g2 = ring_graph(two.spec(), s2);
  EXPECT_EQ(g2.channels, 8);
  EXPECT_DOUBLE_EQ(g2.bw_inter, 45);
  // NVL72 is one NVLink domain: one "node" to NCCL.
  const Topology nvl = preset("gb200-nvl72");
  EXPECT_EQ(group_shape(nvl, iota(72)).nodes, 1);
}

TEST(NcclTuner, ChoiceTableMatchesNcclsModel) {
  // dgx-h100, 8 ranks, all-reduce. By hand from tuning.cc: Ring LL = 6.6 + 14 x 0.6 = 15 us at
  // min(141, 360/2) = 141 GB/s busbw; NVLS = 25 us at 8 x min(50 x .85 x 7/8 x 2, 50) = 400.
  // Below ~1 MB LL wins, above NVLS.
  const Topology h100 = preset("dgx-h100");
  const GroupShape g = group_shape(h100, iota(8));
  const TunerChoice small = nccl_tune(h100, CollOp::AllReduce, g, 4096);
  EXPECT_EQ(small.algorithm, Algorithm::Ring);
  EXPECT_EQ(small.protocol, Protocol::LL);
  EXPECT_EQ(small.channels, 1);  // 4 KB < 2 x 512 threads x 8 x 8 ranks: one channel
  EXPECT_NEAR(small.latency_s, 15e-6, 1e-9);
  const TunerChoice big = nccl_tune(h100, CollOp::AllReduce, g, 1 << 30);
  EXPECT_EQ(big.algorithm, Algorithm::NVLS);
  EXPECT_EQ(big.protocol, Protocol::Simple);
  EXPECT_NEAR(big.bus_GBps, 400, 1e-6);
  EXPECT_NEAR(big.latency_s, 25e-6, 1e-12);
  // All-gather never runs NVLS or Tree here: Ring Simple at large sizes with all 12 channels.
  const TunerChoice ag = nccl_tune(h100, CollOp::AllGather, g, 1 << 30);
  EXPECT_EQ(ag.algorithm, Algorithm::Ring);
  EXPECT_EQ(ag.protocol, Protocol::Simple);
  EXPECT_EQ(ag.channels, 12);
  // dgx-a100 has no NVLS: forcing it is an error, as NCCL_ALGO=NVLS fails there.
  const Topology a100 = preset("dgx-a100");
  EXPECT_THROW(nccl_tune(a100, CollOp::AllReduce, group_shape(a100, iota(8)), 1 << 30,
                         Algorithm::NVLS),
               std::invalid_argument);
  EXPECT_EQ(nccl_tune(a100, CollOp::AllReduce, group_shape(a100, iota(8)), 1 << 30).algorithm,
            Algorithm::Ring);
}

TEST(NcclTuner, RingLanesLeaveEachNodeOnTheirOwnRail) {
  const Topology two = preset("h100-cluster", {"nodes=2"});
  const auto ranks = iota(16);
  const auto lanes = detail::ring_lanes(two, ranks, 8, 8);
  ASSERT_EQ(lanes.size(), 8u);
  std::set<int> up_rails;
  for (size_t l = 0; l < lanes.size(); ++l) {
    const auto& o = lanes[l].order;
    ASSERT_EQ(o.size(), 16u);
    EXPECT_DOUBLE_EQ(lanes[l].share, 1.0 / 8);
    EXPECT_EQ(std::set<int>(o.begin(), o.end()).size(), 16u);
    // Crossings: o[7] -> o[8] and o[15] -> o[0]; each stays on one rail, and lane l's rail
    // differs from every other lane's.
    for (auto [a, b] : {std::pair{o[7], o[8]}, std::pair{o[15], o[0]}}) {
      ASSERT_NE(a / 8, b / 8);
      EXPECT_EQ(a % 8, b % 8) << "lane " << l;
    }
    up_rails.insert(o[7] % 8);
  }
  EXPECT_EQ(up_rails.size(), 8u);  // every NIC carries one lane out of node 0
}

TEST(NcclTuner, NvlsOnTheNvswitchPresetsThatHaveIt) {
  for (const char* p : {"dgx-h100", "hgx-h200"}) {
    const Topology t = preset(p);
    TaskGraph g;
    CollectiveRequest req;
    req.ranks = iota(8);
    req.bytes = 1 << 30;
    const auto res = add_collective(g, t, req);
    EXPECT_EQ(res.algorithm, Algorithm::NVLS) << p;
  }
  const Topology nvl = preset("gb200-nvl72");
  EXPECT_EQ(nccl_tune(nvl, CollOp::AllReduce, group_shape(nvl, iota(72)), 1 << 30).algorithm,
            Algorithm::NVLS);
}

}  // namespace CPSIM_TEST_TU
