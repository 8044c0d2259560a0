#pragma once
/// Kernel cost models: what one compute op costs on one GPU. A strategy with named factories:
/// a measured/published profile table (kernels/profiles/*.csv) with interpolation, falling back
/// to a roofline with an efficiency curve. Every cost says which source priced it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "scenario/mask.hpp"
#include "scenario/specs.hpp"

namespace cpsim::model {

/// Measured: a profile row timed on this machine; Published: a public benchmark figure;
/// Derived: computed from other rows (never silently reported as published); Roofline: the model.
enum class CostSource : uint8_t { Measured, Published, Roofline, Derived };
const char* cost_source_name(CostSource s);

/// One attention kernel call (FlashAttention-style, BF16 in, FP32 accumulate): built by the
/// schedule, priced here, and kept as the op's shape for the trace and `cpsim kernels`.
struct AttentionCall {
  int64_t q_len = 0;
  int64_t kv_len = 0;
  scenario::Mask mask = scenario::Mask::Full;
  double unmasked_fraction = 1;  ///< computed pairs / (q_len * kv_len)
  int heads_q = 0, heads_kv = 0, head_dim = 0;
  int batch = 1;
  bool backward = false;
};

struct Cost {
  double time_s = 0;
  double flops = 0;              ///< FLOPs the kernel performs (FlashAttention convention)
  CostSource source = CostSource::Roofline;
  bool extrapolated = false;     ///< outside the measured range: priced by the fallback
  /// What set the price within its source class, e.g. "cuBLAS tile/wave model" or a profile's
  /// file name; owned by the cost model (static or the model's own strings), null if none.
  const char* origin = nullptr;
};

/// Which GEMM of a linear layer: the forward Y = X W^T (fprop), the input gradient
/// dX = dY W (dgrad) or the weight gradient dW = dY^T X (wgrad).
enum class GemmPass : uint8_t { Fprop, Dgrad, Wgrad };

/// One GEMM of a linear layer, named by the layer's forward shape: X [m x k] times W^T [k x n]
/// (m tokens, k inputs, n outputs); the pass says which of its three GEMMs runs. With fp8 the
/// inputs are FP8 as `recipe` scales them (TransformerEngine); the output is BF16, a wgrad's
/// an FP32 accumulation into main_grad.
struct GemmCall {
  double m = 0, n = 0, k = 0;
  GemmPass pass = GemmPass::Fprop;
  bool fp8 = false;
  scenario::Fp8Recipe recipe = scenario::Fp8Recipe::Delayed;
  int batch = 1;                 ///< independent GEMMs of this shape in one batched call
};

/// FLOPs of an attention call (FlashAttention's convention): forward
/// 4 x batch x q_len x kv_len x unmasked_fraction x heads_q x head_dim, backward 2.5 x forward.
double attention_flops(const AttentionCall& call);

/// FLOPs of the chunkwise Gated DeltaNet algorithm over `tokens` tokens of `heads` heads
/// (WY / UT-transform form; the per-chunk terms are written out in cost_model.cpp).
/// Backward = 3 x forward (two gradient GEMMs per forward GEMM, plus the recomputation of the
/// forward's W, U and chunk states that the backward kernels perform).
double linear_attention_flops(int64_t tokens, int heads, int key_dim, int value_dim, int chunk,
                              bool backward);

/// Which of the flash-linear-attention chunk_gated_delta_rule kernels a Gated DeltaNet op runs
/// (gdn_cost.hpp lists them). Whole: the single-GPU forward or backward. Under FLA's context
/// parallelism (fla/ops/cp) a call splits at the state exchange: Local (forward: gate cumsum and
/// the fused KK^T / solve_tril / W,U kernel; backward: W,U and h recomputed, dv_local), then the
/// CpPreprocess kernel (the rank's end state and transition from a zero state), the all-gather
/// and merge, then Recurrence (forward: chunk_fwd_h from the merged initial state and chunk_fwd_o;
/// backward: chunk_bwd_dhu, dq/dk/dw/dg, the WY backward, the reverse cumsum).
enum class GdnPart : uint8_t { Whole, Local, CpPreprocess, Recurrence };

/// One Gated DeltaNet chunk-kernel call: `seqs` sequences of `seq_len` tokens each, heads_k
/// query/key heads and heads_v value (state) heads of key_dim x value_dim.
struct GdnCall {
  int64_t seq_len = 0;
  int seqs = 1;
  int heads_k = 0, heads_v = 0, key_dim = 128, value_dim = 128;
  int chunk = 64;
  bool backward = false;
  GdnPart part = GdnPart::Whole;
};

/// A backward is never priced at a higher rate than its forward: the FlashAttention-2 paper
/// (sec. 4.1) measures the backward at 63 % of A100 peak against the forward's 73 %, and no
/// bundled profile cites a backward faster than its forward. Where the two directions' tiles
/// fill their waves differently (forward CTAs per query block, backward per key block), `bwd`
/// (the backward's own price) is raised to the forward's rate, `fwd`; it is then derived from
/// the forward (or, where the forward is extrapolated, the roofline's).
Cost backward_at_forward_rate(Cost bwd, const Cost& fwd);

struct MemKernel;
/// How a memory-bound kernel moves its bytes (stack_kernels.hpp): each class has one measured
/// achieved bandwidth.
enum class MemClass : uint8_t;

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual Cost attention(const AttentionCall& call) const = 0;
  /// One GEMM of a linear layer by shape, pass and number format (gemm_cost.hpp): a measured
  /// table for the GPU where it covers the shape, else the tile/wave model.
  virtual Cost gemm(const GemmCall& call) const = 0;
  /// The forward BF16 GEMM [m x k] * [k x n].
  Cost gemm(double m, double n, double k) const {
    GemmCall c;
    c.m = m;
    c.n = n;
    c.k = k;
    return gemm(c);
  }
  /// The forward FP8 GEMM (TransformerEngine delayed scaling: FP8 inputs, BF16 output).
  Cost gemm_fp8(double m, double n, double k) const {
    GemmCall c;
    c.m = m;
    c.n = n;
    c.k = k;
    c.fp8 = true;
    return gemm(c);
  }
  /// One memory-bound kernel that reads + writes `bytes` in total, of kernel class `cls`
  /// (a copy, an elementwise pass, a fused single-pass kernel): memory_kernels of that kernel.
  /// There is no class-less price: every memory-bound kernel runs at its class's measured rate.
  Cost memory_bound(double bytes, MemClass cls, const char* kernel = "memory-bound kernel") const;
  /// The memory-bound kernels a stack runs as one op (stack_kernels.hpp: a layer region, the
  /// loss, a ring step's merge), each at its class's achieved bandwidth on the model's GPU.
  virtual Cost memory_kernels(const std::vector<MemKernel>& ks) const = 0;
  /// Chunked linear-attention (Gated DeltaNet) forward or backward over `tokens` tokens with
  /// `heads` heads of key_dim x value_dim state, chunk size `chunk`.
  virtual Cost linear_attention(int64_t tokens, int heads, int key_dim, int value_dim,
                                int chunk, bool backward) const = 0;
  /// The Gated DeltaNet kernels of one call (GdnCall::part), priced from a published or
  /// measured profile where one covers the shape, else kernel by kernel (gdn_cost.hpp). A model
  /// without a kernel-level price charges the whole call as linear_attention() for Whole and
  /// splits nothing.
  virtual Cost gdn(const GdnCall& c) const {
    if (c.part != GdnPart::Whole) return {};
    return linear_attention(c.seq_len * c.seqs, c.heads_v, c.key_dim, c.value_dim, c.chunk,
                            c.backward);
  }
  virtual std::string describe() const = 0;
  /// FP8 attention's throughput factor over BF16 for this call where the model holds the GPU's
  /// own FP8 figures (a profile's FP8 rows covering the shape), with what set it; none otherwise
  /// (fp8_attention.hpp then applies its published H100 rule).
  struct Fp8Ratio {
    double speedup = 1;
    const char* origin = nullptr;
  };
  virtual std::optional<Fp8Ratio> fp8_attention_ratio(const AttentionCall&) const { return std::nullopt; }

  /// Roofline: FLOPs / (peak x efficiency(shape)), bytes / HBM bandwidth.
  static std::unique_ptr<CostModel> roofline(const scenario::GpuSpec& gpu);
  /// Profile table for `gpu` read from a CSV; shapes outside it fall back to the roofline.
  static std::unique_ptr<CostModel> from_profile(const std::string& csv_path,
                                                 const scenario::GpuSpec& gpu);
  /// "auto": the bundled profile matching the GPU (measured first, then published), else
  /// roofline; "none": roofline; otherwise a CSV path.
  static std::unique_ptr<CostModel> make(const std::string& choice,
                                         const scenario::GpuSpec& gpu);
  /// The scenario's choice: cost.profile ("auto": the bundled <gpu>-<impl> profile, measured
  /// first, for the implementation cost.attention_kernel resolves to on this GPU; else the
  /// roofline for that implementation). Throws std::invalid_argument for FA3 off Hopper.
  static std::unique_ptr<CostModel> make(const scenario::CostSpec& spec,
                                         const scenario::GpuSpec& gpu);
};

}  // namespace cpsim::model
