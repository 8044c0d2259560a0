// The SimGrid engine runs a transfer whose route is idle as a timer until another flow meets it
// (simgrid.cpp). These tests hold it to the plain SimGrid Comm replay
// (ReplayOptions::solo_transfers = false) and to the max-min answer worked out by hand.
#include <gtest/gtest.h>

#include <random>

#include "app/child_replay.hpp"
#include "engine/replay.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::engine::ReplayOptions;
using cpsim::engine::Trace;
using cpsim::model::Topology;
using cpsim::scenario::EngineKind;
using namespace cpsim::schedule;

namespace {

Trace simgrid(const TaskGraph& g, const Topology& topo, bool solo) {
  ReplayOptions opt;
  opt.solo_transfers = solo;
  return cpsim::app::replay_in_child(g, topo, EngineKind::SimGrid, opt);
}

OpLabel label(TaskGraph& g) {
  OpLabel l;
  l.name = g.intern("x");
  return l;
}

/// Every op's start and end with timers (solo transfers, groups) as with plain Comms. SimGrid
/// ends a Comm up to ~2e-11 s off the exact S / B (its surf/precision); a timer is exact, and
/// the difference adds up along a chain of ops. 1 ns is far below anything reported and far
/// above that rounding; a wrong rate or a lost share is off by microseconds.
void expect_same_times(const TaskGraph& g, const Topology& topo) {
  const Trace on = simgrid(g, topo, true), off = simgrid(g, topo, false);
  auto tol = [](double x) { return 1e-8 * x + 1e-9; };
  for (OpId id = 0; id < g.size(); ++id) {
    EXPECT_NEAR(on.start_s[id], off.start_s[id], tol(off.start_s[id])) << g.describe(id);
    EXPECT_NEAR(on.end_s[id], off.end_s[id], tol(off.end_s[id])) << g.describe(id);
  }
}

}  // namespace

// A starts alone (a timer); B joins A's receiver link halfway through: A becomes a Comm for its
// remaining bytes and both share the link from then on, exactly as two Comms would.
TEST(SoloTransfers, AFlowMetMidwayHandsItsRemainingBytesToSimgrid) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  const double S = 1e9;
  const OpId a = g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, S, label(g));
  const double L = topo.route_latency_s(0, 1), B = topo.route_bw_Bps(0, 1);
  const double d = 0.5 * S / B;  // B's sender computes this long first
  const OpId c = g.add_compute(2, stream::kCompute, d, label(g));
  const OpId b = g.add_transfer(2, stream::kCpSend, 1, stream::kTpRecv, S, label(g));
  g.add_edge(c, b);
  g.finalize();
  // By hand: A alone at B from L to d + L (B * d bytes), then both at B / 2; A ends when its
  // last S - B d bytes are through, B finishes alone at full rate.
  const double a_end = d + L + 2 * (S - B * d) / B;
  const double b_end = a_end + (S - (S - B * d)) / B;
  for (bool solo : {true, false}) {
    const Trace t = simgrid(g, topo, solo);
    EXPECT_NEAR(t.end_s[a], a_end, a_end * 1e-9) << "solo " << solo;
    EXPECT_NEAR(t.end_s[b], b_end, b_end * 1e-9) << "solo " << solo;
  }
}

// Random graphs across 4 nodes with several send and receive streams per GPU, so that flows
// meet on NVLink ports, NICs and spine links in every combination (no interference: its
// feedback amplifies the last bits of the arithmetic, see simgrid.cpp). Every op's times agree.
class SoloRandom : public ::testing::TestWithParam<uint32_t> {};

TEST_P(SoloRandom, TimersAndCommsGiveTheSameTimes) {
  auto spec = cpsim::test::dgx_h100(4);
  spec.nodes_per_leaf = 2;  // some routes cross spines
  Topology topo(spec);
  std::mt19937 rng(GetParam());
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  TaskGraph g;
  const OpLabel l = label(g);
  const uint16_t sends[] = {stream::kCpSend, stream::kTpSend, stream::kDpSend};
  const uint16_t recvs[] = {stream::kCpRecv, stream::kTpRecv, stream::kDpRecv};
  int transfers = 0;
  for (int i = 0; i < 300; ++i) {
    OpId id;
    if (pick(4) == 0) {
      id = g.add_compute(pick(32), stream::kCompute, uni(1e-6, 1e-3), l);
    } else {
      int src = pick(32), dst = pick(31);
      if (dst >= src) ++dst;
      const double cap = pick(4) == 0 ? uni(20e9, 200e9) : 0;
      id = g.add_transfer(src, sends[pick(3)], dst, recvs[pick(3)], uni(1, 64e6), l, cap);
      ++transfers;
    }
    if (id > 0 && pick(2) == 0)
      g.add_edge(static_cast<OpId>(std::max(0, static_cast<int>(id) - 1 - pick(40))), id);
  }
  g.finalize();
  ASSERT_GT(transfers, 150);
  expect_same_times(g, topo);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SoloRandom, ::testing::Values(11u, 12u, 13u, 14u));

// Two transfers of one route, one capped below half the link: water-filling gives the capped one
// its cap and the other the rest; when the capped one ends, the other has the link to itself.
TEST(SoloTransfers, TransfersOfOneRouteShareItByWaterFilling) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  const double B = topo.route_bw_Bps(0, 1), L = topo.route_latency_s(0, 1);
  const double cap = 0.25 * B, S = 1e9;
  const OpId a = g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, S, label(g), cap);
  const OpId b = g.add_transfer(0, stream::kTpSend, 1, stream::kTpRecv, 2 * S, label(g));
  g.finalize();
  // Both start at L: a at B / 4 ends at L + 4 S / B, b at 3 B / 4 until then (3 S bytes > 2 S?
  // no: b's 2 S bytes at 3 B / 4 take 8 S / (3 B) < 4 S / B, so b ends first), then a alone at
  // its cap still.
  const double b_end = L + 2 * S / (0.75 * B);
  const double a_end = L + S / cap;
  for (bool solo : {true, false}) {
    const Trace t = simgrid(g, topo, solo);
    EXPECT_NEAR(t.end_s[a], a_end, a_end * 1e-9) << "solo " << solo;
    EXPECT_NEAR(t.end_s[b], b_end, b_end * 1e-9) << "solo " << solo;
  }
}

// Random chains of transfers on a few routes (inside a node, across nodes, both ways), some
// capped, with now and then a transfer of another route over the same NIC or port: transfers
// of one route overlap and run as one group of timers, join it, leave it, are dissolved into
// Comms when another route reaches their links and regrouped when it is gone. Every op's times
// agree with plain Comms.
class RouteGroupRandom : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RouteGroupRandom, GroupsAndCommsGiveTheSameTimes) {
  Topology topo(cpsim::test::dgx_h100(2));
  std::mt19937 rng(GetParam());
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  const std::pair<int, int> routes[] = {{0, 8}, {8, 0}, {0, 1}, {1, 9}, {0, 9}, {2, 3}};
  const uint16_t sends[] = {stream::kCpSend, stream::kTpSend, stream::kDpSend};
  const uint16_t recvs[] = {stream::kCpRecv, stream::kTpRecv, stream::kDpRecv};
  TaskGraph g;
  const OpLabel l = label(g);
  OpId last[3] = {kNoOp, kNoOp, kNoOp};  // per send stream: chains that overlap each other
  for (int i = 0; i < 240; ++i) {
    const int k = pick(3);
    // Mostly the first two routes, so groups form; the others reach their links now and then.
    const auto [src, dst] = routes[pick(5) < 4 ? pick(2) : 2 + pick(4)];
    const double cap = pick(3) == 0 ? uni(5e9, 60e9) : 0;
    const OpId pause = g.add_compute(src, stream::kCompute, uni(1e-6, 4e-4), l);
    const OpId t = g.add_transfer(src, sends[k], dst, recvs[k], uni(1e5, 2e7), l, cap);
    g.add_edge(pause, t);
    if (last[k] != kNoOp && pick(2) == 0) g.add_edge(last[k], pause);
    last[k] = t;
  }
  g.finalize();
  expect_same_times(g, topo);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RouteGroupRandom, ::testing::Values(21u, 22u, 23u, 24u, 25u));

}  // namespace CPSIM_TEST_TU
