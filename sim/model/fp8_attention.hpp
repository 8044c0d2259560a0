#pragma once
/// FP8 attention as TransformerEngine's FP8 DotProductAttention runs it (recipe fp8_dpa: the
/// cuDNN FP8 fused-attention backend; TE has no FP8 path through FlashAttention). Priced from
/// the BF16 kernel cost of the same call divided by an FP8 / BF16 throughput ratio: the GPU's
/// own, where its profile holds published FP8 rows covering the shape (GB200: cuDNN 9.22's
/// FP8 figures, 1.26-1.55x forward and 0.94-1.89x backward by shape), else H100's below.
#include "model/cost_model.hpp"

namespace cpsim::model {

/// cuDNN attention forward, head dim 128, sequence 16K, H100 80GB SXM5 (Shah et al. 2024,
/// FlashAttention-3, arXiv:2407.08608): FP8 1005 TFLOP/s (Fig. 7), BF16 595 TFLOP/s without
/// mask (Fig. 5; 539 with the causal mask). The FP8 panel does not say whether it is causal;
/// the unmasked BF16 figure makes the smaller (more conservative) ratio: 1.69.
inline constexpr double kCudnnFp8FwdTflops = 1005, kCudnnBf16FwdTflops = 595;
/// Backward: no published H100 FP8 attention-backward figure was found; cuDNN's own tracker
/// reports that the FP8 (MXFP8) backward "provides little speedup over BF16"
/// (NVIDIA/cudnn-frontend issue 659), so the backward keeps the BF16 rate.
inline constexpr double kFp8BwdSpeedup = 1.0;

/// Throughput factor of FP8 over BF16 attention for a forward or backward call by the H100 rule.
double fp8_attention_speedup(bool backward);
/// What the H100 rule says it is, as a cost's origin.
inline constexpr const char* kFp8RuleOrigin =
    "FP8 at cuDNN's H100 FP8/BF16 ratio (1.69 forward, 1.0 backward): no FP8 rows for this GPU and shape";

/// The call's cost with the kernel in FP8 (`fp8` false: the BF16 cost unchanged): the same
/// FLOPs, the whole BF16 time divided by the speedup (the model's fp8_attention_ratio where it
/// has one, else the H100 rule; the origin says which) (at the shapes long-context CP runs the
/// kernel is compute-bound, which is where the published ratio was measured).
Cost attention_cost(const CostModel& model, const AttentionCall& call, bool fp8);

}  // namespace cpsim::model
