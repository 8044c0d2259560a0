// A lean build mirrors TP ranks (schedule/replicas.hpp tp_mirror): only TP index 0 of each TP
// group is built, the others take part in the TP collectives as its phantoms. The analytic
// step time must be the unmirrored graph's (and the full graph's) to the last bit, with fewer
// ops, for every attention scheme, with and without sequence parallelism, pipeline stages,
// recomputation, ZeRO-3, interference and fixed runtime overheads; and where a TP rank can
// differ (TP overlap, a slow GPU) nothing is mirrored.
#include <gtest/gtest.h>

#include "engine/replay.hpp"
#include "schedule/plan.hpp"
#include "schedule/replicas.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

struct Outcome {
  double step_s;
  size_t ops;
};

Outcome analytic(scenario::Scenario sc, bool lean, bool mirror) {
  sc.simulation.engine = scenario::EngineKind::Analytic;
  sc.simulation.lean_collectives = lean;
  sc.simulation.mirror_tp = mirror;
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::roofline(sc.platform.gpu);
  const schedule::Plan p = schedule::plan(sc, topo, *cost);
  engine::ReplayOptions ro;
  ro.interference = sc.platform.compute_interference;
  ro.keep_times = false;
  return {engine::replay_analytic(p.graph, topo, ro).makespan_s, p.graph.size()};
}

scenario::Scenario job(int nodes, int tp, int cp, int pp, int dp) {
  auto sc = test::overhead_job(nodes, tp, cp, dp);
  sc.parallel.pp = pp;
  return sc;
}

void expect_mirrored_same_step(const scenario::Scenario& sc) {
  const model::Topology topo(sc.platform, sc.perturb);
  scenario::Scenario lean = sc;
  lean.simulation.lean_collectives = true;
  ASSERT_EQ(schedule::tp_mirror(lean, topo), "");
  const Outcome full = analytic(sc, false, false), plain = analytic(sc, true, false),
                mirrored = analytic(sc, true, true);
  EXPECT_EQ(mirrored.step_s, plain.step_s);  // bit for bit
  EXPECT_EQ(mirrored.step_s, full.step_s);
  // Most of a layer's ops are per TP rank: at least a third of them go at tp 2.
  EXPECT_LT(mirrored.ops * 3, plain.ops * 2) << mirrored.ops << " vs " << plain.ops;
}

}  // namespace

TEST(TpMirror, EverySchemeTimesAsItsUnmirroredGraph) {
  using scenario::AttentionScheme;
  struct Case {
    AttentionScheme scheme;
    int tp, cp, pp, dp, zero;
    bool sp;
    scenario::Recompute rc;
  };
  const Case cases[] = {
      {AttentionScheme::Ring, 4, 2, 1, 1, 0, false, scenario::Recompute::None},
      {AttentionScheme::Ring, 4, 2, 2, 1, 0, false, scenario::Recompute::None},
      {AttentionScheme::Ring, 4, 2, 2, 1, 0, true, scenario::Recompute::None},
      {AttentionScheme::Ring, 2, 2, 2, 1, 0, false, scenario::Recompute::None},
      {AttentionScheme::Ring, 8, 1, 2, 1, 0, false, scenario::Recompute::None},
      {AttentionScheme::Ring, 2, 4, 2, 2, 1, true, scenario::Recompute::Full},
      {AttentionScheme::Ring, 8, 2, 1, 2, 3, false, scenario::Recompute::None},
      {AttentionScheme::Usp, 4, 4, 2, 1, 3, true, scenario::Recompute::None},
      {AttentionScheme::Ulysses, 2, 4, 1, 2, 1, false, scenario::Recompute::Full},
      {AttentionScheme::DoubleRing, 2, 8, 1, 1, 1, true, scenario::Recompute::None},
      {AttentionScheme::AllGather, 4, 2, 2, 2, 0, true, scenario::Recompute::Full},
  };
  for (const Case& c : cases) {
    auto sc = job(8, c.tp, c.cp, c.pp, c.dp);
    sc.model.layers = 4;
    sc.parallel.attention.scheme = c.scheme;
    if (c.scheme == AttentionScheme::Usp) sc.parallel.attention.ulysses_degree = 2;
    if (c.scheme == AttentionScheme::DoubleRing) sc.parallel.attention.inner_ring = 4;
    sc.parallel.zero_stage = c.zero;
    sc.parallel.sequence_parallel = c.sp;
    sc.parallel.virtual_stages = c.pp > 1 ? 2 : 1;
    sc.training.micro_batches = c.pp > 1 ? 4 : 2;
    sc.training.recompute = c.rc;
    SCOPED_TRACE("scheme " + std::to_string(static_cast<int>(c.scheme)) + " tp " +
                 std::to_string(c.tp) + " cp " + std::to_string(c.cp) + " pp " + std::to_string(c.pp) +
                 " dp " + std::to_string(c.dp) + " zero " + std::to_string(c.zero));
    expect_mirrored_same_step(sc);
  }
}

TEST(TpMirror, NothingMirroredWhereTpRanksCanDiffer) {
  auto sc = job(4, 4, 2, 1, 2);
  sc.parallel.sequence_parallel = true;
  sc.parallel.tp_comm_overlap = true;  // chunked GEMMs interleave with the TP transfers
  const model::Topology topo(sc.platform, sc.perturb);
  scenario::Scenario lean = sc;
  lean.simulation.lean_collectives = true;
  EXPECT_NE(schedule::tp_mirror(lean, topo), "");
  EXPECT_EQ(analytic(sc, true, true).ops, analytic(sc, true, false).ops);

  auto slow = job(4, 4, 2, 1, 2);
  slow.perturb.gpu_slowdown[1] = 1.3;  // TP rank 1 of the first group
  lean = slow;
  lean.simulation.lean_collectives = true;
  EXPECT_NE(schedule::tp_mirror(lean, model::Topology(slow.platform, slow.perturb)), "");
  const Outcome m = analytic(slow, true, true), u = analytic(slow, true, false);
  EXPECT_EQ(m.ops, u.ops);
  EXPECT_EQ(m.step_s, u.step_s);
}

}  // namespace CPSIM_TEST_TU
