// A pipeline (TaskGraph::Pipeline: one NCCL channel's ring or tree, one node's NVLS reduction)
// moves in lockstep: its members start together once the last joined, run at one rate, the one
// their most loaded link allows, and end together. These tests hold the graph's rules,
// both engines' times worked out by hand, and the SimGrid engine's timers against its Comms.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "app/child_replay.hpp"
#include "engine/replay.hpp"
#include "schedule/collectives.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::engine::ReplayOptions;
using cpsim::engine::Trace;
using cpsim::model::Topology;
using cpsim::scenario::EngineKind;
using namespace cpsim::schedule;

namespace {

OpLabel label(TaskGraph& g) {
  OpLabel l;
  l.name = g.intern("x");
  return l;
}

OpId unordered(TaskGraph& g, int src, int dst, double bytes, double cap = 0) {
  const OpId t = g.add_transfer(src, stream::kCpSend, dst, stream::kCpRecv, bytes, label(g), cap);
  g.op_mut(t).unordered = true;
  return t;
}

Trace simgrid(const TaskGraph& g, const Topology& topo, bool solo = true, bool pipelines = true) {
  ReplayOptions opt;
  opt.solo_transfers = solo;
  opt.pipelines = pipelines;
  return cpsim::app::replay_in_child(g, topo, EngineKind::SimGrid, opt);
}

}  // namespace

TEST(Pipelines, TheGraphTakesOnlyTransfersThatCanMoveInLockstep) {
  TaskGraph g;
  const OpId a = unordered(g, 0, 1, 1e6);
  unordered(g, 1, 2, 1e6);
  const OpId c = unordered(g, 2, 0, 1e6);
  EXPECT_FALSE(g.add_pipeline(a, a + 1)) << "one transfer is no pipeline";
  EXPECT_TRUE(g.add_pipeline(a, c + 1));
  EXPECT_FALSE(g.add_pipeline(c, c + 1)) << "overlaps the one before";
  const OpId d = unordered(g, 0, 1, 1e6);
  const OpId ordered = g.add_transfer(1, stream::kCpSend, 0, stream::kCpRecv, 1e6, label(g));
  EXPECT_FALSE(g.add_pipeline(d, ordered + 1)) << "an ordered transfer waits for its stream";
  const OpId e = unordered(g, 0, 1, 1e6);
  unordered(g, 1, 0, 2e6);
  EXPECT_FALSE(g.add_pipeline(e, e + 2)) << "unequal bytes";
  const OpId f = unordered(g, 0, 1, 1e6);
  unordered(g, 1, 0, 1e6, 1e9);
  EXPECT_FALSE(g.add_pipeline(f, f + 2)) << "a capped transfer";
  const OpId h = unordered(g, 0, 1, 1e6);
  unordered(g, 1, 1, 1e6);
  EXPECT_FALSE(g.add_pipeline(h, h + 2)) << "a GPU to itself";
  const OpId k = g.add_compute(0, stream::kCompute, 1e-3, label(g));
  EXPECT_FALSE(g.add_pipeline(k - 1, k + 1)) << "a compute op";
  ASSERT_EQ(g.pipelines().size(), 1u);
  for (OpId id = a; id <= c; ++id) EXPECT_EQ(g.pipeline_of(id), 0u);
  EXPECT_EQ(g.pipeline_of(d), UINT32_MAX);

  // A replica's copy brings its pipelines along, shifted.
  TaskGraph r;
  const OpId x = unordered(r, 0, 1, 1e6);
  unordered(r, 1, 0, 1e6);
  ASSERT_TRUE(r.add_pipeline(x, x + 2));
  const OpId copy = r.copy_ops(0, 2, 0, 0, 2);
  ASSERT_EQ(r.pipelines().size(), 2u);
  EXPECT_EQ(r.pipelines()[1].first, copy);
  EXPECT_EQ(r.pipelines()[1].count, 2u);
  EXPECT_EQ(r.op(copy).rank, 2);
}

// Members A 0->1 and B 2->1 both cross GPU 1's NVLink port, C 3->4 crosses no link of theirs.
// Independent, C ends at S/B and A, B at 2S/B; in lockstep all three run at B/2 (the port
// carries 2 x B/2) and end at 2S/B. The second pipeline, after the first, runs at full rate:
// its Comm reuses the first one's host pair, whose route is set anew.
TEST(Pipelines, MembersRunAtTheRateTheirMostLoadedLinkAllows) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  const double S = 1e9;
  const OpId a = unordered(g, 0, 1, S);
  unordered(g, 2, 1, S);
  const OpId c = unordered(g, 3, 4, S);
  ASSERT_TRUE(g.add_pipeline(a, c + 1));
  const OpId d = unordered(g, 5, 6, S);
  const OpId e = unordered(g, 6, 7, S);
  for (OpId m = a; m <= c; ++m) {
    g.add_edge(m, d);
    g.add_edge(m, e);
  }
  ASSERT_TRUE(g.add_pipeline(d, e + 1));
  g.finalize();
  const double L = topo.route_latency_s(0, 1), B = topo.route_bw_Bps(0, 1);
  const double first_end = L + 2 * S / B, second_end = first_end + L + S / B;
  for (bool solo : {true, false}) {
    const Trace t = simgrid(g, topo, solo);
    for (OpId m = a; m <= c; ++m) EXPECT_NEAR(t.end_s[m], first_end, first_end * 1e-9) << m;
    for (OpId m : {d, e}) EXPECT_NEAR(t.end_s[m], second_end, second_end * 1e-9) << m;
  }
  const Trace independent = simgrid(g, topo, true, false);
  EXPECT_NEAR(independent.end_s[c], L + S / B, 1e-9);
  EXPECT_NEAR(independent.end_s[a], L + 2 * S / B, 1e-9);

  // The analytic engine has no contention model: its members end together after the slowest
  // one's contention-free time.
  const Trace an = cpsim::engine::replay_analytic(g, topo);
  for (OpId m = a; m <= c; ++m) EXPECT_NEAR(an.end_s[m], L + S / B, 1e-12);
}

// A member that waits longer (a dependency) holds the whole pipeline back.
TEST(Pipelines, StartWhenTheLastMemberJoined) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  const double S = 1e8, wait = 1e-3;
  const OpId k = g.add_compute(2, stream::kCompute, wait, label(g));
  const OpId a = unordered(g, 0, 1, S);
  const OpId b = unordered(g, 2, 3, S);
  g.add_edge(k, b);
  ASSERT_TRUE(g.add_pipeline(a, b + 1));
  g.finalize();
  const double L = topo.route_latency_s(0, 1), B = topo.route_bw_Bps(0, 1);
  for (const Trace& t : {simgrid(g, topo), cpsim::engine::replay_analytic(g, topo)}) {
    EXPECT_NEAR(t.start_s[a], 0, 1e-15) << t.engine;
    EXPECT_NEAR(t.start_s[b], wait, 1e-12) << t.engine;
    EXPECT_NEAR(t.end_s[a], wait + L + S / B, 1e-9) << t.engine;
    EXPECT_NEAR(t.end_s[b], wait + L + S / B, 1e-9) << t.engine;
  }
}

// Real collectives (ring lanes, trees, NVLS trees) across `nodes` nodes, leaves of 4 and
// shared spines, with independent transfers crossing them: every pipeline's members end
// together, and the SimGrid engine's shortcuts (solo timers, pipelines' private links left out
// of their Comms) give the times its Comms over every link give. With `wide`, the first
// collective is a ring over every GPU: lanes of 128+ members, which SimGrid solves with its Full
// update (simgrid.cpp, full_update).
void check_random_pipelines(uint32_t seed, int nodes, bool wide) {
  auto spec = cpsim::test::dgx_h100(nodes);
  spec.nodes_per_leaf = 4;
  spec.spines = 2;
  spec.nccl.nvls = true;
  Topology topo(spec);
  const int gpus = 8 * nodes;
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  TaskGraph g;
  g.set_pipelined_collectives(true);
  const Algorithm algos[] = {Algorithm::Ring, Algorithm::Tree, Algorithm::NVLSTree};
  for (int i = 0; i < 6; ++i) {
    CollectiveRequest req;
    req.op = CollOp::AllReduce;
    const int first = wide && i == 0 ? 0 : 8 * pick(4), span = wide && i == 0 ? nodes : 2 + pick(4);
    for (int r = first; r < first + 8 * span; ++r) req.ranks.push_back(r);
    req.bytes = 1e6 * (1 + pick(64));
    req.algorithm = wide && i == 0 ? Algorithm::Ring : algos[pick(3)];
    req.send_stream = i % 2 ? stream::kDpSend : stream::kTpSend;
    req.recv_stream = i % 2 ? stream::kDpRecv : stream::kTpRecv;
    add_collective(g, topo, req);
  }
  for (int i = 0; i < 40; ++i)
    g.add_transfer(pick(gpus), stream::kCpSend, pick(gpus), stream::kCpRecv, 1e6 * (1 + pick(256)),
                   label(g));
  g.finalize();
  ASSERT_FALSE(g.pipelines().empty());
  uint32_t widest = 0;
  for (const Pipeline& p : g.pipelines()) widest = std::max(widest, p.count);
  EXPECT_EQ(widest >= 128, wide) << widest;
  const Trace solo = simgrid(g, topo, true), comms = simgrid(g, topo, false);
  // As in solo_transfers_test: SimGrid ends a Comm ~2e-11 s off the exact S / B, a timer is
  // exact; a wrong rate or a lost share would be off by microseconds.
  for (OpId id = 0; id < g.size(); ++id)
    ASSERT_NEAR(solo.end_s[id], comms.end_s[id], 1e-8 * comms.end_s[id] + 1e-9) << g.describe(id);
  for (const Pipeline& p : g.pipelines())
    for (OpId m = p.first; m < p.first + p.count; ++m)
      ASSERT_EQ(comms.end_s[m], comms.end_s[p.first]) << g.describe(m);
}

class PipelineRandom : public ::testing::TestWithParam<uint32_t> {};

TEST_P(PipelineRandom, ShortcutsAndCommsAgreeAndMembersEndTogether) {
  check_random_pipelines(GetParam(), 8, false);
}

TEST_P(PipelineRandom, ShortcutsAndCommsAgreeOnLanesOfEveryGpu) {
  check_random_pipelines(GetParam(), 20, true);
}

INSTANTIATE_TEST_SUITE_P(Seeds, PipelineRandom, ::testing::Values(1u, 2u, 3u, 4u));

}  // namespace CPSIM_TEST_TU
