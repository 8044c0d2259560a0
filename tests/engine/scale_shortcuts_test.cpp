// Speed-ups for large meshes must not move results: one simulated data-parallel replica
// standing for all gives the same step as simulating every replica, and the shortcut is
// refused when replicas can differ.
#include <gtest/gtest.h>

#include "engine/replay.hpp"
#include "report/metrics.hpp"
#include "schedule/step.hpp"
#include "support/fixtures.hpp"
#include "test_platforms.hpp"

using namespace cpsim;

namespace {

scenario::Scenario small_dp_job(scenario::Symmetry sym) {
  scenario::Scenario sc;
  sc.model.name = "small";
  sc.model.layers = 4;
  sc.model.hidden = 1024;
  sc.model.heads_q = 8;
  sc.model.heads_kv = 8;
  sc.model.head_dim = 128;
  sc.model.ffn_hidden = 4096;
  sc.model.vocab = 32000;
  sc.training.seq_len = 16384;
  sc.training.micro_batches = 2;
  sc.parallel.cp = 8;
  sc.parallel.dp = 4;
  sc.parallel.zero_stage = 1;
  sc.simulation.symmetry = sym;
  sc.platform = test::dgx_h100(4);
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  sc.platform.nodes_per_leaf = 1;  // each replica (one node) fills its own leaf group
  return sc;
}

struct Outcome {
  double step_s;
  size_t ops;
  std::string symmetry;
};

Outcome run(const scenario::Scenario& sc, scenario::EngineKind engine) {
  model::Topology topo(sc.platform);
  auto cost = model::CostModel::roofline(sc.platform.gpu);
  schedule::Pricer pricer(*cost, sc, topo.gpus());
  schedule::TaskGraph g;
  const auto info = schedule::build_scenario(sc, topo, pricer, g);
  g.finalize();
  const auto tr = engine::replay_in_child(g, topo, engine);
  return {tr.makespan_s, g.size(), info.symmetry};
}

}  // namespace

TEST(ReplicaSymmetry, OneReplicaGivesTheSameStepAsAll) {
  for (auto engine : {scenario::EngineKind::Analytic, scenario::EngineKind::SimGrid}) {
    const Outcome all = run(small_dp_job(scenario::Symmetry::Off), engine);
    const Outcome one = run(small_dp_job(scenario::Symmetry::Auto), engine);
    EXPECT_NE(one.symmetry.find("used"), std::string::npos) << one.symmetry;
    EXPECT_LT(one.ops * 2, all.ops);
    EXPECT_NEAR(one.step_s, all.step_s, 1e-9 * all.step_s);
  }
}

TEST(ReplicaSymmetry, RefusedWhenPerturbationsMakeReplicasDiffer) {
  auto sc = small_dp_job(scenario::Symmetry::Auto);
  sc.perturb.gpu_slowdown[9] = 1.2;
  const Outcome o = run(sc, scenario::EngineKind::Analytic);
  EXPECT_NE(o.symmetry.find("refused: perturbations"), std::string::npos) << o.symmetry;
}

TEST(ReplicaSymmetry, RefusedWhenReplicasShareLeafSwitches) {
  auto sc = small_dp_job(scenario::Symmetry::Auto);
  sc.platform.nodes_per_leaf = 32;
  sc.parallel.cp = 16;  // 16-GPU replicas span two nodes of one leaf group: their cross-rail
  sc.parallel.dp = 2;   // ring hops share that leaf's spine uplinks
  const Outcome o = run(sc, scenario::EngineKind::Analytic);
  EXPECT_NE(o.symmetry.find("refused"), std::string::npos) << o.symmetry;
}
