// The host ops of a layer pass under each stack (host_ops.hpp). Kernel lists from
// stack_kernels.cpp (shared/data/stacks.md sections 1-3, 7); what the host does per kernel from
// the frameworks' source, cited where each kind is priced.
#include "model/host_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cpsim::model {
namespace {

using scenario::Stack;

// The eager op every ratio below is taken against, measured on the same host as the figure it
// divides: torch.nn.Linear forward (one aten::linear -> mm through the dispatcher and autograd,
// and its launch), 37.08 us of CPU time on a GB200 (Grace) host, BF16, h 2048, 8192 tokens
// (NVIDIA/TransformerEngine issue 2053, "High CPU overhead on Grace systems", table 1).
constexpr double kGb200EagerOp_us = 37.08;

}  // namespace

const char* host_op_kind_name(HostOpKind k) {
  switch (k) {
    case HostOpKind::EagerOp: return "eager op";
    case HostOpKind::InductorKernel: return "Inductor kernel launch";
    case HostOpKind::TritonLaunch: return "Triton kernel launch";
    case HostOpKind::CudaLaunch: return "CUDA kernel launch";
    case HostOpKind::CompiledCall: return "compiled graph call";
    case HostOpKind::TeLinearFwd: return "TE Linear forward";
    case HostOpKind::TeLinearBwd: return "TE Linear backward";
    case HostOpKind::TeLnLinearFwd: return "TE LayerNormLinear forward";
    case HostOpKind::TeLnLinearBwd: return "TE LayerNormLinear backward";
  }
  return "?";
}

double host_op_units(HostOpKind k) {
  switch (k) {
    // The unit: the platform's host_op (kRuntimeDefaults: 10.3 us measured on an H200 host by
    // tools/bench_block.py, kernels/profiles/h200-block-measured.csv row tiny-op).
    case HostOpKind::EagerOp: return 1.0;
    // Inductor's wrapper launches each kernel through CachingAutotuner.run: 9.1 us per kernel of
    // 19 arguments on a GB200 (6.8 us with none; 3.0 us of it cuLaunchKernel), no dispatcher and
    // no autograd per kernel (meta-pytorch/tritonbench PR 1017, nop_inductor_per_kernel). A
    // fused pointwise or reduction kernel takes 5-20 pointers and sizes: the 19-argument figure.
    // Extern GEMMs (extern_kernels.mm from the wrapper, autograd handled per graph) are charged
    // the same.
    case HostOpKind::InductorKernel: return 9.1 / kGb200EagerOp_us;
    // A Triton kernel launched from a library's Python (JITFunction.run: binding the arguments,
    // the specialization key, the compiled kernel's launcher): no public per-call figure apart
    // from Inductor's; charged as Inductor's launch of the same launcher (an assumption, said in
    // docs/cost-model.md).
    case HostOpKind::TritonLaunch: return 9.1 / kGb200EagerOp_us;
    // cuLaunchKernel alone, 3.0 us of the same GB200 per-kernel figure: what a C++ loop issuing
    // kernels (multi_tensor_apply, TE's grouped GEMM over experts) pays per kernel.
    case HostOpKind::CudaLaunch: return 3.0 / kGb200EagerOp_us;
    // Entering a compiled graph: Dynamo's guards, the AOTAutograd runtime wrapper, DeviceGuard
    // and CompiledFxGraph: the e2e call of a one-kernel compiled function, 44.3 us, less its
    // one kernel's 6.8 us (same PR, nop_inductor_kernel, GB200).
    case HostOpKind::CompiledCall: return (44.3 - 6.8) / kGb200EagerOp_us;
    // TransformerEngine modules, BF16, CPU time per call on a GB200 (NVIDIA/TransformerEngine
    // PR 3523, table "before" column, the released code): Linear 59.19 us forward, 311.30 us
    // forward + backward; LayerNormLinear 83.48 / 397.73 us.
    case HostOpKind::TeLinearFwd: return 59.19 / kGb200EagerOp_us;
    case HostOpKind::TeLinearBwd: return (311.30 - 59.19) / kGb200EagerOp_us;
    case HostOpKind::TeLnLinearFwd: return 83.48 / kGb200EagerOp_us;
    case HostOpKind::TeLnLinearBwd: return (397.73 - 83.48) / kGb200EagerOp_us;
  }
  return 1.0;
}

void HostLoad::add(HostOpKind kind, int n) {
  ops += n;
  units += n * host_op_units(kind);
}

namespace {

// ATen ops one timed op of an eager class issues (stack_kernels.hpp counts the timed op once).
int aten_ops(MemClass c) {
  switch (c) {
    case MemClass::EagerSwiglu: return 2;     // silu, mul
    case MemClass::EagerSwigluBwd: return 3;  // mul backward (two muls), silu_backward
    case MemClass::EagerRope: return 3;       // per tensor: .float(), complex mul, type_as
    case MemClass::EagerLseMerge: return 8;   // _SDPAMerger.step: sub, sigmoid, sub, mul, sub; sub, logsigmoid, sub
    case MemClass::EagerCrossEntropy: return 3;  // per direction: cast, log_softmax, nll_loss (or their backward)
    default: return 1;
  }
}

bool named(const MemKernel& k, const char* name) { return std::strcmp(k.name, name) == 0; }

void add_kernel(HostLoad& h, Stack s, const MemKernel& k) {
  switch (s) {
    case Stack::TorchEager:
      h.add(HostOpKind::EagerOp, k.launches * aten_ops(k.cls));
      return;
    case Stack::TorchCompile:
      h.add(HostOpKind::InductorKernel, k.launches);
      return;
    case Stack::MegatronTe:
      // TE's rmsnorm runs inside the LayerNormLinear module (its host cost is the module's);
      // bias-dropout-add and SwiGLU are torch.compile'd functions (megatron/core/jit.py
      // jit_fuser), one compiled call each with its kernel; the rest (the GQA query copy, TE's
      // fused RoPE per tensor, the dq/dk/dv cat, autograd's residual adds) are eager calls.
      if (named(k, "rmsnorm") || named(k, "rmsnorm_bwd")) return;
      if (named(k, "bias_dropout_add") || named(k, "swiglu") || named(k, "swiglu_bwd")) {
        h.add(HostOpKind::CompiledCall);
        h.add(HostOpKind::InductorKernel, k.launches);
        return;
      }
      h.add(HostOpKind::EagerOp, k.launches);
      return;
  }
}

void add_region(HostLoad& h, Stack s, LayerRegion r, bool backward, const LayerWidths& w) {
  for (const MemKernel& k : layer_kernels(s, r, backward, w)) add_kernel(h, s, k);
  // Megatron's bias-dropout-add has no backward kernel in the list (its gradient passes
  // through), but autograd still enters the compiled function's backward.
  if (s == Stack::MegatronTe && backward && (r == LayerRegion::ResidualAttn || r == LayerRegion::ResidualMlp))
    h.add(HostOpKind::CompiledCall);
}

// A GEMM op: a TE module under Megatron-TE (the module covers its dgrad and wgrad backward), an
// eager mm (backward: dgrad and wgrad, two mm) or an extern mm from Inductor's wrapper.
void add_gemm(HostLoad& h, Stack s, bool backward, bool layernorm_linear) {
  switch (s) {
    case Stack::MegatronTe:
      if (layernorm_linear) h.add(backward ? HostOpKind::TeLnLinearBwd : HostOpKind::TeLnLinearFwd);
      else h.add(backward ? HostOpKind::TeLinearBwd : HostOpKind::TeLinearFwd);
      return;
    case Stack::TorchEager: h.add(HostOpKind::EagerOp, backward ? 2 : 1); return;
    case Stack::TorchCompile: h.add(HostOpKind::InductorKernel, backward ? 2 : 1); return;
  }
}

HostLoad attention_call(Stack s, bool backward) {
  HostLoad h;
  switch (s) {
    // TE DotProductAttention: no public per-call CPU figure; priced as a TE Linear module (a
    // module call of the same machinery: backend selection, FP8 meta checks, an autograd
    // Function around one kernel). An assumption, said in docs/cost-model.md.
    case Stack::MegatronTe: h.add(backward ? HostOpKind::TeLinearBwd : HostOpKind::TeLinearFwd); break;
    case Stack::TorchEager: h.add(HostOpKind::EagerOp); break;          // F.scaled_dot_product_attention
    case Stack::TorchCompile: h.add(HostOpKind::InductorKernel); break;  // inside the block's graph
  }
  return h;
}

}  // namespace

LayerHostOps layer_host_ops(Stack s, bool backward, const LayerWidths& w) {
  LayerHostOps l;
  // torchtitan's FeedForward runs w1 and w3 as two GEMMs; Megatron's fc1 is one (gate and up
  // fused, a LayerNormLinear with the pre-MLP norm), fc2 a Linear.
  const int mlp_gemms = s == Stack::MegatronTe ? 2 : 3;
  if (!backward) {
    if (s == Stack::TorchCompile) l.before.add(HostOpKind::CompiledCall);  // the block's forward graph
    add_region(l.before, s, LayerRegion::NormAttn, false, w);
    add_gemm(l.before, s, false, true);  // QKV
    add_region(l.before, s, LayerRegion::Rope, false, w);
    add_gemm(l.after, s, false, false);  // output projection
    add_region(l.after, s, LayerRegion::ResidualAttn, false, w);
    add_region(l.after, s, LayerRegion::NormMlp, false, w);
    for (int i = 0; i < mlp_gemms; ++i) add_gemm(l.after, s, false, i == 0);
    add_region(l.after, s, LayerRegion::Activation, false, w);
    add_region(l.after, s, LayerRegion::ResidualMlp, false, w);
  } else {
    if (s == Stack::TorchCompile) l.before.add(HostOpKind::CompiledCall);  // the block's backward graph
    add_region(l.before, s, LayerRegion::ResidualMlp, true, w);
    for (int i = mlp_gemms - 1; i >= 0; --i) add_gemm(l.before, s, true, i == 0);
    add_region(l.before, s, LayerRegion::Activation, true, w);
    add_region(l.before, s, LayerRegion::NormMlp, true, w);
    add_region(l.before, s, LayerRegion::ResidualAttn, true, w);
    add_gemm(l.before, s, true, false);
    add_region(l.after, s, LayerRegion::Rope, true, w);
    add_gemm(l.after, s, true, true);
    add_region(l.after, s, LayerRegion::NormAttn, true, w);
  }
  l.attention = attention_call(s, backward);
  return l;
}

HostLoad ring_step_host(Stack s, bool backward) {
  HostLoad h;
  if (s == Stack::MegatronTe) {
    // TE's ring loop (AttnFuncWithCPAndKVP2P) issues per step the attention call and its
    // out/LSE correction as eager ops: ring-flash-attention's step, flash_attn_forward plus the
    // update's exp, sigmoid, sub, mul, add and two casts (8 ops); backward the same count.
    h.add(HostOpKind::EagerOp, 8);
    return h;
  }
  // PyTorch CP (_templated_ring_attention): the SDPA op, then _SDPAMerger.step's eager ops
  // (cp_merge_kernels); backward: the SDPA backward op and the dK, dV accumulation. The merge
  // stays eager under torch.compile (the CP dispatch runs outside the block's graph).
  h.add(HostOpKind::EagerOp);
  if (!backward) {
    for (const MemKernel& k : cp_merge_kernels(s, 1, 1, 1)) h.add(HostOpKind::EagerOp, k.launches * aten_ops(k.cls));
  } else {
    h.add(HostOpKind::EagerOp);
  }
  return h;
}

HostLoad embedding_host_ops(Stack s, int tp) {
  HostLoad h;
  // nn.Embedding (torchtitan: outside the compiled blocks, eager under torch.compile too) is one
  // aten::embedding; Megatron's VocabParallelEmbedding with TP masks the ids outside its shard
  // first (lt, ge, logical_or, sub, masked_fill), then embedding and masked_fill of the output
  // (megatron/core/tensor_parallel/layers.py, VocabParallelEmbedding.forward): 7 eager ops.
  h.add(HostOpKind::EagerOp, s == Stack::MegatronTe && tp > 1 ? 7 : 1);
  return h;
}

HostLoad lm_head_host_ops(Stack s, bool backward, int chunks, int tp) {
  HostLoad h;
  for (int c = 0; c < chunks; ++c) {
    // The output layer: Megatron's ColumnParallelLinear (not a TE module: an autograd Function
    // around torch.matmul, backward dgrad and wgrad into main_grad) and torchtitan's nn.Linear
    // outside the compiled blocks are eager GEMM ops under every stack.
    h.add(HostOpKind::EagerOp, backward ? 2 : 1);
    if (s == Stack::MegatronTe && tp > 1) {
      // vocab_parallel_cross_entropy (megatron/core/tensor_parallel/cross_entropy.py): forward
      // max, sub, the target mask (lt, ge, logical_or, sub, masked_fill), arange, the gather,
      // masked_fill, exp, sum, log, sub, mean (14 eager ops besides its all-reduces); backward
      // softmax's one_hot correction: sub, mul, index_put, mul (4). Unsharded logits take the
      // stack's own cross-entropy kernels below.
      h.add(HostOpKind::EagerOp, backward ? 4 : 14);
      continue;
    }
    for (const MemKernel& k : loss_kernels(s, backward, 1, 1)) {
      if (s == Stack::TorchCompile) {  // torchtitan compiles the loss as its own graph
        h.add(HostOpKind::CompiledCall);
        h.add(HostOpKind::InductorKernel, k.launches);
      } else {
        h.add(HostOpKind::EagerOp, k.launches * aten_ops(k.cls));
      }
    }
  }
  return h;
}

LayerHostOps gdn_layer_host_ops(Stack s, bool backward, const LayerWidths& w) {
  // The layer around the mixer is a dense layer's: norms, residuals and the MLP (layer_host_ops
  // with its QKV / output GEMMs as the input / output projections); RoPE and the attention call
  // are replaced by the gated-delta ops below.
  LayerHostOps l = layer_host_ops(s, backward, w);
  HostLoad rope;
  add_region(rope, s, LayerRegion::Rope, backward, w);
  (backward ? l.after : l.before).ops -= rope.ops;
  (backward ? l.after : l.before).units -= rope.units;
  l.attention = HostLoad{};
  // The mixer's own ops (Qwen3-Next's / Megatron-Core's GatedDeltaNet forward): the second input
  // projection (b, a), the causal_conv1d kernel, beta = b.sigmoid(), g = -A_log.exp() *
  // softplus(a + dt_bias) (exp, neg, add, softplus, mul), the split / reshape copies of q, k, v
  // (3) and the gated RMSNorm (FLA FusedRMSNormGated, one Triton kernel); backward the same ops'
  // gradients.
  const HostOpKind triton = s == Stack::TorchCompile ? HostOpKind::InductorKernel : HostOpKind::TritonLaunch;
  HostLoad mixer;
  add_gemm(mixer, s, backward, false);
  mixer.add(triton, 2);  // causal_conv1d, gated norm
  mixer.add(s == Stack::TorchCompile ? HostOpKind::InductorKernel : HostOpKind::EagerOp, 9);
  (backward ? l.after : l.before) += mixer;
  // FLA's chunk_gated_delta_rule (fla/ops/gated_delta_rule/chunk.py): its autograd Function and
  // Triton kernels, forward l2norm of q and k, chunk_local_cumsum, chunk_scaled_dot_kkt_fwd,
  // solve_tril, recompute_w_u_fwd, chunk_gated_delta_rule_fwd_h, chunk_fwd_o (8); backward
  // recompute_w_u_fwd and fwd_h again, chunk_bwd_dv_local, chunk_gated_delta_rule_bwd_dhu,
  // chunk_bwd_dqkwg, prepare_wy_repr_bwd, the reverse cumsum of dg and the two l2norm backwards
  // (9). A custom op outside Inductor's graph: its own launches under torch.compile too.
  l.attention.add(HostOpKind::EagerOp);
  l.attention.add(HostOpKind::TritonLaunch, backward ? 9 : 8);
  return l;
}

HostLoad moe_host_ops(Stack s, bool backward, int local_experts, bool grouped) {
  HostLoad h;
  const int e = local_experts < 1 ? 1 : local_experts;
  // Router: its GEMM, then softmax and top-k over the logits and the probabilities' gather /
  // normalisation (megatron/core/transformer/moe/router.py TopKRouter.routing: softmax, topk,
  // scatter into the routing map, and its aux-loss ops: sum, mul, mean, 7 eager ops; torchtitan
  // TokenChoiceTopKRouter: sigmoid / softmax, topk, gather, div, histc: 5).
  h.add(HostOpKind::EagerOp, backward ? 2 : 1);
  const HostOpKind elt = s == Stack::TorchCompile ? HostOpKind::InductorKernel : HostOpKind::EagerOp;
  h.add(elt, s == Stack::MegatronTe ? 7 : 5);
  // Permute and unpermute: Megatron's moe_permute / moe_unpermute (TE fused permute, one op
  // each, plus the routing map's sum and the tokens_per_expert copy to the host, 2); torchtitan's
  // argsort, index, the histogram's cumsum, index_add back (generate_permute_indices: 6).
  h.add(elt, s == Stack::MegatronTe ? 4 : 6);
  // The expert GEMMs beyond the dense MLP's (its fc1/fc2 or w1/w2/w3 calls and activation,
  // counted by layer_host_ops): grouped, TE GroupedLinear issues one cuBLAS GEMM per expert from
  // its C++ loop (general_grouped_gemm) inside one module call per projection, and
  // torch._grouped_mm is one kernel; one by one (Megatron SequentialMLP, torchtitan without
  // grouped mm), every further expert repeats the dense MLP's GEMM calls and activation ops.
  const int gemms = s == Stack::MegatronTe ? 2 : 3;
  if (grouped) {
    if (s == Stack::MegatronTe) h.add(HostOpKind::CudaLaunch, gemms * (backward ? 2 : 1) * (e - 1));
  } else {
    LayerWidths w;  // (only which kernels appear matters)
    w.tokens = w.hidden = w.ffn = w.q = w.kv = 1;
    for (int x = 1; x < e; ++x) {
      for (int g = 0; g < gemms; ++g) add_gemm(h, s, backward, false);
      add_region(h, s, LayerRegion::Activation, backward, w);
    }
  }
  return h;
}

int layer_param_tensors(Stack s, bool full_attention, int local_experts) {
  // Llama block, no biases: torchtitan's attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3
  // (9); Megatron-TE's linear_qkv (weight and its fused layer_norm_weight), linear_proj,
  // linear_fc1 (weight, layer_norm_weight), linear_fc2 (6). Gated DeltaNet instead of the
  // attention: in_proj (qkvz, ba), conv1d, A_log, dt_bias, the gated norm, out_proj and the
  // pre-mixer norm (8) against the attention's 5 (torchtitan) / 3 (TE).
  int n = s == Stack::MegatronTe ? 6 : 9;
  if (!full_attention) n += s == Stack::MegatronTe ? 5 : 3;
  // Routed experts: the router weight and one weight per expert and projection (TE
  // GroupedLinear's weight0..weightN-1; torchtitan's GroupedExperts one 3-D tensor each).
  if (local_experts > 0) n += 1 + (s == Stack::MegatronTe ? 2 * local_experts : 3);
  return n;
}

HostLoad optimizer_host_ops(Stack s, double tensors, double elements) {
  HostLoad h;
  // multi_tensor_apply (ATen's MultiTensorApply.cuh, kChunkSize 65536, and TE's, whose Python
  // applier passes chunk_size 2048 * 32, transformer_engine/pytorch/optimizers/
  // multi_tensor_apply.py): a kernel per 320 chunks or per depth_to_max_tensors tensors of the
  // 4 KB kernel-argument tables {110, 64, 48, 36, 30} (depth 4, AdamW's p, g, m, v: 36; TE
  // FusedAdam with fp32 master weights, depth 5: 30), whichever fills first. Without a profile
  // of the optimizer's host time this is a lower bound on the launches (a launch also ends at a
  // tensor boundary when blocks fill mid-tensor).
  const double per_launch = s == Stack::MegatronTe ? 30 : 36;
  const double launches = std::max(std::ceil(tensors / per_launch), std::ceil(elements / (65536.0 * 320.0)));
  h.add(HostOpKind::CudaLaunch, static_cast<int>(launches));
  if (s == Stack::MegatronTe) {
    // Megatron's DistributedOptimizer.step: the gradients' unscale / inf check, the clip's
    // multi_tensor_l2norm and multi_tensor_scale (one applier call each, their chunks launched as
    // above) and TE FusedAdam.step's applier call, plus copying the updated fp32 shards into the
    // bf16 params (_copy_main_params_to_model_params, one multi_tensor_scale): 5 Python-issued
    // calls with their launches.
    h.add(HostOpKind::EagerOp, 5);
    h.add(HostOpKind::CudaLaunch, static_cast<int>(3 * launches));
  } else {
    // torch.optim.AdamW(fused=True) (torch/optim/adamw.py -> adam.py _fused_adam): per device
    // and dtype group _foreach_add_ on the step counts, then torch._fused_adamw_; torchtitan's
    // clip_grad_norm_ (_foreach_norm, stack, norm, div, clamp, _foreach_mul_): 8 ops, the
    // foreach ones launching per 110 tensors (depth 1).
    h.add(HostOpKind::EagerOp, 8);
    h.add(HostOpKind::CudaLaunch, static_cast<int>(3 * std::ceil(tensors / 110)));
  }
  return h;
}

double host_seconds(const HostLoad& load, const scenario::RuntimeSpec& rt) {
  return rt.graphs ? 0.0 : load.units * rt.host_op_s;
}

double graph_launch_seconds(const scenario::RuntimeSpec& rt) { return rt.graphs ? rt.kernel_launch_s : 0.0; }

}  // namespace cpsim::model
