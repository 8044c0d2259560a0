// The recomputation passes of a stage's layers: what a backward reruns of the forward under
// torchtitan's op policy and Megatron's selective policy. Full recomputation reruns the whole
// forward (StageBuilder::layer_backward) and needs no pass of its own.
#include <algorithm>

#include "model/stack_kernels.hpp"
#include "schedule/stage_builder.hpp"

namespace cpsim::schedule {

// Backward GEMMs do the data gradient and the weight gradient (gemm_price).
// torchtitan's op policy reruns the block's forward with the saved ops' outputs replayed: the
// norms, RoPE, SwiGLU and residual adds, the sequence-parallel all-gathers (not in its save
// list), and the even-numbered mms wk, wo and w3 (wk and w3 as their share of the fused QKV and
// up-gate GEMMs here); SDPA, wq, wv, w1, w2 and the reduce-scatters are not run again.
StageBuilder::Ops StageBuilder::op_sac_recompute(int layer, int mb, const Ops& entry) {
  const double h = m_.hidden;
  const Widths w = widths(layer);
  const double k_width = static_cast<double>(std::max(1, m_.heads_kv / tp_)) * m_.head_dim;
  const Phase ph = Phase::Forward;
  Ops x = stack_region("norm_attn", model::LayerRegion::NormAttn, false, layer, mb, entry);
  x = gemm_all("k_proj", tokens_, k_width, h, mb, layer, ph, tp_enter(false, mb, layer, ph, x));
  x = stack_region("rope", model::LayerRegion::Rope, false, layer, mb, x);
  x = gemm_all("out_proj", tokens_, h, w.mix, mb, layer, ph, x);
  x = stack_region("residual_attn", model::LayerRegion::ResidualAttn, false, layer, mb, x);
  x = stack_region("norm_mlp", model::LayerRegion::NormMlp, false, layer, mb, x);
  x = gemm_all("mlp_gate", tokens_, w.ffn, h, mb, layer, ph, tp_enter(false, mb, layer, ph, x));
  x = stack_region("swiglu", model::LayerRegion::Activation, false, layer, mb, x);
  return stack_region("residual_mlp", model::LayerRegion::ResidualMlp, false, layer, mb, x);
}

// Megatron's selective recomputation: when the backward reaches the checkpointed core
// attention (after the output projection's backward), tensor_parallel.checkpoint reruns its
// forward from the saved Q, K, V: the same attention forward the layer ran (every CP ring step's
// kernel and exchange), priced as the forward is; then the attention backward.
StageBuilder::Ops StageBuilder::core_attention_recompute(int layer, int mb, const Ops& entry) {
  recompute_ = true;
  const Ops x = sequence_mixing(layer, mb, false, entry);
  recompute_ = false;
  return x;
}

}  // namespace cpsim::schedule
