// A full graph with replica symmetry builds one DP replica; the GPUs of the others only join
// the DP collectives (bystanders, TaskGraph::set_bystanders). A pipelined ring waits for its
// join before any transfer, so their NCCL launches are one op (collectives.cpp): the step must
// be the unfolded graph's to the last bit on both engines, with fewer ops, for single-lane
// rings and multi-rail lanes, ZeRO-1 and ZeRO-3, with interference and runtime overheads. The
// report's per-GPU means count only the GPUs that compute, so they are those of the graph
// without symmetry.
#include <gtest/gtest.h>

#include <cmath>

#include "app/child_replay.hpp"
#include "engine/replay.hpp"
#include "model/transformer.hpp"
#include "report/metrics.hpp"
#include "schedule/collectives.hpp"
#include "schedule/plan.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

struct Replayed {
  schedule::Plan plan;
  schedule::Trace trace;
};

Replayed replayed(scenario::Scenario sc, scenario::EngineKind kind, bool keep_times) {
  sc.simulation.engine = kind;
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::roofline(sc.platform.gpu);
  Replayed r{schedule::plan(sc, topo, *cost), {}};
  engine::ReplayOptions ro;
  ro.interference = sc.platform.compute_interference;
  ro.keep_times = keep_times;
  r.trace = kind == scenario::EngineKind::SimGrid ? app::replay_in_child(r.plan.graph, topo, kind, ro)
                                                  : engine::replay(r.plan.graph, topo, kind, ro);
  return r;
}

struct Outcome {
  double step_s;
  size_t ops;
  std::string symmetry;
};

Outcome replay(scenario::Scenario sc, scenario::EngineKind kind, bool bystanders) {
  sc.simulation.bystanders = bystanders;
  const Replayed r = replayed(sc, kind, false);
  return {r.trace.makespan_s, r.plan.graph.size(), r.plan.info.symmetry};
}

scenario::Scenario job(int nodes, int tp, int cp, int dp, int zero) {
  auto sc = test::overhead_job(nodes, tp, cp, dp);
  sc.parallel.zero_stage = zero;
  return sc;
}

void expect_same_step_fewer_ops(const scenario::Scenario& sc) {
  for (auto kind : {scenario::EngineKind::Analytic, scenario::EngineKind::SimGrid}) {
    const Outcome folded = replay(sc, kind, true), plain = replay(sc, kind, false);
    EXPECT_NE(folded.symmetry.find("used"), std::string::npos) << folded.symmetry;
    EXPECT_EQ(folded.step_s, plain.step_s) << static_cast<int>(kind);  // bit for bit
    EXPECT_LT(folded.ops, plain.ops);
  }
}

}  // namespace

/// Replicas of two nodes, four nodes per leaf group, spines oversubscribed 2:1: a DP ring's hop
/// between leaf groups is slower than one inside, and some bystanders send over one where the
/// built replica's GPUs do not, so their launches (after their send streams) can be the last.
scenario::Scenario across_leaves(int zero) {
  auto sc = job(16, 8, 2, 8, zero);
  sc.platform.nodes_per_leaf = 4;
  sc.platform.oversubscription = 2;
  return sc;
}

TEST(Bystanders, SingleLaneRingsLaunchAsOneOp) {
  // TP 8: each DP x CP group has one GPU per node, on one rail (one lane).
  for (int zero : {1, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    expect_same_step_fewer_ops(job(8, 8, 2, 4, zero));
    expect_same_step_fewer_ops(across_leaves(zero));
  }
}

TEST(Bystanders, MultiRailLanesLaunchAsOneOp) {
  // TP 2: a DP x CP group has four GPUs per node, on four rails (fenced, lockstep lanes).
  for (int zero : {1, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    expect_same_step_fewer_ops(job(4, 2, 4, 4, zero));
  }
}

// A bystander still busy on its send stream (a long transfer) is the last to launch: the one
// op waits for that stream as its own launch did, in a single-lane ring (one member per node)
// and in multi-rail lanes (two per node), and the collective ends when it did unfolded.
TEST(Bystanders, TheFoldedLaunchWaitsForTheLastSendStream) {
  auto platform = test::dgx_h100(2);
  platform.runtime.nccl_launch_s = 5e-6;
  const model::Topology topo(platform);
  for (const std::vector<int>& ranks : {std::vector<int>{0, 8}, std::vector<int>{0, 1, 8, 9}}) {
    auto build = [&](bool bystanders) {
      schedule::TaskGraph g;
      g.set_pipelined_collectives(true);
      if (bystanders) {
        std::vector<uint8_t> by(16, 0);
        for (int r = 8; r < 16; ++r) by[static_cast<size_t>(r)] = 1;
        g.set_bystanders(by);
      }
      schedule::OpLabel l;
      l.name = g.intern("x");
      // GPU 8's send stream is busy for ~27 ms (10 GB over NVLink); GPU 0 computes for 1 ms.
      g.add_transfer(8, schedule::stream::kDpSend, 10, schedule::stream::kDpRecv, 1e10, l);
      const schedule::OpId c = g.add_compute(0, schedule::stream::kCompute, 1e-3, l);
      schedule::CollectiveRequest req;
      req.op = schedule::CollOp::AllGather;
      req.ranks = ranks;
      req.bytes = 64e6;
      req.send_stream = schedule::stream::kDpSend;
      req.recv_stream = schedule::stream::kDpRecv;
      req.label = l;
      req.deps.assign(ranks.size(), schedule::kNoOp);
      req.deps[0] = c;
      schedule::add_collective(g, topo, req);
      g.finalize();
      engine::ReplayOptions ro;
      ro.keep_times = false;
      return std::pair{engine::replay(g, topo, scenario::EngineKind::Analytic, ro).makespan_s, g.size()};
    };
    const auto folded = build(true), plain = build(false);
    EXPECT_GT(folded.first, 20e-3);
    EXPECT_EQ(folded.first, plain.first) << ranks.size() << " members";
    EXPECT_EQ(folded.second + (ranks.size() / 2 - 1), plain.second);
  }
}

// Symmetry refused once the first replica is built (its CP ring crosses spines the others
// share): every replica is built from then on, the launches folded while building the first
// stand, and the step is the unfolded graph's.
TEST(Bystanders, ARefusedSymmetryKeepsTheStep) {
  auto sc = job(4, 1, 16, 2, 3);
  sc.platform.nodes_per_leaf = 4;
  sc.platform.nccl.pxn = false;  // cross-rail ring hops through the spines refuse the symmetry
  for (auto kind : {scenario::EngineKind::Analytic, scenario::EngineKind::SimGrid}) {
    const Outcome folded = replay(sc, kind, true), plain = replay(sc, kind, false);
    EXPECT_EQ(folded.symmetry.rfind("refused", 0), 0u) << folded.symmetry;
    EXPECT_EQ(folded.step_s, plain.step_s) << static_cast<int>(kind);
  }
}

TEST(Bystanders, WithoutLaunchCostsNothingIsFolded) {
  auto sc = job(8, 8, 2, 4, 3);
  sc.platform.runtime.nccl_launch_s = 0;
  const Outcome folded = replay(sc, scenario::EngineKind::Analytic, true),
                plain = replay(sc, scenario::EngineKind::Analytic, false);
  EXPECT_EQ(folded.ops, plain.ops);
  EXPECT_EQ(folded.step_s, plain.step_s);
}

// The per-GPU means (time by category, by op, by layer kind) of a symmetric replay are those of
// every replica replayed: the GPUs that only join the DP collectives add none of their ops.
TEST(Bystanders, PerGpuMeansAreThoseOfTheFullReplay) {
  auto report = [](scenario::Scenario sc, scenario::Symmetry sym) {
    sc.simulation.symmetry = sym;
    const Replayed r = replayed(sc, scenario::EngineKind::Analytic, true);
    const model::Topology topo(sc.platform, sc.perturb);
    return std::pair{report::analyze(r.plan, r.trace, topo, model::estimate_memory(sc)), r.plan.info.symmetry};
  };
  const auto sc = job(8, 8, 2, 4, 1);
  const auto [sym, how] = report(sc, scenario::Symmetry::Auto);
  const auto [full, full_how] = report(sc, scenario::Symmetry::Off);
  ASSERT_NE(how.find("used"), std::string::npos) << how;
  ASSERT_EQ(full_how.find("used"), std::string::npos) << full_how;
  EXPECT_EQ(sym.gpus * 4, full.gpus);
  ASSERT_NEAR(sym.step_time_s, full.step_time_s, 1e-12 * full.step_time_s);
  ASSERT_EQ(sym.time_by_category.size(), full.time_by_category.size());
  for (const auto& [k, v] : full.time_by_category)
    EXPECT_NEAR(sym.time_by_category.at(k), v, 1e-9 * std::max(v, 1e-6)) << k;
  for (const auto& [k, v] : full.compute_by_layer_kind)
    EXPECT_NEAR(sym.compute_by_layer_kind.at(k), v, 1e-9 * std::max(v, 1e-6)) << k;
  EXPECT_NEAR(sym.time_by_op.at("nccl_launch"), full.time_by_op.at("nccl_launch"), 1e-15);
}

}  // namespace CPSIM_TEST_TU
