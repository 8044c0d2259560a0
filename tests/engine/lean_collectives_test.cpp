// A lean graph (SimulationSpec::lean_collectives, schedule/lean_lanes.cpp) leaves out DP
// collective ops of GPUs whose replica is not built: the analytic step time must be the full
// graph's to the last bit, with fewer ops, for single-lane rings (one member per node, where
// alike phantoms stand for each other), multi-rail lanes (lockstep pipelines), ZeRO-1 and
// ZeRO-3, with and without interference; and a build that must simulate every replica after
// all falls back to the full graph.
#include <gtest/gtest.h>

#include "engine/replay.hpp"
#include "schedule/plan.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

struct Outcome {
  double step_s;
  size_t ops, dp_ops;  ///< all, and the DP collectives' (label scheme "dp")
  std::string symmetry;
};

Outcome analytic(scenario::Scenario sc, bool lean) {
  sc.simulation.engine = scenario::EngineKind::Analytic;
  sc.simulation.lean_collectives = lean;
  const model::Topology topo(sc.platform);
  const auto cost = model::CostModel::roofline(sc.platform.gpu);
  const schedule::Plan p = schedule::plan(sc, topo, *cost);
  engine::ReplayOptions ro;
  ro.interference = sc.platform.compute_interference;
  ro.keep_times = false;
  size_t dp_ops = 0;
  for (const schedule::Op& op : p.graph.ops()) dp_ops += op.label.scheme == p.graph.interned("dp");
  return {engine::replay_analytic(p.graph, topo, ro).makespan_s, p.graph.size(), dp_ops, p.info.symmetry};
}

/// small_dp_job's model on `nodes` DGX nodes with pipelined collectives (as above 512 GPUs).
scenario::Scenario job(int nodes, int tp, int cp, int dp, int zero) {
  auto sc = test::pipelined_job(nodes, tp, cp, dp);
  sc.parallel.zero_stage = zero;
  return sc;
}

void expect_same_step_fewer_ops(const scenario::Scenario& sc) {
  const Outcome full = analytic(sc, false), lean = analytic(sc, true);
  EXPECT_NE(full.symmetry.find("used"), std::string::npos) << full.symmetry;
  EXPECT_EQ(lean.step_s, full.step_s);  // bit for bit: the same times, fewer ops
  EXPECT_LT(lean.ops, full.ops);
}

}  // namespace

TEST(LeanCollectives, SingleLaneRingsKeepOnePhantomPerKind) {
  // TP 8: each DP x CP group has one GPU per node, on one rail: one lane. Two nodes per replica,
  // four per leaf group: the ring crosses the spines between every other pair of replicas, so
  // some phantoms send over a spine and receive inside a leaf, as no built GPU does.
  for (int zero : {1, 3})
    for (double interference : {0.0, 0.2}) {
      auto sc = job(16, 8, 2, 8, zero);
      sc.platform.nodes_per_leaf = 4;
      sc.platform.compute_interference = interference;
      sc.platform.runtime.nccl_launch_s = 5e-6;  // a phantom's launch waits for its send
      SCOPED_TRACE("zero " + std::to_string(zero) + " interference " + std::to_string(interference));
      expect_same_step_fewer_ops(sc);
    }
}

TEST(LeanCollectives, MultiRailLanesKeepTheirPace) {
  // TP 2, CP 4: four members of each DP x CP group per node, one lane per rail.
  for (int zero : {1, 3}) {
    auto sc = job(8, 2, 4, 8, zero);
    sc.platform.compute_interference = 0.2;
    sc.training.recompute = scenario::Recompute::Full;
    SCOPED_TRACE("zero " + std::to_string(zero));
    expect_same_step_fewer_ops(sc);
  }
}

TEST(LeanCollectives, SavesMostOfZeroThreeGathersAtLargeDp) {
  // ZeRO-3 gathers every layer's weights over all 32 replicas: the lean graph keeps the built
  // replica's members, their ring neighbours and one phantom of each kind, not 31 replicas'
  // worth (measured: 6,656 DP collective ops -> 624).
  auto sc = job(32, 8, 1, 32, 3);
  sc.platform.nodes_per_leaf = 1;
  const Outcome full = analytic(sc, false), lean = analytic(sc, true);
  EXPECT_EQ(lean.step_s, full.step_s);
  EXPECT_LT(lean.dp_ops * 8, full.dp_ops);
}

TEST(LeanCollectives, FallsBackWhereEveryReplicaIsBuilt) {
  // Replicas of half a leaf group whose CP ring crosses the spines: the first replica shows
  // that every replica must be built, so the lean build starts again in full.
  auto sc = job(8, 1, 16, 4, 3);
  sc.platform.nodes_per_leaf = 4;
  sc.platform.nccl.pxn = false;  // (with PXN the ring's rail changes stay on a leaf)
  const Outcome full = analytic(sc, false), lean = analytic(sc, true);
  EXPECT_EQ(full.symmetry.rfind("refused", 0), 0u) << full.symmetry;
  EXPECT_EQ(lean.step_s, full.step_s);
  EXPECT_EQ(lean.ops, full.ops);
}

}  // namespace CPSIM_TEST_TU
