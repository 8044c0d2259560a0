// Data parallelism as the frameworks run it (model/data_parallel.hpp): Megatron's buckets and
// overlap options, FSDP's resharding under pipeline parallelism, in the graph and in time.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "support/built_step.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

/// A step built and timed on the analytic engine, read by its collectives' labels.
struct Built : test::BuiltStep {
  explicit Built(const scenario::Scenario& sc) : BuiltStep(sc), step_s(analytic_s()) {}
  double step_s;
  /// Ops of collectives named `name`: their layers, micro-batches and phases.
  std::set<int> layers(const std::string& name) const {
    std::set<int> out;
    for (schedule::OpId id = 0; id < g.size(); ++id)
      if (g.str(g.op(id).label.name) == name) out.insert(g.op(id).label.layer);
    return out;
  }
  std::set<int> micros(const std::string& name) const {
    std::set<int> out;
    for (schedule::OpId id = 0; id < g.size(); ++id)
      if (g.str(g.op(id).label.name) == name) out.insert(g.op(id).label.micro);
    return out;
  }
  std::set<schedule::Phase> phases(const std::string& name) const {
    std::set<schedule::Phase> out;
    for (schedule::OpId id = 0; id < g.size(); ++id)
      if (g.str(g.op(id).label.name) == name) out.insert(g.op(id).label.phase);
    return out;
  }
};

}  // namespace

TEST(MegatronDp, WithoutOverlapOneBucketAfterTheBackward) {
  auto sc = test::llama8b_tp8_job();
  const Built off(sc);
  // One bucket, closed at the stage's first layer, after the whole backward.
  EXPECT_EQ(off.layers("dp_reducescatter_grads"), std::set<int>{0});
  // The gather of the updated weights follows the optimizer step.
  EXPECT_EQ(off.phases("dp_allgather_params"), std::set<schedule::Phase>{schedule::Phase::Optimizer});

  sc.parallel.overlap_grad_reduce = true;
  sc.parallel.dp_bucket_bytes = 1;  // a bucket per layer
  const Built on(sc);
  EXPECT_EQ(on.layers("dp_reducescatter_grads"), (std::set<int>{0, 1, 2, 3}));
  EXPECT_LT(on.step_s, off.step_s);
}

TEST(MegatronDp, OverlappedParamGatherRunsBeforeTheFirstForward) {
  auto sc = test::llama8b_tp8_job();
  sc.parallel.overlap_grad_reduce = true;
  sc.parallel.dp_bucket_bytes = 1;
  const Built grads_only(sc);
  sc.parallel.overlap_param_gather = true;
  const Built both(sc);
  // A gather per bucket, in the forward of the first micro-batch; none after the optimizer.
  EXPECT_EQ(both.phases("dp_allgather_params"), std::set<schedule::Phase>{schedule::Phase::Forward});
  EXPECT_EQ(both.layers("dp_allgather_params"), (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(both.micros("dp_allgather_params"), std::set<int>{0});
  // Only the first bucket's gather waits before the forward; the step's tail gather is gone.
  EXPECT_LT(both.step_s, grads_only.step_s);
}

TEST(MegatronDp, GradientsReduceInFp32ByDefault) {
  auto sc = test::llama8b_tp8_job();
  const Built fp32(sc);
  sc.parallel.grad_reduce_fp32 = false;
  const Built bf16(sc);
  double b32 = 0, b16 = 0;
  for (schedule::OpId id = 0; id < fp32.g.size(); ++id)
    if (fp32.g.str(fp32.g.op(id).label.name) == "dp_reducescatter_grads") b32 += fp32.g.op(id).bytes;
  for (schedule::OpId id = 0; id < bf16.g.size(); ++id)
    if (bf16.g.str(bf16.g.op(id).label.name) == "dp_reducescatter_grads") b16 += bf16.g.op(id).bytes;
  EXPECT_GT(b16, 0);
  EXPECT_DOUBLE_EQ(b32, 2 * b16);
}

TEST(Fsdp, UnderPipelineTheWeightsAreGatheredOncePerStep) {
  auto sc = test::llama8b_tp8_job();
  sc.parallel.tp = 1;
  sc.parallel.pp = 2;
  sc.parallel.dp = 16;
  sc.parallel.zero_stage = 3;
  sc.training.micro_batches = 4;
  sc.training.recompute = scenario::Recompute::Full;
  const Built kept(sc);
  // torchtitan's default under PP: no block reshards, so the first micro-batch's forward
  // gathers each block and every later pass reuses it.
  EXPECT_EQ(kept.micros("zero3_allgather_params"), std::set<int>{0});
  EXPECT_EQ(kept.phases("zero3_allgather_params"), std::set<schedule::Phase>{schedule::Phase::Forward});
  sc.parallel.reshard_after_forward = scenario::ParallelSpec::Reshard::Always;
  const Built resharded(sc);
  EXPECT_EQ(resharded.micros("zero3_allgather_params"), (std::set<int>{0, 1, 2, 3}));
  EXPECT_TRUE(resharded.phases("zero3_allgather_params").count(schedule::Phase::Backward));
  EXPECT_LT(kept.step_s, resharded.step_s);
}

/// ZeRO-3 on llama8b_tp8_job (4 layers, 2 micro-batches), replayed: on GPU `rank`, when the
/// last micro-batch's reduce-scatter of the last layer's gradients (the first its backward
/// makes ready) ends, when
/// the last micro-batch's backward gathers layer 0's weights (the last gather it queues), and
/// when that GPU's backward of the last layer ends and its reduce-scatter starts.
struct FsdpTimes {
  double rs_last_end = 0, ag_first_start = 1e30, bwd_last_end = 0, rs_last_start = 1e30;
};
FsdpTimes fsdp_times(scenario::Symmetry sym, int rank) {
  auto sc = test::llama8b_tp8_job();
  sc.parallel.zero_stage = 3;
  sc.simulation.symmetry = sym;
  model::Topology topo(sc.platform, sc.perturb);
  auto cost = model::CostModel::roofline(sc.platform.gpu);
  schedule::Pricer pricer(*cost);
  schedule::TaskGraph g;
  schedule::build_scenario(sc, topo, pricer, g);
  g.finalize();
  const auto tr = engine::replay_analytic(g, topo);
  const int last = sc.model.layers - 1, mb = sc.training.micro_batches - 1;
  FsdpTimes t;
  for (schedule::OpId id = 0; id < g.size(); ++id) {
    const auto op = g.op(id);
    const std::string name = g.str(op.label.name);
    if (op.kind == schedule::OpKind::Compute && op.rank == rank && op.label.layer == last &&
        op.label.micro == mb && op.label.phase == schedule::Phase::Backward && op.stream == schedule::stream::kCompute)
      t.bwd_last_end = std::max(t.bwd_last_end, tr.end_s[id]);
    if (op.kind != schedule::OpKind::Transfer || (op.rank != rank && op.peer != rank)) continue;
    if (name == "dp_reducescatter_grads" && op.label.layer == last && op.label.micro == mb) {
      t.rs_last_end = std::max(t.rs_last_end, tr.end_s[id]);
      t.rs_last_start = std::min(t.rs_last_start, tr.start_s[id]);
    }
    if (name == "zero3_allgather_params" && op.label.layer == 0 && op.label.micro == mb &&
        op.label.phase == schedule::Phase::Backward)
      t.ag_first_start = std::min(t.ag_first_start, tr.start_s[id]);
  }
  return t;
}

TEST(Fsdp, EachBlocksReduceScatterRunsBetweenTheBackwardsGathers) {
  // FSDP2 issues a block's reduce-scatter in its post-backward hook, between the prefetched
  // gathers of the blocks below it, on one communicator that runs them in issue order: the
  // last layer's gradients are reduced while the backward still gathers, not after its end.
  for (auto sym : {scenario::Symmetry::Auto, scenario::Symmetry::Off}) {
    const FsdpTimes t = fsdp_times(sym, 0);
    ASSERT_GT(t.rs_last_end, 0);
    ASSERT_LT(t.ag_first_start, 1e30);
    EXPECT_LT(t.rs_last_end, t.ag_first_start) << static_cast<int>(sym);
  }
  // Every replica built (Off): a GPU of the last replica, built after the reduce-scatter was
  // queued, still reduces only once its own backward has made the gradients.
  const FsdpTimes last = fsdp_times(scenario::Symmetry::Off, 3 * 8);
  ASSERT_GT(last.bwd_last_end, 0);
  EXPECT_GE(last.rs_last_start, last.bwd_last_end);
  EXPECT_LT(last.rs_last_end, last.ag_first_start);
}

/// Transfers of the collectives named `name` whose label is layer `layer`.
size_t transfers(const Built& b, const std::string& name, int layer) {
  size_t n = 0;
  for (schedule::OpId id = 0; id < b.g.size(); ++id) {
    const auto& op = b.g.op(id);
    n += op.kind == schedule::OpKind::Transfer && op.label.layer == layer && b.g.str(op.label.name) == name;
  }
  return n;
}

TEST(Fsdp, EveryMicroBatchReduceScattersItsGradientsWithoutPipelining) {
  // torchtitan accumulates gradients with plain backwards, which FSDP2 reduce-scatters each
  // (set_requires_gradient_sync is never turned off); PyTorch's pipelining stages turn it off
  // for all but the last micro-batch.
  auto sc = test::llama8b_tp8_job();  // 2 micro-batches
  sc.parallel.zero_stage = 3;
  const Built two(sc);
  EXPECT_EQ(two.micros("dp_reducescatter_grads"), (std::set<int>{0, 1}));
  sc.training.micro_batches = 1;
  const Built one(sc);
  ASSERT_GT(transfers(one, "dp_reducescatter_grads", 3), 0u);
  EXPECT_EQ(transfers(two, "dp_reducescatter_grads", 3), 2 * transfers(one, "dp_reducescatter_grads", 3));
  // Under PP: the last micro-batch only, however many there are.
  sc.parallel.tp = 1;
  sc.parallel.pp = 2;
  sc.parallel.dp = 16;
  const Built pp_one(sc);
  sc.training.micro_batches = 4;
  const Built pp_four(sc);
  ASSERT_GT(transfers(pp_one, "dp_reducescatter_grads", 3), 0u);
  EXPECT_EQ(transfers(pp_four, "dp_reducescatter_grads", 3), transfers(pp_one, "dp_reducescatter_grads", 3));
}

TEST(Fsdp, EachMoeBlocksExpertReduceScatterRunsBetweenTheBackwardsGathers) {
  // FSDP2 shards a MoE block's experts over the expert data-parallel group (a fully_shard of
  // their own inside the block's): their reduce-scatter is issued by the block's backward on
  // the same communicator's queue, so the last layer's experts are reduced while the backward
  // still gathers the layers below, not after its end.
  auto sc = test::llama8b_tp8_job();  // tp 8, dp 4, 4 layers, 2 micro-batches
  sc.model.moe.experts = 8;
  sc.model.moe.top_k = 2;
  sc.model.moe.expert_ffn_hidden = 2048;
  sc.parallel.ep = 8;  // expert DP: 32 / 8 = 4 ranks
  sc.parallel.zero_stage = 3;
  const Built b(sc);
  const auto tr = engine::replay_analytic(b.g, b.topo);
  const int last = sc.model.layers - 1, mb = sc.training.micro_batches - 1;
  double rs_last_end = 0, ag_first_start = 1e30, rs_end = 0, opt_start = 1e30;
  for (schedule::OpId id = 0; id < b.g.size(); ++id) {
    const auto& op = b.g.op(id);
    const std::string name = b.g.str(op.label.name);
    if (name == "optimizer_step" && op.rank == 0) opt_start = std::min(opt_start, tr.start_s[id]);
    if (op.kind != schedule::OpKind::Transfer || (op.rank != 0 && op.peer != 0)) continue;
    if (name == "expert_dp_reducescatter_grads") rs_end = std::max(rs_end, tr.end_s[id]);
    if (name == "expert_dp_reducescatter_grads" && op.label.layer == last)
      rs_last_end = std::max(rs_last_end, tr.end_s[id]);
    if (name == "zero3_allgather_params" && op.label.layer == 0 && op.label.micro == mb &&
        op.label.phase == schedule::Phase::Backward)
      ag_first_start = std::min(ag_first_start, tr.start_s[id]);
  }
  ASSERT_GT(rs_last_end, 0);
  ASSERT_LT(ag_first_start, 1e30);
  EXPECT_LT(rs_last_end, ag_first_start);
  // The optimizer steps the experts' shard once their gradients are reduced.
  ASSERT_LT(opt_start, 1e30);
  EXPECT_GE(opt_start, rs_end);
  // The forward gathers the experts with the block: nothing gathers them after the step.
  EXPECT_TRUE(b.phases("expert_dp_allgather_params").empty());
  EXPECT_FALSE(b.phases("expert_dp_reducescatter_grads").empty());
}

/// The DP indices (rank / tp, order tp-cp-pp-dp with cp = pp = 1) the transfers of the
/// collectives named `name` join: {from, to} pairs.
std::set<std::pair<int, int>> dp_pairs(const Built& b, const std::string& name, int tp) {
  std::set<std::pair<int, int>> out;
  for (schedule::OpId id = 0; id < b.g.size(); ++id) {
    const auto& op = b.g.op(id);
    if (op.kind == schedule::OpKind::Transfer && op.peer != op.rank && b.g.str(op.label.name) == name)
      out.insert({op.rank / tp, op.peer / tp});
  }
  return out;
}

TEST(Fsdp, HsdpGathersInTheShardGroupAndAllReducesAcrossReplicas) {
  auto sc = test::llama8b_tp8_job();  // tp 8, dp 4: one DP index per node
  sc.parallel.zero_stage = 3;
  const Built fsdp(sc);
  sc.parallel.dp_replicate = 2;  // shard groups {0, 1} and {2, 3}
  const Built hsdp(sc);
  // FSDP gathers and reduce-scatters over all 4 DP indices; no cross-replica all-reduce.
  bool crosses = false;
  for (const auto& [a, b] : dp_pairs(fsdp, "zero3_allgather_params", 8)) crosses |= a / 2 != b / 2;
  EXPECT_TRUE(crosses);
  EXPECT_TRUE(dp_pairs(fsdp, "hsdp_allreduce_grads", 8).empty());
  // HSDP: gathers and reduce-scatters within a shard group.
  for (const char* name : {"zero3_allgather_params", "dp_reducescatter_grads"}) {
    const auto pairs = dp_pairs(hsdp, name, 8);
    EXPECT_FALSE(pairs.empty()) << name;
    for (const auto& [a, b] : pairs) EXPECT_EQ(a / 2, b / 2) << name << " " << a << "->" << b;
  }
  // The shard all-reduce joins the same shard index of the two replicas: 0 <-> 2, 1 <-> 3.
  const auto ar = dp_pairs(hsdp, "hsdp_allreduce_grads", 8);
  EXPECT_EQ(ar, (std::set<std::pair<int, int>>{{0, 2}, {2, 0}, {1, 3}, {3, 1}}));
  // A block's shard all-reduce moves the reduce-scatter's output, B / 2 per rank: over 2
  // ranks a ring reduce-scatter of B sends B / 2 per rank, a ring all-reduce of B / 2 the
  // same (2 (n - 1) / n x B / 2); an all-reduce of the whole block would send twice that.
  double rs = 0, all = 0;
  for (schedule::OpId id = 0; id < hsdp.g.size(); ++id) {
    const auto& op = hsdp.g.op(id);
    if (op.kind != schedule::OpKind::Transfer || op.label.layer != 3) continue;
    if (hsdp.g.str(op.label.name) == "dp_reducescatter_grads") rs += op.bytes;
    if (hsdp.g.str(op.label.name) == "hsdp_allreduce_grads") all += op.bytes;
  }
  EXPECT_GT(all, 0);
  EXPECT_NEAR(all, rs, 1e-9 * rs);
  // The replicate group is its own communicator: its all-reduces queue on their own streams.
  for (schedule::OpId id = 0; id < hsdp.g.size(); ++id) {
    const auto& op = hsdp.g.op(id);
    if (op.kind == schedule::OpKind::Transfer && hsdp.g.str(op.label.name) == "hsdp_allreduce_grads") {
      EXPECT_TRUE(op.stream == schedule::stream::kDpReplicateSend || op.stream == schedule::stream::kDpReplicateRecv);
    }
  }
}

TEST(Fsdp, ParametersStayShardedAfterTheOptimizerStep) {
  auto sc = test::llama8b_tp8_job();
  sc.parallel.zero_stage = 3;
  const Built fsdp(sc);
  // The optimizer steps the sharded parameters; the next step's forward gathers them block by
  // block. Nothing gathers the updated weights after the step, as the distributed optimizer's
  // whole bf16 copy needs (zero_stage 1: MegatronDp.WithoutOverlapOneBucketAfterTheBackward).
  EXPECT_TRUE(fsdp.phases("dp_allgather_params").empty());
  EXPECT_TRUE(fsdp.phases("zero3_allgather_params").count(schedule::Phase::Forward));
  sc.parallel.dp_replicate = 2;  // HSDP neither
  EXPECT_TRUE(Built(sc).phases("dp_allgather_params").empty());
}

TEST(ActivationOffload, CopiesEachOffloadedLayerOutAndBackOnTheCopyStream) {
  auto sc = test::llama8b_tp8_job();
  sc.training.recompute = scenario::Recompute::None;
  const Built plain(sc);
  sc.training.offload_layers = 2;
  const Built off(sc);
  // Layers 0 and 1, every micro-batch, out in the forward and back in the backward.
  EXPECT_EQ(off.layers("offload_activations_d2h"), (std::set<int>{0, 1}));
  EXPECT_EQ(off.layers("offload_activations_h2d"), (std::set<int>{0, 1}));
  EXPECT_EQ(off.micros("offload_activations_d2h"), (std::set<int>{0, 1}));
  EXPECT_EQ(plain.layers("offload_activations_d2h"), std::set<int>{});
  for (schedule::OpId id = 0; id < off.g.size(); ++id)
    if (off.g.str(off.g.op(id).label.name).rfind("offload_", 0) == 0) {
      EXPECT_EQ(off.g.op(id).stream, schedule::stream::kOffload);
    }
  // The copies overlap the compute; they can only lengthen the step.
  EXPECT_GE(off.step_s, plain.step_s);
}

TEST(PartialRecompute, BlockRecomputesOnlyItsLayers) {
  auto sc = test::llama8b_tp8_job();
  sc.training.recompute = scenario::Recompute::Full;
  const Built all(sc);
  sc.training.recompute_method = scenario::TrainingSpec::RecomputeMethod::Block;
  sc.training.recompute_layers = 1;
  const Built one(sc);
  std::set<int> recomputed;
  for (schedule::OpId id = 0; id < one.g.size(); ++id) {
    const std::string n = one.g.str(one.g.op(id).label.name);
    if (n.size() > 10 && n.compare(n.size() - 10, 10, "_recompute") == 0) recomputed.insert(one.g.op(id).label.layer);
  }
  EXPECT_EQ(recomputed, std::set<int>{0});
  EXPECT_LT(one.step_s, all.step_s);
}

}  // namespace CPSIM_TEST_TU
