#pragma once
/// The host side of a layer: how many framework ops the host thread issues for one layer pass
/// under each stack (scenario::Stack), of which kind, and what each costs. The host thread runs
/// ahead of the GPU; a schedule places these costs on the rank's host lane (stream::kHost) and
/// makes the kernels wait for their issue, so the engine decides how much of it is exposed.
///
/// Costs are in units of one eager PyTorch op (dispatch, autograd record and its
/// cudaLaunchKernel), whose seconds the platform's `runtime: host_op` gives (measured: 10.3 us on
/// an H200 host). The other kinds are public figures taken on one host as ratios to an eager op
/// measured on that same host, so a slower or faster host scales them all (host_ops.cpp).
#include "model/stack_kernels.hpp"
#include "scenario/specs.hpp"

namespace cpsim::model {

/// What the host does for one framework call.
enum class HostOpKind : uint8_t {
  EagerOp,          ///< one eager ATen op through the dispatcher (and autograd), with its launch
  InductorKernel,   ///< one kernel launched from Inductor's generated wrapper (Triton or extern mm)
  TritonLaunch,     ///< one Triton kernel launched from a library's Python (FLA's chunk kernels)
  CudaLaunch,       ///< one cudaLaunchKernel from a C++ loop (multi_tensor_apply's chunks)
  CompiledCall,     ///< entering one compiled graph (guards, AOTAutograd wrapper, CompiledFxGraph)
  TeLinearFwd,      ///< one TransformerEngine Linear module forward (BF16)
  TeLinearBwd,      ///< its backward
  TeLnLinearFwd,    ///< one TE LayerNormLinear module forward (BF16, the norm fused in)
  TeLnLinearBwd,    ///< its backward
};
const char* host_op_kind_name(HostOpKind k);

/// Host cost of one op of `kind`, in eager-op units.
double host_op_units(HostOpKind kind);

/// A count of host ops and their cost in eager-op units.
struct HostLoad {
  int ops = 0;
  double units = 0;
  void add(HostOpKind kind, int n = 1);
  HostLoad& operator+=(const HostLoad& o) {
    ops += o.ops;
    units += o.units;
    return *this;
  }
};

/// One layer pass's host ops around its attention call, in issue order: the ops issued before
/// the attention (forward: norm, QKV GEMM, split, RoPE; backward: the MLP half and the output
/// projection), the attention call itself (no CP: the kernel call; a ring step's merge ops are
/// ring_step_host's), and the ops after it. Counted from stack_kernels' kernel lists (each
/// kernel's framework ops), the stack's GEMM modules and its attention call.
struct LayerHostOps {
  HostLoad before, attention, after;
  HostLoad total() const {
    HostLoad t = before;
    t += attention;
    t += after;
    return t;
  }
};
/// `w`: the rank's widths (only which kernels appear matters: q > kv adds the GQA split copy).
LayerHostOps layer_host_ops(scenario::Stack stack, bool backward, const LayerWidths& w);

/// The host ops of a context-parallel ring step after the first: the attention call and the
/// out/LSE merge ops the framework issues for it (PyTorch CP: cp_merge_kernels' eager ops;
/// Megatron-TE's CP path: the per-step Python of its ring loop).
HostLoad ring_step_host(scenario::Stack stack, bool backward);

/// The host ops outside the layers, each issued just before the first kernel of its region.
/// The embedding lookup (first pipeline stage, forward): `tp` > 1 adds the vocab-parallel mask.
HostLoad embedding_host_ops(scenario::Stack stack, int tp);
/// The LM head GEMM and the loss over `chunks` token chunks (last pipeline stage).
HostLoad lm_head_host_ops(scenario::Stack stack, bool backward, int chunks, int tp);

/// A Gated DeltaNet layer pass: `before` (norm, input projections, short convolution, gates;
/// backward: the MLP half, the output gate and projection), `attention` (FLA's
/// chunk_gated_delta_rule call: its autograd Function and Triton kernels) and `after`.
LayerHostOps gdn_layer_host_ops(scenario::Stack stack, bool backward, const LayerWidths& w);

/// A MoE layer's host ops beyond the dense MLP's (layer_host_ops counts those): the router,
/// token permute / unpermute and the expert GEMMs of `local_experts` experts, one GEMM call per
/// expert (eager) or one grouped call (TE GroupedLinear, torch._grouped_mm).
HostLoad moe_host_ops(scenario::Stack stack, bool backward, int local_experts, bool grouped);

/// Parameter tensors of one layer as the stack declares them (TE modules hold the norm weight
/// inside LayerNormLinear; GroupedLinear one weight per expert).
int layer_param_tensors(scenario::Stack stack, bool full_attention, int local_experts);

/// The optimizer step of one rank: `tensors` parameter tensors (or shards) of `elements`
/// values. Megatron-TE: TE FusedAdam's multi_tensor_apply; PyTorch: fused AdamW.
HostLoad optimizer_host_ops(scenario::Stack stack, double tensors, double elements);

/// Seconds of host time for `load` on a platform's runtime: eager-op units x `host_op`; zero
/// under CUDA graphs (`graphs: true`, torch.compile mode="reduce-overhead" or Megatron's
/// per-layer graphs), where a whole layer pass is one graph launch (graph_launch_seconds).
double host_seconds(const HostLoad& load, const scenario::RuntimeSpec& rt);

/// Under CUDA graphs, the host cost of replaying one layer pass: one cudaGraphLaunch, priced as
/// one kernel launch (`runtime: kernel_launch`); 0 without graphs.
double graph_launch_seconds(const scenario::RuntimeSpec& rt);

}  // namespace cpsim::model
