// The channel model replayed: a 2-node all-reduce reaches the rails' sum, NVLS on dgx-h100
// reaches the measured 479 GB/s, and the pipelined form gives the stepwise times without
// contention (so 16,384-GPU runs can use it).
#include <gtest/gtest.h>

#include <algorithm>

#include "app/child_replay.hpp"
#include "engine/replay.hpp"
#include "model/topology.hpp"
#include "scenario/load.hpp"
#include "schedule/collectives.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::model::Topology;
using cpsim::scenario::EngineKind;
using namespace cpsim::schedule;

namespace {

constexpr double GiB = 1024.0 * 1024 * 1024;

double busbw(const Topology& topo, int n, double bytes, Algorithm a = Algorithm::Auto,
             bool pipelined = false, EngineKind kind = EngineKind::SimGrid,
             CollOp op = CollOp::AllReduce) {
  TaskGraph g;
  g.set_pipelined_collectives(pipelined);
  CollectiveRequest req;
  req.op = op;
  for (int i = 0; i < n; ++i) req.ranks.push_back(i);
  req.bytes = bytes;
  req.algorithm = a;
  add_collective(g, topo, req);
  g.finalize();
  const double t = cpsim::app::replay_in_child(g, topo, kind).makespan_s;
  const double factor = op == CollOp::AllReduce ? 2.0 * (n - 1) / n
                       : op == CollOp::Broadcast ? 1.0 : static_cast<double>(n - 1) / n;
  return bytes / t * factor / 1e9;
}

}  // namespace

TEST(NcclChannels, TwoNodeRingAllReduceReachesTheRailsSum) {
  const Topology two(cpsim::scenario::load_platform("h100-cluster", {"nodes=2"}));
  // 8 NDR rails x 47 GB/s = 376 GB/s; one GPU's NVLink (370.8) caps it just below.
  const double rails = std::min(8 * 50 * 0.94, 370.8);
  for (double s : {1 * GiB, 8 * GiB})
    EXPECT_NEAR(busbw(two, 16, s, Algorithm::Ring), rails, 0.10 * rails) << s;
}

TEST(NcclChannels, NvlsOnDgxH100ReachesTheMeasuredBusBandwidth) {
  const Topology h100(cpsim::scenario::load_platform("dgx-h100", {}));
  // calibration.md: 8xH100 all-reduce, NVLS on, 8 GB: 478.9 GB/s busbw.
  EXPECT_NEAR(busbw(h100, 8, 8 * GiB), 478.9, 0.05 * 478.9);
  // Ring alone stays at 365-370.
  EXPECT_NEAR(busbw(h100, 8, 8 * GiB, Algorithm::Ring), 367.5, 0.03 * 367.5);
}

TEST(NcclChannels, PipelinedEqualsTheChannelModelWithoutContention) {
  const Topology h100(cpsim::scenario::load_platform("dgx-h100", {}));
  for (double s : {1e6, 1 * GiB}) {
    const double steps = busbw(h100, 8, s, Algorithm::Ring, false);
    const double piped = busbw(h100, 8, s, Algorithm::Ring, true);
    EXPECT_NEAR(piped, steps, 1e-6 * steps) << s;
  }
  // Across nodes with one lane per rail the pipelined ring is within 10 % of the stepwise one
  // (measured 343 vs 370 GB/s at 1 GiB: the streams of the 8 lanes share NVLink ports
  // differently when they all run at once).
  const Topology two(cpsim::scenario::load_platform("h100-cluster", {"nodes=2"}));
  const double steps = busbw(two, 16, 1 * GiB, Algorithm::Ring, false);
  const double piped = busbw(two, 16, 1 * GiB, Algorithm::Ring, true);
  EXPECT_NEAR(piped, steps, 0.10 * steps);
}

TEST(NcclChannels, PipelinedRingPaysTheNetworkOnItsCrossingsOnly) {
  // A pipelined lane once paid its slowest hop's latency on every step: over 16 nodes the ring's
  // 127 steps each took the network's hop (1 MiB all-gather: 718 us against the stepwise 237 us;
  // now 253). NCCL's ring crosses the network on 16 of them (tuning.cc). (At 64 MiB the 8
  // pipelined lanes, all at once, still share the NVLink ports less well than the steps: 591
  // against 454 us, 364 against 369 GB/s at 8 GiB.)
  const Topology t(cpsim::scenario::load_platform("h100-cluster", {"nodes=16"}));
  const double s = 1024.0 * 1024;
  const double steps = busbw(t, 128, s, Algorithm::Ring, false, EngineKind::SimGrid, CollOp::AllGather);
  const double piped = busbw(t, 128, s, Algorithm::Ring, true, EngineKind::SimGrid, CollOp::AllGather);
  EXPECT_NEAR(piped, steps, 0.10 * steps);
}

TEST(NcclChannels, TreeLanesStayOnTheirRail) {
  // NCCL builds each channel's inter-node tree between the same NIC of every node, so lane l's
  // transfers between nodes leave and enter on one rail and the rails share no link (before,
  // odd nodes' heads sat on the rail before l: every lane crossed rails and all of them formed
  // one max-min component, 2.2 s of SimGrid solves for 1 GiB on 1,024 GPUs instead of 0.3 s).
  const Topology topo(cpsim::scenario::load_platform("h100-cluster", {"nodes=6"}));
  for (Algorithm a : {Algorithm::Tree, Algorithm::NVLSTree}) {
    TaskGraph g;
    CollectiveRequest req;
    for (int i = 0; i < topo.gpus(); ++i) req.ranks.push_back(i);
    req.bytes = GiB;
    req.algorithm = a;
    add_collective(g, topo, req);
    int crossing = 0;
    for (const auto& op : g.ops()) {
      if (op.kind != OpKind::Transfer || topo.node_of(op.rank) == topo.node_of(op.peer)) continue;
      ++crossing;
      EXPECT_EQ(op.rank % 8, op.peer % 8) << algorithm_name(a) << " " << op.rank << "->" << op.peer;
    }
    // 8 lanes x 2 trees x 5 edges x both directions.
    EXPECT_EQ(crossing, 8 * 2 * 5 * 2) << algorithm_name(a);
  }
}

TEST(NcclChannels, NvlsTreeAcrossNodesIsBoundedByTheNics) {
  // NCCL's double binary tree (trees.cc) sends each node's reduced buffer up once and down to
  // two children in one tree and up once in the other: 2S over the node's 8 NICs, so past two
  // nodes NVLS-Tree's busbw is at most 2(n-1)/n x 8 x 47 / 2 (364 GB/s on 4 nodes). A heap-shaped
  // tree let 4 nodes load their NICs with 1.5 S only and reached 484 GB/s.
  const Topology four(cpsim::scenario::load_platform("h100-cluster", {"nodes=4"}));
  const double bound = 2.0 * 31 / 32 * 8 * 50 * 0.94 / 2;
  for (bool pipelined : {false, true}) {
    const double bus = busbw(four, 32, 8 * GiB, Algorithm::NVLSTree, pipelined);
    EXPECT_LE(bus, 1.01 * bound) << pipelined;
    EXPECT_GE(bus, 0.85 * bound) << pipelined;
  }
}

TEST(NcclChannels, NvlsSpansTheWholeNvl72Domain) {
  // NVLS multicasts over one NVSwitch fabric: on GB200 NVL72 its reduction spans all 72 GPUs of
  // the rack. Grouped by 4-GPU tray it ran as 18 trees over NVLink and simulated slower than
  // Ring (1 GiB: 384 against 602 GB/s busbw); now each GPU port carries S(1+1/72).
  const Topology t(cpsim::scenario::load_platform("gb200-nvl72", {}));
  const double nvls = busbw(t, 72, 1 * GiB, Algorithm::NVLS);
  const double ring = busbw(t, 72, 1 * GiB, Algorithm::Ring);
  EXPECT_GT(nvls, ring);
  // 0.74 (NCCL's Blackwell NVLS efficiency) x 721.8 GB/s / (1 + 1/72), as busbw.
  const double port = 0.74 * 721.8 / (1 + 1.0 / 72) * 2 * 71 / 72;
  EXPECT_NEAR(nvls, port, 0.03 * port);
}

TEST(NcclChannels, BroadcastAcrossNodesUsesEveryRail) {
  // NCCL's broadcast runs on its ring channels, each leaving the node through its own NIC: on
  // 4 nodes the chain is one per rail, not one NDR port (47 GB/s).
  const Topology four(cpsim::scenario::load_platform("h100-cluster", {"nodes=4"}));
  const double bus = busbw(four, 32, 1 * GiB, Algorithm::Auto, false, EngineKind::SimGrid,
                           CollOp::Broadcast);
  EXPECT_GT(bus, 4 * 47.0);
  EXPECT_LE(bus, 8 * 50 * 0.94);
}

}  // namespace CPSIM_TEST_TU
