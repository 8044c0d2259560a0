#pragma once
/// The unfused attention path (`cost.attention_kernel: unfused`): attention as the frameworks
/// run it without a fused kernel. Megatron-Core's DotProductAttention (`--attention-backend
/// unfused`, core/transformer/dot_product_attention.py) and PyTorch's math SDPA backend
/// (aten/src/ATen/native/transformers/attention.cpp, _scaled_dot_product_attention_math)
/// materialise the s x s scores: Q K^T and P V are batched GEMMs priced by the GEMM cost
/// (CostModel::gemm: the tile/wave model for batched calls), scale / mask / softmax / dropout
/// are memory-bound kernels over the scores priced from their bytes at the measured achieved
/// bandwidth of their kernel class (stack_kernels.hpp). Neither skips masked tiles: a causal
/// call computes the whole q x kv square.
#include <memory>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/stack_kernels.hpp"

namespace cpsim::model {

/// How the framework runs the path, which decides the kernels and the number format.
enum class UnfusedVariant : uint8_t {
  /// Megatron-Core: BF16 baddbmm / bmm and FusedScaleMaskSoftmax's CUDA kernel
  /// (scaled_upper_triang_masked_softmax for causal), one read and one write of the scores.
  MegatronFusedSoftmax,
  /// Megatron-Core where the fused kernel refuses the shape (core/fusions/fused_softmax.py
  /// is_kernel_available: 16 < sk <= 4096, sq and sk multiples of 4, batch x heads a multiple
  /// of 4): forward_torch_softmax, in FP32 (TransformerConfig.attention_softmax_in_fp32
  /// defaults to True): cast, masked_fill_, torch softmax, cast back.
  MegatronTorchSoftmax,
  /// PyTorch's math SDPA: Q, K, V upcast to FP32 (allowFP16BF16ReductionMathSDP is false by
  /// default), FP32 GEMMs, the causal mask built and added as a float tensor, _safe_softmax
  /// (softmax, eq(-inf), all, where), and the weights cast back to BF16 as a second output.
  TorchMathFp32,
  /// torch.compile (Inductor) over the same code: the GEMMs stay cuBLAS calls in BF16 (extern
  /// mm), the scale, mask, softmax (and dropout) between them are one generated Triton kernel,
  /// the mask computed from indices in the kernel: one read and one write of the scores each
  /// way, as Inductor fuses a pointwise-reduction-pointwise chain over one tensor. BF16 GEMMs as
  /// model code writing matmul, softmax, matmul traces them (not confirmed against a profile).
  InductorFusedSoftmax,
};
const char* unfused_variant_name(UnfusedVariant v);

/// The variant `stack` runs for a call (Megatron's fused-kernel conditions are per call).
UnfusedVariant unfused_variant(scenario::Stack stack, const AttentionCall& c);

/// One kernel of the path: a GEMM or a memory-bound kernel, its price and what set it.
struct UnfusedPart {
  std::string name;
  bool gemm = false;
  double flops = 0;   ///< GEMMs: 2 m n k batch
  double bytes = 0;   ///< memory-bound kernels: logical bytes read + written
  Cost cost;
  std::string source; ///< "<source class> (<origin>)"
};

struct UnfusedPrice {
  UnfusedVariant variant = UnfusedVariant::MegatronFusedSoftmax;
  std::vector<UnfusedPart> parts;
  Cost total;          ///< time and FLOPs summed; source the weakest of the parts
};

/// The kernels of one forward or backward call and their prices: GEMMs through `gemms`
/// (BF16; FP32 for the math backend: the GPU's FP32 peak at its GEMM plateau, never faster
/// than the shape's BF16 price), memory-bound kernels at `gpu`'s achieved bandwidth per class. `dropout_p`: attention
/// dropout probability (0: PyTorch launches no dropout kernel, at::dropout returns its input).
UnfusedPrice unfused_attention_price(const CostModel& gemms, const scenario::GpuSpec& gpu,
                                     scenario::Stack stack, const AttentionCall& c, double dropout_p = 0);

/// Bytes the path keeps from forward to backward for one call (the forward's AttentionCall):
/// the softmax output (and with dropout its mask and output), and the GEMM inputs the
/// framework made for the path (FP32 copies of Q, K, V under the math backend; K, V expanded
/// over the query heads of a group).
double unfused_saved_bytes(scenario::Stack stack, const AttentionCall& c, double dropout_p = 0);

/// The name of the memory term that counts them (`cpsim memory`).
inline constexpr const char* kUnfusedScoresTerm = "unfused attention scores (s x s, kept for backward)";

/// The term for one rank's stage of `layers` full-attention layers with `in_flight`
/// micro-batches alive (0 unless cost.attention_kernel is unfused). Full recomputation keeps
/// only the layer being recomputed; selective recomputation (Megatron's core-attention
/// recompute) keeps none past its layer's forward: one layer's worth.
double unfused_scores_stage_bytes(const scenario::Scenario& sc, int layers, int in_flight);

/// A cost model that prices attention as the unfused path and everything else as `inner`
/// (whose GEMM cost also prices the path's GEMMs).
class UnfusedAttentionModel final : public CostModel {
 public:
  UnfusedAttentionModel(std::unique_ptr<CostModel> inner, const scenario::GpuSpec& gpu, scenario::Stack stack);
  Cost attention(const AttentionCall& c) const override;
  using CostModel::gemm;
  Cost gemm(const GemmCall& c) const override { return inner_->gemm(c); }
  Cost memory_kernels(const std::vector<MemKernel>& ks) const override { return inner_->memory_kernels(ks); }
  Cost linear_attention(int64_t tokens, int heads, int key_dim, int value_dim, int chunk,
                        bool backward) const override {
    return inner_->linear_attention(tokens, heads, key_dim, value_dim, chunk, backward);
  }
  Cost gdn(const GdnCall& c) const override { return inner_->gdn(c); }
  std::string describe() const override;

 private:
  std::unique_ptr<CostModel> inner_;
  scenario::GpuSpec gpu_;
  scenario::Stack stack_;
};

}  // namespace cpsim::model
