#pragma once
/// The memory-bound kernels a transformer layer launches under each framework stack
/// (scenario::Stack), from the frameworks' source (shared/data/stacks.md): norms, RoPE, the
/// Q/K/V split, activation, residual adds, their backward kernels and the loss. Each kernel is
/// priced from its bytes at the achieved bandwidth of its kernel class, measured on an H200
/// (kernels/profiles/h200-membound-measured.csv) as a fraction of HBM bandwidth and applied to
/// each GPU's measured HBM bandwidth, plus the per-kernel launch floor.
#include <vector>

#include "model/cost_model.hpp"

namespace cpsim::model {

/// How a kernel moves its bytes: each class has one measured achieved bandwidth.
enum class MemClass : uint8_t {
  Copy,            ///< a strided copy / cat (torch copy_: 4.08 TB/s of 4.08 measured HBM)
  Add,             ///< one elementwise pass over 2-3 tensors (eager residual add)
  FusedFwd,        ///< one fused single-pass kernel forward (F.rms_norm, TE norm, Triton, TE cast)
  FusedBwd,        ///< its backward (F.rms_norm backward)
  EagerSwiglu,     ///< silu + mul as two eager kernels, over the op's logical bytes
  EagerSwigluBwd,  ///< their backward (mul backward x 2, silu_backward)
  EagerRope,       ///< complex RoPE (cast, complex mul, cast) over the op's logical bytes
  EagerCrossEntropy,  ///< eager cross-entropy forward + backward over [tokens, vocab]
  EagerLseMerge,   ///< PyTorch CP's per-step out/LSE merge (8 eager elementwise kernels)
  EagerSoftmax,    ///< eager scale-mask-softmax (+ dropout) over s x s scores
  EagerSoftmaxBwd,
};
const char* mem_class_name(MemClass c);

/// Achieved bandwidth of a kernel class on `gpu`, bytes/s.
double achieved_bandwidth(MemClass c, const scenario::GpuSpec& gpu);

struct MemKernel {
  const char* name;
  MemClass cls;
  double bytes;    ///< logical bytes read + written
  /// Launch floors it pays: one per op timed in the measured table (an eager op of several
  /// ATen kernels, e.g. silu*mul or the LSE merge, was timed whole: its launches are in its rate).
  int launches;
};

/// The layer-level regions a schedule builds, in launch order within a pass.
enum class LayerRegion : uint8_t {
  NormAttn,     ///< input norm (+ QKV split, RoPE after the QKV GEMM: see Rope)
  Rope,         ///< Q/K/V split copies and RoPE
  ResidualAttn, ///< residual add after the attention output projection
  NormMlp,      ///< pre-MLP norm
  Activation,   ///< SwiGLU
  ResidualMlp,  ///< residual add after the MLP
};

/// Per-token widths of one rank's share of a layer (after TP).
struct LayerWidths {
  double tokens = 0;    ///< tokens this rank's kernels touch
  double hidden = 0;    ///< hidden size of the norm / residual tensors
  double q = 0, kv = 0; ///< query and one of K/V widths (heads x head dim), 0 = no RoPE
  double ffn = 0;       ///< SwiGLU intermediate width (one of the two halves)
};

/// The kernels of one region, forward or backward, under `stack`.
std::vector<MemKernel> layer_kernels(scenario::Stack stack, LayerRegion region, bool backward,
                                     const LayerWidths& w);

/// The loss over `tokens` x `vocab` logits (forward or backward half).
std::vector<MemKernel> loss_kernels(scenario::Stack stack, bool backward, double tokens, double vocab);

/// PyTorch-native CP's LSE merge of one ring step's partial output ([tokens, heads x head_dim]
/// fp32 out and [tokens, heads] lse); empty for Megatron-TE, whose merge is inside the kernel.
std::vector<MemKernel> cp_merge_kernels(scenario::Stack stack, double tokens, double heads, double head_dim);

/// Their total cost: each kernel's bytes at its class's achieved bandwidth plus one launch
/// floor per launch. Source Measured (the H200 table) for classes it timed.
Cost mem_kernels_cost(const std::vector<MemKernel>& ks, const scenario::GpuSpec& gpu);

}  // namespace cpsim::model
