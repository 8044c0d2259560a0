// `cpsim plan` screens ring-family attention layers with one TP rank's CP group instead of all
// of them (SimulationSpec::one_tp_group): their K,V move by P2P transfers between the group's
// own GPUs, which the analytic engine times alone, so the layer's time must be the very same.
// (All-gather's collectives relay through other ranks' NICs and do couple the groups: the plan
// builds every group for it.)
#include <gtest/gtest.h>

#include "support/built_step.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

/// TP 4 x CP 8 on four DGX nodes: each CP group spans all four nodes over the NICs.
scenario::Scenario layer(scenario::AttentionScheme scheme, int ulysses, int inner, bool one) {
  scenario::Scenario sc;
  sc.model.name = "small";
  sc.model.layers = 4;
  sc.model.hidden = 4096;
  sc.model.heads_q = 32;
  sc.model.heads_kv = 8;
  sc.model.head_dim = 128;
  sc.model.ffn_hidden = 14336;
  sc.model.vocab = 32000;
  sc.training.seq_len = 65536;
  sc.parallel.tp = 4;
  sc.parallel.cp = 8;
  sc.parallel.attention.scheme = scheme;
  sc.parallel.attention.ulysses_degree = ulysses;
  sc.parallel.attention.inner_ring = inner;
  sc.simulation.scope = scenario::Scope::AttentionLayer;
  sc.simulation.engine = scenario::EngineKind::Analytic;
  sc.simulation.one_tp_group = one;
  sc.platform = test::dgx_h100(4);
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  return sc;
}

struct Outcome {
  double step_s;
  size_t ops;
};

Outcome run(const scenario::Scenario& sc) {
  const test::BuiltStep step(sc);
  return {step.analytic_s(), step.g.size()};
}

}  // namespace

TEST(OneTpGroup, AnalyticRingLayerTimeIsTheAllGroupsOne) {
  using S = scenario::AttentionScheme;
  const struct {
    S scheme;
    int ulysses, inner;
  } cases[] = {{S::Ring, 0, 0}, {S::DoubleRing, 0, 2}, {S::DoubleRing, 0, 4}};
  for (const auto& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.scheme));
    const Outcome all = run(layer(c.scheme, c.ulysses, c.inner, false));
    const Outcome one = run(layer(c.scheme, c.ulysses, c.inner, true));
    EXPECT_EQ(one.ops * 4, all.ops);
    EXPECT_GT(one.step_s, 0);
    EXPECT_EQ(one.step_s, all.step_s);
  }
}

}  // namespace CPSIM_TEST_TU
