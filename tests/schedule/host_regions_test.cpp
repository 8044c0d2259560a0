// The framework's host ops outside the softmax layers in the task graph (schedule/host_lane.hpp):
// the embedding, the LM head and loss, the Gated DeltaNet mixer, the MoE block and the optimizer
// step each put their ops on the rank's host lane, and the region's first kernel waits for them.
#include <gtest/gtest.h>

#include <string>

#include "schedule/step.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using schedule::Phase;

namespace {

scenario::Scenario small(scenario::Stack stack) {
  scenario::Scenario sc;
  sc.platform = fixtures::nvswitch_node(8, 100e9, 1e-6);
  sc.platform.runtime.ops_per_attention = -1;  // the stack's host ops (model/host_ops.hpp)
  sc.platform.runtime.host_op_s = 10.3e-6;
  sc.platform.runtime.kernel_launch_s = 3e-6;
  sc.model = fixtures::anchor_model();
  sc.model.layers = 4;
  sc.model.total_params = 0;
  sc.training.seq_len = 4096;
  sc.training.stack = stack;
  sc.training.recompute = scenario::Recompute::None;
  sc.parallel.dp = 2;
  return sc;
}

struct Built {
  schedule::TaskGraph g;
  schedule::BuildInfo info;
};

void build(Built& out, const scenario::Scenario& sc) {
  static fixtures::PerPairCost cost(1e-12);
  model::Topology topo(sc.platform);
  schedule::Pricer pricer(cost);
  out.info = schedule::build_scenario(sc, topo, pricer, out.g);
  out.g.finalize();
}

/// Host-lane ops named `name` (in `phase`, or any), and their seconds.
int host_ops(const schedule::TaskGraph& g, const std::string& name, double* seconds = nullptr, int phase = -1) {
  int n = 0;
  for (const auto& op : g.ops()) {
    if (g.str(op.label.name) != name || op.stream != schedule::stream::kHost) continue;
    if (phase >= 0 && static_cast<int>(op.label.phase) != phase) continue;
    ++n;
    if (seconds) *seconds += op.duration_s;
  }
  return n;
}

}  // namespace

TEST(HostRegions, EveryRegionIssuesHostOps) {
  for (const auto stack : {scenario::Stack::TorchEager, scenario::Stack::TorchCompile, scenario::Stack::MegatronTe}) {
    scenario::Scenario sc = small(stack);
    sc.model.pattern = {scenario::LayerKind::LinearAttention};  // Gated DeltaNet only
    Built b;
    build(b, sc);
    // Per built replica (a lean build mirrors the other), one micro-batch: four GDN layers, each
    // pass forward and backward, one embedding, one LM head forward and backward.
    const int replicas = host_ops(b.g, "host_ops_embedding");
    EXPECT_GE(replicas, 1);
    EXPECT_EQ(host_ops(b.g, "host_ops_before_linear_attention"), replicas * 4 * 2);
    EXPECT_EQ(host_ops(b.g, "host_ops_after_linear_attention"), replicas * 4 * 2);
    EXPECT_EQ(host_ops(b.g, "host_ops_lm_head_loss"), replicas);
    EXPECT_EQ(host_ops(b.g, "host_ops_lm_head_loss_bwd"), replicas);
    double opt_s = 0;
    EXPECT_EQ(host_ops(b.g, "host_ops_optimizer", &opt_s, static_cast<int>(Phase::Optimizer)), 2);
    EXPECT_GT(opt_s, 2 * 10e-6);
    // No softmax attention layer: none of its host ops.
    EXPECT_EQ(host_ops(b.g, "host_ops_before_attention"), 0);
  }
}

TEST(HostRegions, MoeBlockIssuesHostOpsAndGraphsRemoveThem) {
  scenario::Scenario sc = small(scenario::Stack::MegatronTe);
  sc.model.pattern = {scenario::LayerKind::FullAttention};
  sc.model.moe.experts = 16;
  sc.model.moe.top_k = 2;
  sc.model.moe.expert_ffn_hidden = 1024;
  sc.parallel.dp = 2;
  sc.parallel.ep = 2;
  Built b;
  build(b, sc);
  EXPECT_EQ(host_ops(b.g, "host_ops_moe"), host_ops(b.g, "host_ops_embedding") * 4 * 2);
  EXPECT_GT(host_ops(b.g, "host_ops_moe"), 0);
  sc.platform.runtime.graphs = true;
  Built g;
  build(g, sc);
  EXPECT_EQ(host_ops(g.g, "host_ops_moe"), 0);
  EXPECT_EQ(host_ops(g.g, "host_ops_optimizer"), 0);
}

}  // namespace CPSIM_TEST_TU
