// `cpsim plan` prunes layouts by a lower bound on their step: the compute stream's priced
// kernels per layer (app/layer_probe.hpp probe_layer) x layers per stage x micro-batches,
// stretched by the pipeline bubble. A bound above a real step would drop a layout that can
// win, so every bundled scheme, with and without pipeline stages and recomputation, is held
// under its simulated step; and it must be close enough to rank (within 2x of the step). The
// probe's op count must estimate the step's graph (the plan skips layouts estimated at over
// 1.25 x what --max-memory holds).
#include <gtest/gtest.h>

#include "app/layer_probe.hpp"
#include "app/simulate.hpp"
#include "scenario/load.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::scenario::Scenario;

namespace {

const std::string kSource = CPSIM_SOURCE_DIR;

double bound(const Scenario& sc) { return cpsim::app::step_lower_bound(cpsim::app::probe_layer(sc), sc); }

}  // namespace

class ComputeBound : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(ComputeBound, NeverAboveTheSimulatedStepAndCloseToIt) {
  const auto& args = GetParam();
  std::vector<std::string> sets(args.begin() + 1, args.end());
  sets.push_back("simulation.engine=analytic");
  const Scenario sc = cpsim::scenario::load_scenario(kSource + "/scenarios/" + args[0], sets);
  const double lb = bound(sc);
  ASSERT_GT(lb, 0) << "the reduced scenario did not build";
  const double step = cpsim::app::simulate_step_time(sc);
  EXPECT_LE(lb, step * (1 + 1e-9)) << args[0];
  EXPECT_GT(lb, 0.5 * step) << args[0];
  const auto lp = cpsim::app::probe_layer(sc);
  const cpsim::model::Topology topo(sc.platform, sc.perturb);
  const double ops = cpsim::app::estimate_graph_ops(sc, lp, cpsim::app::builds_every_replica(sc, topo, lp));
  const double built = static_cast<double>(cpsim::app::graph_ops(sc));
  EXPECT_GT(ops, 0.8 * built) << args[0];
  EXPECT_LT(ops, 1.25 * built) << args[0];
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, ComputeBound,
    ::testing::Values(
        std::vector<std::string>{"anchor-128k-ring-zigzag.yaml", "training.seq_len=32K"},
        std::vector<std::string>{"anchor-128k-ring-contiguous.yaml", "training.seq_len=32K"},
        std::vector<std::string>{"anchor-128k-ulysses.yaml", "training.seq_len=32K"},
        std::vector<std::string>{"anchor-128k-usp.yaml", "training.seq_len=32K"},
        std::vector<std::string>{"anchor-128k-allgather.yaml", "training.seq_len=32K"},
        std::vector<std::string>{"anchor-128k-ring-zigzag.yaml", "training.seq_len=32K",
                                 "parallel.cp=4", "parallel.pp=2", "training.micro_batches=4"},
        std::vector<std::string>{"anchor-128k-ring-zigzag.yaml", "training.seq_len=32K",
                                 "parallel.cp=2", "parallel.pp=4", "parallel.virtual_stages=2",
                                 "training.micro_batches=8", "training.recompute=selective"},
        std::vector<std::string>{"quickstart.yaml"},
        std::vector<std::string>{"llama3-70b-128k-fp8.yaml"},
        // TP with sequence parallelism (the probe's TP waits counted), without it (all-reduces),
        // and with pipeline stages, ZeRO-3 and recomputation around them.
        std::vector<std::string>{"llama3-8b-128k-4nodes.yaml", "training.seq_len=32K"},
        std::vector<std::string>{"llama3-8b-128k-4nodes.yaml", "training.seq_len=32K",
                                 "parallel.sequence_parallel=false"},
        std::vector<std::string>{"llama3-70b-128k-1024-h100.yaml", "platform.nodes=32", "parallel.cp=4",
                                 "parallel.pp=4", "parallel.dp=2", "parallel.virtual_stages=2",
                                 "training.micro_batches=8", "model.layers=16", "training.seq_len=32K"},
        std::vector<std::string>{"llama3-70b-128k-1024-h100.yaml", "platform.nodes=8", "parallel.cp=2",
                                 "parallel.pp=2", "parallel.dp=2", "parallel.zero_stage=3",
                                 "training.recompute=full", "training.micro_batches=4", "model.layers=8",
                                 "training.seq_len=32K"}));

TEST(ComputeBoundTp, CountsTheWaitsTpCollectivesForceOnlyWithoutOverlap) {
  // Megatron's SP all-gather feeds the QKV and MLP GEMMs, its reduce-scatter the norms: without
  // TP communication overlap the compute stream waits for each (measured: the 70B layer at 32K,
  // TP 8, bound/step 0.67 -> 0.94 with the waits and the LM head). TransformerEngine's chunked
  // overlap hides part of them, so the bound counts none there.
  std::vector<std::string> sets = {"platform.nodes=8",       "parallel.cp=2",          "parallel.pp=1",
                                   "parallel.dp=4",          "model.layers=4",         "training.seq_len=32K",
                                   "simulation.engine=analytic"};
  const Scenario sc = cpsim::scenario::load_scenario(kSource + "/scenarios/llama3-70b-128k-1024-h100.yaml", sets);
  const auto lp = cpsim::app::probe_layer(sc);
  EXPECT_GT(lp.tp_wait_s, 0.05 * lp.compute_s);
  EXPECT_LT(lp.tp_wait_s, lp.compute_s);
  EXPECT_GT(lp.head_s, 0);
  EXPECT_LE(bound(sc), cpsim::app::simulate_step_time(sc) * (1 + 1e-9));
  sets.push_back("parallel.tp_comm_overlap=true");
  const auto ov = cpsim::app::probe_layer(cpsim::scenario::load_scenario(kSource + "/scenarios/llama3-70b-128k-1024-h100.yaml", sets));
  EXPECT_EQ(ov.tp_wait_s, 0);
  EXPECT_GT(ov.compute_s, 0);
}

TEST(GraphEstimate, CountsZero3GathersAtTheMeshsDataParallelSize) {
  // ZeRO-3 gathers a layer's weights over DP x CP once for all replicas; the one-replica probe
  // gathers over CP only. Every replica built (symmetry off), DP 4: the estimate holds the graph
  // only with the gathers counted at the mesh's size. (Under sanitizers, 4 layers: the build of
  // 128 GPUs' graphs was this suite's longest test there, 22 s.)
#ifdef CPSIM_SANITIZED
  const std::string layers = "model.layers=4";
#else
  const std::string layers = "model.layers=8";
#endif
  for (const char* sym : {"simulation.symmetry=off", "simulation.symmetry=auto"}) {
    const Scenario sc = cpsim::scenario::load_scenario(
        kSource + "/scenarios/llama3-8b-128k-4nodes.yaml",
        {"platform.nodes=16", "parallel.dp=4", "parallel.zero_stage=3", "training.seq_len=32K",
         "training.micro_batches=2", layers, sym});
    const auto lp = cpsim::app::probe_layer(sc);
    const auto built = cpsim::app::graph_size(sc);
    const cpsim::model::Topology topo(sc.platform, sc.perturb);
    const double est = cpsim::app::estimate_graph_ops(sc, lp, cpsim::app::builds_every_replica(sc, topo, lp));
    EXPECT_GT(lp.shared_ops, 0) << sym;
    EXPECT_GT(est, 0.8 * static_cast<double>(built.ops)) << sym << " probe " << lp.ops << " shared " << lp.shared_ops;
    EXPECT_LT(est, 1.25 * static_cast<double>(built.ops)) << sym << " probe " << lp.ops << " shared " << lp.shared_ops;
  }
}

TEST(ComputeBoundRecompute, TheProbeSeesPartialRecomputation) {
  // The probe builds the first layer only; under Megatron's block method (the first N layers
  // of a chunk) or torchtitan's layer policy (every Nth block) the model recomputes a fraction
  // of its layers, which the probe's figures must weigh, not the probe layer's own choice.
  const std::string file = kSource + "/scenarios/llama3-8b-128k-4nodes.yaml";
  auto probe = [&](std::vector<std::string> sets) {
    sets.insert(sets.end(), {"training.seq_len=32K", "simulation.engine=analytic"});
    return cpsim::app::probe_layer(cpsim::scenario::load_scenario(file, sets));
  };
  const auto none = probe({"training.recompute=none"});
  const auto full = probe({"training.recompute=full"});
  const auto block = probe({"training.recompute=full", "training.recompute_method=block", "training.recompute_layers=8"});
  const auto every2 = probe({"training.recompute=selective", "training.selective_ac_option=2"});
  ASSERT_GT(none.compute_s, 0);
  ASSERT_GT(full.compute_s, none.compute_s);
  // 8 of 32 layers, and 16 of 32.
  EXPECT_NEAR(block.compute_s, none.compute_s + 0.25 * (full.compute_s - none.compute_s), 1e-9);
  EXPECT_NEAR(every2.compute_s, none.compute_s + 0.5 * (full.compute_s - none.compute_s), 1e-9);
  EXPECT_GT(block.ops, none.ops);
  EXPECT_LT(block.ops, full.ops);
  const auto sc = cpsim::scenario::load_scenario(
      file, {"training.seq_len=32K", "simulation.engine=analytic", "training.recompute=full",
             "training.recompute_method=block", "training.recompute_layers=8"});
  EXPECT_LE(bound(sc), cpsim::app::simulate_step_time(sc) * (1 + 1e-9));
}

}  // namespace CPSIM_TEST_TU
