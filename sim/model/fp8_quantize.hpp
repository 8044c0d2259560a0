#pragma once
/// FP8 as TransformerEngine runs it around each GEMM: the quantisation kernels (cast, transpose,
/// amax) of the GEMM's inputs and output gradient, priced from their bytes as memory-bound
/// kernels at their class rates (stack_kernels.hpp), per recipe (scenario::Fp8Recipe). What stays BF16 is the
/// caller's choice (the LM head, attention unless FP8 attention is asked for).
#include <vector>

#include "model/cost_model.hpp"
#include "model/stack_kernels.hpp"

namespace cpsim::model {

/// One quantisation kernel: the bytes it reads plus writes.
struct QuantKernel {
  const char* name;
  double bytes;
};

/// Where a GEMM's input comes from and what this call must quantise.
struct QuantNeeds {
  bool input_from_norm = false;  ///< X comes out of TE's fused LayerNormLinear norm kernel
  bool weight = false;           ///< re-quantise W: the first micro-batch of a step (TE caches it)
};

/// The kernels one GEMM call adds (TE pytorch/csrc/quantizer.cpp, module/base.py):
///  - fprop: X cast (+ the transposed copy wgrad needs where the GEMM takes only TN operands,
///    i.e. Hopper), unless the fused norm emitted it; W cast + transpose when `weight`;
///  - dgrad / wgrad: the output gradient dY cast + transpose (+ amax), once per backward pair
///    (charged to dgrad; a lone wgrad adds nothing);
///  - tensorwise (current scaling) adds an amax pass over the BF16 tensor and a scale kernel
///    before each cast; blockwise / MXFP8 / NVFP4 write rowwise and columnwise copies from BF16
///    with their block scales.
/// Empty for a BF16 call.
std::vector<QuantKernel> fp8_quantize_kernels(const GemmCall& c, const QuantNeeds& needs,
                                              scenario::GpuArch arch);

/// Their total time: TE's quantise kernels are single fused passes (nvte_quantize_v2,
/// cast_transpose), priced at the fused single-pass kernel bandwidth measured on H200
/// (stack_kernels.hpp MemClass::FusedFwd) plus a launch each.
Cost fp8_quantize_cost(const GemmCall& c, const QuantNeeds& needs, const scenario::GpuSpec& gpu);

}  // namespace cpsim::model
