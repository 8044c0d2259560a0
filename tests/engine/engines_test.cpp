// Both engines on the same graphs: exact single transfers, agreement wherever no link is
// shared, and contention only in SimGrid. SimGrid runs in a child process (one Engine per
// process), so this file also passes when run directly rather than through ctest.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

Trace run(EngineKind kind, const TaskGraph& g, const Topology& topo,
          const ReplayOptions& opt = {}) {
  return cpsim::app::replay_in_child(g, topo, kind, opt);
}

void expect_agree(const TaskGraph& g, const Trace& a, const Trace& s, double rel = 1e-3) {
  ASSERT_EQ(a.start_s.size(), g.size());
  ASSERT_EQ(s.start_s.size(), g.size());
  auto tol = [&](double x) { return rel * std::abs(x) + 1e-12; };
  for (OpId id = 0; id < g.size(); ++id) {
    EXPECT_NEAR(s.start_s[id], a.start_s[id], tol(a.start_s[id])) << g.describe(id);
    EXPECT_NEAR(s.end_s[id], a.end_s[id], tol(a.end_s[id])) << g.describe(id);
  }
  EXPECT_NEAR(s.makespan_s, a.makespan_s, tol(a.makespan_s));
}

OpLabel label(TaskGraph& g, const char* name) {
  OpLabel l;
  l.name = g.intern(name);
  return l;
}

}  // namespace

TEST(Engines, OneGigabyteOverNvswitchIsLatencyPlusSizeOverBandwidth) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, 1e9, label(g, "x"));
  g.finalize();
  const double expected = topo.route_latency_s(0, 1) + 1e9 / topo.route_bw_Bps(0, 1);
  for (auto kind : {EngineKind::Analytic, EngineKind::SimGrid}) {
    Trace t = run(kind, g, topo);
    EXPECT_NEAR(t.makespan_s, expected, expected * 1e-9) << t.engine;
    EXPECT_EQ(t.start_s[0], 0.0);
  }
  EXPECT_EQ(run(EngineKind::SimGrid, g, topo).engine, "simgrid");
  EXPECT_EQ(run(EngineKind::Analytic, g, topo).engine, "analytic");
}

TEST(Engines, AnOpWaitingForMoreThan65535OpsStartsAfterTheLast) {
  // The engines count waits in two bytes per op, and past 65,534 on the side (replay_common.hpp
  // Waits): a join over 70,000 ops (and over 65,535 exactly, the boundary) starts when the last
  // of them ends.
  Topology topo(cpsim::test::dgx_h100());
  for (const OpId fan : {65535u, 70000u}) {
    TaskGraph g;
    const OpId join_pred_last = fan - 1;
    for (OpId i = 0; i < fan; ++i)
      g.add_compute(static_cast<int>(i % 8), static_cast<uint16_t>(100 + i / 8 % 4), i == join_pred_last ? 2e-3 : 1e-3, label(g, "k"));
    const OpId join = g.add_compute(0, stream::kCompute, 1e-3, label(g, "join"));
    for (OpId i = 0; i < fan; ++i) g.add_edge(i, join);
    g.finalize();
    for (auto kind : {EngineKind::Analytic, EngineKind::SimGrid}) {
      const Trace t = run(kind, g, topo);
      SCOPED_TRACE(t.engine + " fan " + std::to_string(fan));
      EXPECT_GE(t.start_s[join], t.end_s[join_pred_last]);
      EXPECT_DOUBLE_EQ(t.start_s[join], *std::max_element(t.end_s.begin(), t.end_s.begin() + fan));
      EXPECT_GT(t.makespan_s, t.start_s[join]);
    }
  }
}
TEST(Engines, WaitsCountedOnSeveralThreadsHoldEveryJoinBackUntilItsLast) {
  // Past 2^18 ops the wait counts are taken on the machine's cores, each a slice of the ids
  // (replay_common.hpp Waits). Two parts of 160,000 ops, each closed by a join over its last
  // 70,000 (counted on the side, past two bytes): the first join ends the first slice, the
  // second the last; each starts when the last of its own ops ends.
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  const OpId part = 160000, fan = 70000;
  std::vector<OpId> joins;
  for (int p = 0; p < 2; ++p) {
    const OpId first = static_cast<OpId>(g.size());
    for (OpId i = 0; i < part; ++i)
      g.add_compute(static_cast<int>(i % 8), static_cast<uint16_t>(100 + i / 8 % 4), 1e-6 * (1 + i % 3), label(g, "k"));
    joins.push_back(g.add_compute(0, stream::kCompute, 1e-3, label(g, "join")));
    for (OpId i = first + part - fan; i < first + part; ++i) g.add_edge(i, joins.back());
  }
  ASSERT_GE(g.size(), size_t{1} << 18);
  g.finalize();
  const Trace t = run(EngineKind::Analytic, g, topo);
  for (const OpId j : joins) {
    double last = 0;
    for (OpId i = j - fan; i < j; ++i) last = std::max(last, t.end_s[i]);
    EXPECT_EQ(t.start_s[j], last) << "join " << j;
  }
  EXPECT_LT(t.end_s[joins[0]], t.start_s[joins[1]]);
}

TEST(Engines, TwoFlowsIntoOneGpuShareItsDownLinkOnlyInSimgrid) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  // Two receive streams on GPU 1, so both transfers may run at once; both cross down(1).
  g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, 1e9, label(g, "a"));
  g.add_transfer(2, stream::kCpSend, 1, stream::kTpRecv, 1e9, label(g, "b"));
  g.finalize();
  const double L = topo.route_latency_s(0, 1), B = topo.route_bw_Bps(0, 1);
  Trace a = run(EngineKind::Analytic, g, topo);
  Trace s = run(EngineKind::SimGrid, g, topo);
  for (OpId id : {0u, 1u}) {
    EXPECT_NEAR(a.end_s[id], L + 1e9 / B, 1e-12);
    EXPECT_NEAR(s.end_s[id], L + 2e9 / B, 1e-12);
  }
}

TEST(Engines, FlowsOfDifferentRouteLatencyShareALinkEqually) {
  // GPU 0 sends to a GPU under its own leaf and to one behind a spine: both cross its NIC's up
  // link, with different route latencies. RDMA shares the link equally (SimGrid's CM02 would
  // weigh the shares by 1/latency, TCP's RTT unfairness, if the latency were in its links).
  Topology topo(cpsim::test::dgx_h100(64));
  TaskGraph g;
  const int near = 8, far = 40 * 8;
  g.add_transfer(0, stream::kCpSend, near, stream::kCpRecv, 1e9, label(g, "near"));
  g.add_transfer(0, stream::kTpSend, far, stream::kCpRecv, 1e9, label(g, "far"));
  g.finalize();
  ASSERT_LT(topo.route_latency_s(0, near) * 1.2, topo.route_latency_s(0, far));
  const double B = topo.route_bw_Bps(0, near);
  ASSERT_EQ(B, topo.route_bw_Bps(0, far));
  Trace s = run(EngineKind::SimGrid, g, topo);
  // Equal shares: both take 2 S / B, give or take the latencies (microseconds).
  for (OpId id : {0u, 1u}) EXPECT_NEAR(s.end_s[id], 2e9 / B, 10e-6) << g.describe(id);
}

TEST(Engines, RateCapBoundsEachFlowWithoutSharingTheCap) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  // Both capped at 100 GB/s; together they use 200 of down(1)'s 370.8 GB/s: no slowdown.
  g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, 1e9, label(g, "a"), 100e9);
  g.add_transfer(2, stream::kCpSend, 1, stream::kTpRecv, 1e9, label(g, "b"), 100e9);
  // A third, uncapped, from another GPU into GPU 3 alone.
  g.add_transfer(4, stream::kCpSend, 3, stream::kCpRecv, 1e9, label(g, "c"));
  g.finalize();
  const double L = topo.route_latency_s(0, 1);
  Trace a = run(EngineKind::Analytic, g, topo);
  Trace s = run(EngineKind::SimGrid, g, topo);
  for (OpId id : {0u, 1u}) {
    EXPECT_NEAR(a.end_s[id], L + 1e9 / 100e9, 1e-12);
    EXPECT_NEAR(s.end_s[id], L + 1e9 / 100e9, 1e-12);
  }
  EXPECT_NEAR(s.end_s[2], L + 1e9 / topo.route_bw_Bps(4, 3), 1e-12);
}

TEST(Engines, SharedCapStillSharesTheLink) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  // Three flows into GPU 1 capped at 200 GB/s: the link (370.8) is the bottleneck, shared.
  g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, 1e9, label(g, "a"), 200e9);
  g.add_transfer(2, stream::kCpSend, 1, stream::kTpRecv, 1e9, label(g, "b"), 200e9);
  g.add_transfer(3, stream::kCpSend, 1, stream::kDpRecv, 1e9, label(g, "c"), 200e9);
  g.finalize();
  Trace s = run(EngineKind::SimGrid, g, topo);
  const double expected = topo.route_latency_s(0, 1) + 3e9 / topo.route_bw_Bps(0, 1);
  for (OpId id = 0; id < 3; ++id) EXPECT_NEAR(s.end_s[id], expected, 1e-12);
}

TEST(Engines, ZeroByteAndSelfTransfersTakeOnlyLatency) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  OpId z = g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, 0, label(g, "zero"));
  OpId self =
      g.add_transfer(2, stream::kCpSend, 2, stream::kCpRecv, 1e6, label(g, "self"), 0, 3e-6);
  OpId soft = g.add_transfer(4, stream::kCpSend, 5, stream::kCpRecv, 0, label(g, "soft"), 0, 2e-6);
  OpId c0 = g.add_compute(6, stream::kCompute, 0, label(g, "nop"));
  OpId c1 = g.add_compute(6, stream::kCompute, 1e-6, label(g, "after-nop"));
  g.finalize();
  for (auto kind : {EngineKind::Analytic, EngineKind::SimGrid}) {
    Trace t = run(kind, g, topo);
    EXPECT_NEAR(t.end_s[z], topo.route_latency_s(0, 1), 1e-15) << t.engine;
    EXPECT_NEAR(t.end_s[self], 3e-6, 1e-15) << t.engine;
    EXPECT_NEAR(t.end_s[soft], 2e-6 + topo.route_latency_s(4, 5), 1e-15) << t.engine;
    EXPECT_EQ(t.end_s[c0], 0.0) << t.engine;
    EXPECT_NEAR(t.end_s[c1], 1e-6, 1e-15) << t.engine;
  }
}

TEST(Engines, TransferWaitsForBothQueuesAndItsPredecessors) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  // GPU 1's receive stream is busy until its first receive is done; the second transfer from
  // GPU 2 must wait for it even though GPU 2's send stream is idle.
  OpId c = g.add_compute(0, stream::kCompute, 10e-6, label(g, "c"));
  OpId t1 = g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, 1e6, label(g, "t1"));
  OpId t2 = g.add_transfer(2, stream::kCpSend, 1, stream::kCpRecv, 1e6, label(g, "t2"));
  g.add_edge(c, t1);
  g.finalize();
  for (auto kind : {EngineKind::Analytic, EngineKind::SimGrid}) {
    Trace t = run(kind, g, topo);
    EXPECT_NEAR(t.start_s[t1], 10e-6, 1e-15) << t.engine;
    EXPECT_NEAR(t.start_s[t2], t.end_s[t1], 1e-15) << t.engine;
  }
}

TEST(Engines, InterferenceSlowsComputeWhileItsGpuTransfers) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  OpId c = g.add_priced(0, stream::kCompute, 1e-3, label(g, "gemm"));
  OpId t = g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, 100e6, label(g, "kv"));
  OpId other = g.add_priced(2, stream::kCompute, 1e-3, label(g, "far"));
  // A runtime overhead (not priced: a launch, a framework op) is host work: never slowed.
  OpId launch = g.add_compute(0, stream::kHost, 1e-3, label(g, "host_launch"));
  g.finalize();
  ReplayOptions opt;
  opt.interference = 0.25;
  const double tt = topo.route_latency_s(0, 1) + 100e6 / topo.route_bw_Bps(0, 1);
  // During the transfer, compute advances at 1 / 1.25 speed.
  const double expected = tt + (1e-3 - tt / 1.25);
  Trace a = run(EngineKind::Analytic, g, topo, opt);
  Trace s = run(EngineKind::SimGrid, g, topo, opt);
  EXPECT_NEAR(a.end_s[c], expected, 1e-12);
  EXPECT_NEAR(s.end_s[c], expected, 1e-9);
  EXPECT_NEAR(a.end_s[t], tt, 1e-15);
  EXPECT_NEAR(s.end_s[other], 1e-3, 1e-12);
  EXPECT_NEAR(a.end_s[launch], 1e-3, 1e-15);
  EXPECT_NEAR(s.end_s[launch], 1e-3, 1e-12);
}

TEST(Engines, WithoutTimesOnlyTheMakespanComesBackTheSame) {
  // A sample's replay keeps no per-op times (ReplayOptions::keep_times): the same step.
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  OpId prev = kNoOp;
  for (int i = 0; i < 6; ++i) {
    const OpId c = g.add_priced(i % 4, stream::kCompute, 1e-3 * (i + 1), label(g, "k"));
    const OpId t = g.add_transfer(i % 4, stream::kCpSend, (i + 1) % 4, stream::kCpRecv, 50e6, label(g, "kv"));
    g.add_edge(prev, c);
    g.add_edge(c, t);
    prev = t;
  }
  g.add_transfer(4, stream::kCpSend, 5, stream::kCpRecv, 80e6, label(g, "other"));
  g.finalize();
  ReplayOptions opt;
  opt.interference = 0.2;
  for (EngineKind kind : {EngineKind::Analytic, EngineKind::SimGrid}) {
    const Trace full = run(kind, g, topo, opt);
    ReplayOptions bare = opt;
    bare.keep_times = false;
    const Trace t = run(kind, g, topo, bare);
    EXPECT_TRUE(t.start_s.empty() && t.end_s.empty()) << t.engine;
    EXPECT_EQ(t.makespan_s, full.makespan_s) << t.engine;
    EXPECT_EQ(full.makespan_s, *std::max_element(full.end_s.begin(), full.end_s.end())) << t.engine;
  }
}

TEST(Engines, TwoComputeStreamsOfOneGpuDoNotSlowEachOther) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  g.add_compute(0, stream::kCompute, 1e-3, label(g, "a"));
  g.add_compute(0, 9, 1e-3, label(g, "b"));
  g.finalize();
  Trace s = run(EngineKind::SimGrid, g, topo);
  EXPECT_NEAR(s.end_s[0], 1e-3, 1e-12);
  EXPECT_NEAR(s.end_s[1], 1e-3, 1e-12);
}

TEST(Engines, RejectGraphsLargerThanThePlatform) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  g.add_transfer(0, stream::kCpSend, 9, stream::kCpRecv, 1, label(g, "x"));
  g.finalize();
  EXPECT_THROW(cpsim::engine::replay_analytic(g, topo), std::invalid_argument);
  EXPECT_THROW(run(EngineKind::SimGrid, g, topo), std::runtime_error);
  TaskGraph h;
  h.add_compute(0, 0, 1, label(h, "x"));
  EXPECT_THROW(cpsim::engine::replay_analytic(h, topo), std::logic_error);  // not finalized
}

TEST(Engines, OneSimgridEnginePerProcess) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  g.add_compute(0, 0, 1e-6, label(g, "x"));
  g.finalize();
  // In a child, so that this test leaves the test process free of SimGrid either way.
  EXPECT_NO_THROW(run(EngineKind::SimGrid, g, topo));
  const pid_t pid = fork();
  if (pid == 0) {
    cpsim::engine::replay_simgrid(g, topo);
    bool threw = false;
    try {
      cpsim::engine::replay_simgrid(g, topo);
    } catch (const std::logic_error&) {
      threw = true;
    }
    _exit(threw ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// --- random contention-free graphs -----------------------------------------------------------
//
// On one NVSwitch node a transfer uses up(src) and down(dst) only. With a single send stream
// and a single receive stream per GPU, two transfers in flight at once never share a sender or
// a receiver, hence never a link: any graph is contention-free and the engines must agree.

struct RandomCase {
  uint32_t seed;
  double interference;
};

class RandomGraphs : public ::testing::TestWithParam<RandomCase> {};

TEST_P(RandomGraphs, EnginesAgreeWithinOnePermille) {
  const auto [seed, interference] = GetParam();
  Topology topo(cpsim::test::dgx_h100());
  std::mt19937 rng(seed);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  TaskGraph g;
  const OpLabel l = label(g, "op");
  const int n_ops = 400;
  for (int i = 0; i < n_ops; ++i) {
    OpId id;
    const int shape = pick(10);
    if (shape < 4) {
      id = g.add_compute(pick(8), shape == 0 ? 9 : stream::kCompute,
                         pick(20) == 0 ? 0 : uni(1e-6, 2e-3), l);
    } else {
      int src = pick(8), dst = pick(7);
      if (dst >= src) ++dst;
      const double bytes = pick(10) == 0 ? 0 : uni(1, 256e6);
      const double cap = pick(4) == 0 ? uni(50e9, 400e9) : 0;
      const double extra = pick(3) == 0 ? uni(0, 20e-6) : 0;
      id = g.add_transfer(src, stream::kCpSend, dst, stream::kCpRecv, bytes, l, cap, extra);
    }
    // Chains, forks and joins: up to three predecessors among recent ops.
    if (id > 0)
      for (int k = pick(4); k > 0; --k)
        g.add_edge(static_cast<OpId>(std::max(0, static_cast<int>(id) - 1 - pick(30))), id);
  }
  g.finalize();
  ReplayOptions opt;
  opt.interference = interference;
  Trace a = run(EngineKind::Analytic, g, topo, opt);
  Trace s = run(EngineKind::SimGrid, g, topo, opt);
  EXPECT_GT(a.makespan_s, 0);
  expect_agree(g, a, s);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomGraphs,
                         ::testing::Values(RandomCase{1, 0}, RandomCase{2, 0}, RandomCase{3, 0},
                                           RandomCase{4, 0}, RandomCase{5, 0.2}, RandomCase{6, 0.4},
                                           RandomCase{7, 0.2}, RandomCase{8, 0}),
                         [](const ::testing::TestParamInfo<RandomCase>& info) {
                           return "seed" + std::to_string(info.param.seed) +
                                  (info.param.interference > 0 ? "_interference" : "");
                         });

// Across nodes (and PCIe trees), links are shared between GPUs, so keep every transfer
// serialised: a single chain of random ops over random GPU pairs.
class RandomChains : public ::testing::TestWithParam<int> {};

TEST_P(RandomChains, EnginesAgreeOnSerialisedTraffic) {
  const int variant = GetParam();
  auto spec = variant == 0 ? cpsim::test::dgx_h100(4) : cpsim::test::pcie_box(2);
  if (variant == 0) spec.nodes_per_leaf = 2;  // some routes cross spines
  Topology topo(spec);
  std::mt19937 rng(100 + variant);
  auto uni = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  TaskGraph g;
  const OpLabel l = label(g, "op");
  OpId prev = kNoOp;
  for (int i = 0; i < 300; ++i) {
    OpId id;
    if (pick(3) == 0) {
      id = g.add_compute(pick(topo.gpus()), stream::kCompute, uni(1e-6, 1e-3), l);
    } else {
      int src = pick(topo.gpus()), dst = pick(topo.gpus() - 1);
      if (dst >= src) ++dst;
      id = g.add_transfer(src, stream::kCpSend, dst, stream::kCpRecv, uni(0, 64e6), l,
                          pick(4) == 0 ? 20e9 : 0, pick(2) ? 5e-6 : 0);
    }
    g.add_edge(prev, id);
    prev = id;
  }
  g.finalize();
  Trace a = run(EngineKind::Analytic, g, topo);
  Trace s = run(EngineKind::SimGrid, g, topo);
  expect_agree(g, a, s);
}

INSTANTIATE_TEST_SUITE_P(Platforms, RandomChains, ::testing::Values(0, 1));

}  // namespace CPSIM_TEST_TU
