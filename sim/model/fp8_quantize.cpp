// TransformerEngine's FP8 quantisation kernels per GEMM (fp8_quantize.hpp). Byte counts per
// element of the tensor quantised: BF16 read 2 B; an FP8 copy written 1 B (FP4: 0.5 B); the
// block scales: FP32 per 128 (blockwise), E8M0 per 32 (MXFP8), E4M3 per 16 (NVFP4).
#include "model/fp8_quantize.hpp"

namespace cpsim::model {
namespace {

using scenario::Fp8Recipe;

/// Bytes of one cast of an `elems`-element BF16 tensor with `copies` quantised outputs.
double cast_bytes(double elems, Fp8Recipe r, int copies) {
  double out = 1;
  if (r == Fp8Recipe::Blockwise) out += 4.0 / 128;
  if (r == Fp8Recipe::Mxfp8) out += 1.0 / 32;
  if (r == Fp8Recipe::Nvfp4) out = 0.5 + 1.0 / 16;
  return elems * (2 + copies * out);
}

void quantize(std::vector<QuantKernel>& ks, const char* name, double elems, Fp8Recipe r,
              bool hopper) {
  // Per-tensor recipes on Hopper write the transposed copy in the same kernel
  // (nvte_quantize_v2 with_transpose: only TN FP8 GEMMs exist before sm100); on Blackwell the
  // one rowwise copy serves both GEMMs. Block recipes quantise both directions from BF16
  // ("to avoid double quantization errors", TE Float8BlockQuantizer / MXFP8Quantizer).
  const bool per_tensor = r == Fp8Recipe::Delayed || r == Fp8Recipe::Tensorwise;
  const int copies = per_tensor && !hopper ? 1 : 2;
  if (r == Fp8Recipe::Tensorwise) {
    // Float8CurrentScalingQuantizer: nvte_compute_amax (reads the tensor), then
    // nvte_compute_scale_from_amax (one scalar), then the cast.
    ks.push_back({"fp8_amax", elems * 2});
    ks.push_back({"fp8_scale", 0});
  }
  ks.push_back({name, cast_bytes(elems, r, copies)});
}

}  // namespace

std::vector<QuantKernel> fp8_quantize_kernels(const GemmCall& c, const QuantNeeds& needs,
                                              scenario::GpuArch arch) {
  std::vector<QuantKernel> ks;
  if (!c.fp8) return ks;
  const bool hopper = arch != scenario::GpuArch::Blackwell;
  const double batch = c.batch > 0 ? c.batch : 1;
  switch (c.pass) {
    case GemmPass::Fprop:
      if (needs.input_from_norm) {
        // LayerNormLinear's norm writes FP8 itself (Impl::FULLY_FUSED, delayed scaling); what
        // remains is the columnwise copy wgrad needs: read the FP8 rows, write their transpose.
        // Current scaling fuses norm + amax (FUSED_NORM_AMAX_FP8) and then scales + casts from
        // BF16: a whole quantisation; block recipes quantise from the BF16 norm output.
        if (c.recipe == Fp8Recipe::Delayed) {
          if (hopper) ks.push_back({"fp8_transpose", 2.0 * c.m * c.k * batch});
        } else {
          quantize(ks, "fp8_cast_input", c.m * c.k * batch, c.recipe, hopper);
        }
      } else {
        quantize(ks, "fp8_cast_input", c.m * c.k * batch, c.recipe, hopper);
      }
      if (needs.weight) quantize(ks, "fp8_cast_weight", c.n * c.k * batch, c.recipe, hopper);
      break;
    case GemmPass::Dgrad:
      quantize(ks, "fp8_cast_grad_output", c.m * c.n * batch, c.recipe, hopper);
      break;
    case GemmPass::Wgrad:
      break;
  }
  return ks;
}

Cost fp8_quantize_cost(const GemmCall& c, const QuantNeeds& needs, const scenario::GpuSpec& gpu) {
  std::vector<MemKernel> ks;
  for (const QuantKernel& k : fp8_quantize_kernels(c, needs, gpu.arch)) ks.push_back({k.name, MemClass::FusedFwd, k.bytes, 1});
  if (ks.empty()) return {};
  return mem_kernels_cost(ks, gpu);
}

}  // namespace cpsim::model
