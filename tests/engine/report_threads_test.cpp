// The report's per-rank parts run on several threads (report/metrics.cpp analyze); their sums
// are taken in rank order afterwards, so the result must not depend on how many ran.
#include <gtest/gtest.h>

#include "engine/replay.hpp"
#include "report/metrics.hpp"
#include "report/output.hpp"
#include "schedule/plan.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

TEST(ReportThreads, AnyNumberOfThreadsGivesTheSameResultToTheBit) {
  // 32 GPUs (CP 8 x DP 4, ZeRO-1) replayed in full, with jitter and one slow GPU, so that every
  // rank's figures differ.
  auto sc = test::small_dp_job(scenario::Symmetry::Off);
  sc.simulation.engine = scenario::EngineKind::Analytic;
  sc.perturb.jitter_cv = 0.05;
  sc.perturb.gpu_slowdown[5] = 1.3;
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::roofline(sc.platform.gpu);
  const schedule::Plan p = schedule::plan(sc, topo, *cost);
  const engine::Trace tr = engine::replay(p.graph, topo, sc.simulation.engine);
  const auto mem = model::estimate_memory(sc);
  const std::string one = report::result_json(report::analyze(p, tr, topo, mem, 16, 1), sc).dump();
  for (unsigned threads : {2u, 3u, 8u, 0u})
    EXPECT_EQ(report::result_json(report::analyze(p, tr, topo, mem, 16, threads), sc).dump(), one)
        << threads << " threads";
  // The ranks differ, so a part summed out of order or charged to the wrong rank would show.
  const report::Result r = report::analyze(p, tr, topo, mem, 16, 3);
  ASSERT_EQ(r.ranks.size(), 32u);
  EXPECT_NE(r.ranks[5].compute_s, r.ranks[0].compute_s);
  EXPECT_NE(r.ranks[9].wait_s, r.ranks[17].wait_s);
}

TEST(ReportThreads, TheGraphsPartBuiltBesideTheReplayGivesTheSameResultToTheBit) {
  // simulate() builds report::GraphPart on another core while the replay runs; the report
  // from it must be the one analyze() makes on its own, with any number of threads.
  auto sc = test::small_dp_job(scenario::Symmetry::Off);
  sc.simulation.engine = scenario::EngineKind::Analytic;
  sc.perturb.jitter_cv = 0.05;
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::roofline(sc.platform.gpu);
  const schedule::Plan p = schedule::plan(sc, topo, *cost);
  const engine::Trace tr = engine::replay(p.graph, topo, sc.simulation.engine);
  const auto mem = model::estimate_memory(sc);
  const report::Result whole = report::analyze(p, tr, topo, mem);
  ASSERT_FALSE(whole.links.empty());
  ASSERT_GT(whole.links.front().utilisation, 0);
  const std::string want = report::result_json(whole, sc).dump();
  for (unsigned threads : {1u, 2u, 3u})
    EXPECT_EQ(report::result_json(report::analyze(p, tr, mem, report::GraphPart(p.graph, topo), threads), sc).dump(), want)
        << threads << " threads";
}

}  // namespace CPSIM_TEST_TU
