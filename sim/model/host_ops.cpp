// The host ops of a layer pass under each stack (host_ops.hpp). Kernel lists from
// stack_kernels.cpp (shared/data/stacks.md sections 1-3, 7); what the host does per kernel from
// the frameworks' source, cited where each kind is priced.
#include "model/host_ops.hpp"

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

double host_seconds(const HostLoad& load, const scenario::RuntimeSpec& rt) {
  return rt.graphs ? 0.0 : load.units * rt.host_op_s;
}

double graph_launch_seconds(const scenario::RuntimeSpec& rt) { return rt.graphs ? rt.kernel_launch_s : 0.0; }

}  // namespace cpsim::model
