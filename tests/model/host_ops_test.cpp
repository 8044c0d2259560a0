// The host ops of a layer pass under each stack (sim/model/host_ops): counted from the stack's
// kernel lists, GEMM modules and attention call, each kind priced in eager-op units.
#include "model/host_ops.hpp"

#include <gtest/gtest.h>

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using model::HostOpKind;
using scenario::Stack;

namespace {
model::LayerWidths gqa() {
  model::LayerWidths w;
  w.tokens = w.hidden = w.ffn = 1;
  w.q = 32 * 128;  // Llama-3 8B: 32 query heads, 8 KV heads
  w.kv = 8 * 128;
  return w;
}
scenario::RuntimeSpec runtime(bool graphs = false) {
  scenario::RuntimeSpec rt;
  rt.kernel_launch_s = 3e-6;
  rt.host_op_s = 10.3e-6;
  rt.graphs = graphs;
  return rt;
}
}  // namespace

// torchtitan eager, one block forward (shared/data/stacks.md 2a): norm, wqkv, three split
// copies, RoPE as cast / complex mul / cast for q and k, SDPA, wo, add, norm, w1, silu, w3, mul,
// w2, add: 21 eager ops, 11 before the attention call and 9 after.
TEST(HostOps, EagerBlockForwardIsTwentyOneOps) {
  const auto l = model::layer_host_ops(Stack::TorchEager, false, gqa());
  EXPECT_EQ(l.before.ops, 11);
  EXPECT_EQ(l.attention.ops, 1);
  EXPECT_EQ(l.after.ops, 9);
  EXPECT_EQ(l.total().ops, 21);
  EXPECT_DOUBLE_EQ(l.total().units, 21.0);  // every one an eager op
  // At the measured 10.3 us per op: 216 us of host time per block forward.
  EXPECT_NEAR(model::host_seconds(l.total(), runtime()), 216.3e-6, 1e-9);
  // Backward issues more: two mm per GEMM, silu/mul backward, the residual gradient adds.
  EXPECT_GT(model::layer_host_ops(Stack::TorchEager, true, gqa()).total().ops, 21);
}

// torch.compile issues the block as one graph call and its kernels from Inductor's wrapper:
// fewer ops (fused kernels) and each cheaper than an eager op; Megatron-TE issues few module
// calls, each dearer than an eager op, and lands between the two.
TEST(HostOps, CompileIssuesFewerCheaperOpsThanEagerAndTeLandsBetween) {
  for (const bool bwd : {false, true}) {
    const auto eager = model::layer_host_ops(Stack::TorchEager, bwd, gqa()).total();
    const auto compiled = model::layer_host_ops(Stack::TorchCompile, bwd, gqa()).total();
    const auto te = model::layer_host_ops(Stack::MegatronTe, bwd, gqa()).total();
    EXPECT_LT(compiled.ops, eager.ops) << bwd;
    EXPECT_LT(compiled.units, 0.5 * eager.units) << bwd;
    EXPECT_LT(te.ops, eager.ops) << bwd;
    EXPECT_GT(te.units / te.ops, 1.0) << bwd;  // a TE module call costs more than one eager op
  }
  EXPECT_LT(model::host_op_units(HostOpKind::InductorKernel), model::host_op_units(HostOpKind::EagerOp));
  EXPECT_GT(model::host_op_units(HostOpKind::TeLnLinearFwd), model::host_op_units(HostOpKind::TeLinearFwd));
}

// CUDA graphs (runtime graphs: true, torch.compile mode="reduce-overhead"): no per-op host
// time; one graph launch per layer pass.
TEST(HostOps, CudaGraphsLeaveOneLaunchPerPass) {
  const auto l = model::layer_host_ops(Stack::TorchEager, false, gqa());
  EXPECT_EQ(model::host_seconds(l.total(), runtime(true)), 0.0);
  EXPECT_DOUBLE_EQ(model::graph_launch_seconds(runtime(true)), 3e-6);
  EXPECT_EQ(model::graph_launch_seconds(runtime(false)), 0.0);
}

// A PyTorch CP ring step issues its SDPA op and _SDPAMerger's 8 eager ops; Megatron-TE's ring
// loop 8 eager ops (ring-flash-attention's step).
TEST(HostOps, RingStepsCarryTheirMergeOps) {
  EXPECT_EQ(model::ring_step_host(Stack::TorchEager, false).ops, 9);
  EXPECT_EQ(model::ring_step_host(Stack::TorchCompile, false).ops, 9);
  EXPECT_EQ(model::ring_step_host(Stack::MegatronTe, false).ops, 8);
}

// The regions outside the softmax layers issue host ops too: the embedding and the LM head with
// its loss, a Gated DeltaNet layer (FLA's chunk kernels launched from Python), a MoE layer's
// router, permutes and experts beyond the dense MLP, and the optimizer step.
TEST(HostOps, RegionsOutsideAttentionLayersIssueOps) {
  for (const Stack s : {Stack::TorchEager, Stack::TorchCompile, Stack::MegatronTe}) {
    EXPECT_GT(model::embedding_host_ops(s, 1).ops, 0);
    for (const bool bwd : {false, true}) {
      EXPECT_GT(model::lm_head_host_ops(s, bwd, 1, 1).ops, 0);
      // Two loss chunks issue the ops twice.
      EXPECT_EQ(model::lm_head_host_ops(s, bwd, 2, 1).ops, 2 * model::lm_head_host_ops(s, bwd, 1, 1).ops);
      const auto gdn = model::gdn_layer_host_ops(s, bwd, gqa());
      // FLA's chunk call: its autograd Function and 8 (forward) / 9 (backward) Triton kernels.
      EXPECT_EQ(gdn.attention.ops, bwd ? 10 : 9);
      EXPECT_GT(gdn.total().ops, gdn.attention.ops);
      EXPECT_GT(model::moe_host_ops(s, bwd, 8, true).ops, 0);
      // One GEMM call per expert costs more host time than a grouped call as experts grow.
      EXPECT_GT(model::moe_host_ops(s, bwd, 64, false).units, model::moe_host_ops(s, bwd, 64, true).units);
    }
  }
  // Megatron's vocab-parallel embedding masks the ids first.
  EXPECT_EQ(model::embedding_host_ops(Stack::MegatronTe, 2).ops, 7);
  // TE GroupedLinear's C++ loop: one cuBLAS launch per further expert and GEMM (fc1, fc2).
  EXPECT_EQ(model::moe_host_ops(Stack::MegatronTe, false, 9, true).ops - model::moe_host_ops(Stack::MegatronTe, false, 1, true).ops, 16);
}

// multi_tensor_apply launches a kernel per 320 chunks of 65536 values or per 36 tensors (ATen,
// depth 4) / 30 (TE FusedAdam with master weights, depth 5), whichever fills first.
TEST(HostOps, OptimizerLaunchesFollowMultiTensorApplyChunks) {
  const auto small = model::optimizer_host_ops(Stack::TorchEager, 72, 1e6);  // tensor-limited: 2 launches
  const auto big = model::optimizer_host_ops(Stack::TorchEager, 72, 65536.0 * 320 * 10);  // 10 launches
  // 8 Python-issued ops (step count add, fused AdamW, the clip's 6) and the clip's foreach launches.
  EXPECT_EQ(small.ops, 2 + 8 + 3);
  EXPECT_EQ(big.ops - small.ops, 8);
  const auto te = model::optimizer_host_ops(Stack::MegatronTe, 60, 1e6);  // 2 launches of FusedAdam
  EXPECT_EQ(te.ops, 2 + 5 + 3 * 2);
  EXPECT_EQ(model::layer_param_tensors(Stack::TorchEager, true, 0), 9);
  EXPECT_EQ(model::layer_param_tensors(Stack::MegatronTe, true, 0), 6);
  EXPECT_EQ(model::layer_param_tensors(Stack::MegatronTe, true, 8), 6 + 1 + 16);
}

}  // namespace CPSIM_TEST_TU
