// Roofline kernel costs: FLOPs over peak x an efficiency curve fitted to published kernel
// figures (calibration.md), bytes over HBM bandwidth, and a launch floor.
#include "model/stack_kernels.hpp"
#include "model/roofline_model.hpp"

#include "model/tile_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>
#include <stdexcept>
#include <string>

#include "log/log.hpp"

namespace cpsim::model {
namespace {

/// Every kernel costs at least this: launch plus ramp-up of a back-to-back CUDA kernel.
constexpr double kLaunchFloor_s = 5e-6;

// ---- Attention efficiency curve -------------------------------------------------------------
// efficiency = plateau(head_dim, direction) x n / (n + n0) x occupancy, a fraction of dense peak:
//  - n / (n + n0): the fixed work of a query tile (load Q, write O and LSE, pipeline fill) is
//    amortised over its loop of n keys (forward: n = kv_len x unmasked_fraction, the mean keys
//    per query row; backward: n = q_len x unmasked_fraction, the loop over queries of a key tile).
//  - occupancy: tiles of 128 rows over the SMs, wave-quantised: tiles / (ceil(tiles / SMs) x SMs).
//  - plateau: the asymptote for long rows.
// Forward d128: plateau 0.67 and n0 = 235 tokens are the least-squares fit (in log time) to the
// ten FlashAttention-3 H100 figures of calibration.md (non-causal, 4 x 48 heads at 1K-8K and
// 16 heads at b x s = 16K for 512-16K); every figure is reproduced within 7 %.
// Forward d256: plateau 0.78, so that the curve gives FA3's best BF16 figure, 740 TFLOP/s (75 %
// of peak), at 16K. Forward d64: 0.55, an assumption (calibration.md has no d64 figure): at half
// the head dim the softmax work per matmul FLOP doubles; FA3's d64 kernels run about 80 % of
// its d128 rate. Between these head dims the plateau is linear in log2(head_dim).
// Backward: FLOPs 2.5 x forward at 0.63 / 0.73 of the forward plateau (FlashAttention-2 on A100:
// 63 % of peak backward vs 73 % forward) and n0 = 470 (twice the forward's: a key tile also
// writes dK, dV and accumulates dQ; an assumption, no backward-by-length figure is published).
// Masked calls (0 < unmasked_fraction < 1) also compute their diagonal tiles whole: about
// 64 x L wasted pairs per head, L the diagonal's length (min of q_len, kv_len and the side of a
// triangle holding the call's pairs; min(q_len, kv_len) for document masks).
// The curve is a fraction of peak, so it scales with each GPU's peak_flops.
constexpr double kBwdPlateauRatio = 0.63 / 0.73;
// MLA backward (DeepSeek-V3 / Kimi-K2 attention, Q.K over 192 and P.V over 128, which a
// scenario's MLA runs at its mean head dim 160, moe_keys.cpp): cuDNN 9.22 on GB200 runs it
// below its d128 backward though its forward runs above the d128 forward
// (gb200-cudnn-published.csv, NVIDIA/cudnn-frontend SDPA benchmark): at 16K, MLA backward 1088
// and 1122 TFLOP/s unmasked, 1134 and 1147 causal (dsv3, 128 heads; kimiK26, 64 heads) against
// d128's 1374 and 1328: 0.831 of it. So MLA's backward plateau is the d128 backward plateau
// times that, not the forward's d160 interpolation times the backward ratio (1.05 x d128's).
constexpr int kMlaHeadDim = (192 + 128) / 2;
constexpr double kMlaBwdOverD128Bwd = (1088.0 + 1122 + 1134 + 1147) / 4 / ((1374.0 + 1328) / 2);

/// Dense plateau of an implementation on an architecture, relative to FlashAttention-3 on
/// Hopper (the curve above). From the published dense figures at 16K, d128 (profiles'
/// make_published.py): FA2 on A100 reaches 73 % of peak forward (FA2 paper sec. 4.1), FA2 on
/// H100 370 TFLOP/s forward = 37 % of 989 (FA3 README figure), FA3 on H100 67 % (fit above);
/// cuDNN on H100 595-617 TFLOP/s forward d128, about FA3's (same figure). FlexAttention: 90 %
/// of FA2 forward and 85 % backward (PyTorch blog "FlexAttention", Aug 2024, A100 figures).
/// FA2 on Blackwell: flash_attn 2.7.4 on B200, d128 causal at 128K tokens (cuDNN frontend
/// SDPA benchmark, b200-fa2-published.csv; at 128K the diagonal tiles and CTA prologues are
/// under 1 % of the work, so the rate is the plateau): 443.7 TFLOP/s forward and 348.3
/// backward of B200's 2250 dense BF16 peak, 19.7 % and 15.5 %. flash_attn 2.x has no sm100
/// path (no tcgen05 / TMEM kernels; its hopper/ tree is FA3, sm90 only): it runs its sm80
/// mma.sync kernels, so the share is the architecture's, and GB200 (same die) runs it too.
/// FlexAttention is Triton-generated and Triton lowers tl.dot to Blackwell's tcgen05 MMA, so
/// FA2's reason does not hold for it; with no published Blackwell Flex figure it keeps the
/// Ampere-derived share (an assumption), as FA2 and Flex do on Ada.
constexpr double kFa2B200FwdShare = 443.738 / 2250, kFa2B200BwdShare = 348.253 / 2250;

double impl_scale(scenario::AttnImpl impl, scenario::GpuArch arch, bool backward) {
  using scenario::AttnImpl;
  using scenario::GpuArch;
  const bool hopper = arch == GpuArch::Hopper;
  const double ampere = 0.73 / 0.67;
  const double fa2 = hopper ? 0.37 / 0.67 : ampere;
  switch (impl) {
    case AttnImpl::Fa2:
      if (arch == GpuArch::Blackwell)
        return backward ? kFa2B200BwdShare / (0.67 * kBwdPlateauRatio) : kFa2B200FwdShare / 0.67;
      return fa2;
    case AttnImpl::Flex: return (hopper ? fa2 : ampere) * (backward ? 0.85 : 0.90);
    case AttnImpl::Cudnn: return hopper || arch == GpuArch::Blackwell ? 1.0 : fa2;
    default: return 1.0;
  }
}

double forward_plateau(int head_dim);

/// The dense plateau of one direction at `head_dim`, before the implementation's scale.
double plateau(int head_dim, bool backward) {
  if (!backward) return forward_plateau(head_dim);
  if (head_dim == kMlaHeadDim) return forward_plateau(128) * kBwdPlateauRatio * kMlaBwdOverD128Bwd;
  return forward_plateau(head_dim) * kBwdPlateauRatio;
}

double forward_plateau(int head_dim) {
  const double x = std::log2(static_cast<double>(std::max(head_dim, 1)));
  if (x <= 6) return 0.55;
  if (x <= 7) return 0.55 + (x - 6) * (0.67 - 0.55);
  if (x <= 8) return 0.67 + (x - 7) * (0.78 - 0.67);
  return 0.78;
}


}  // namespace

RooflineModel::RooflineModel(const scenario::GpuSpec& gpu, scenario::AttnImpl impl,
                             std::shared_ptr<const GdnProfile> gdn,
                             std::shared_ptr<const GemmTable> gemm_table)
    : gpu_(gpu), impl_(scenario::resolve_impl(impl, gpu.arch)), gdn_(std::move(gdn)),
      gemm_table_(std::move(gemm_table)) {
  if (!(gpu_.peak_flops > 0)) {
    throw std::invalid_argument("cost model: GPU '" + gpu_.name + "' has no peak_flops");
  }
  if (!(gpu_.gemm_flops > 0)) gpu_.gemm_flops = 0.8 * gpu_.peak_flops;
  if (!(gpu_.hbm_Bps > 0)) {
    throw std::invalid_argument("cost model: GPU '" + gpu_.name + "' has no hbm bandwidth");
  }
  sms_ = gpu_.sm_count > 0 ? gpu_.sm_count : 132;
}

Cost RooflineModel::attention(const AttentionCall& c) const {
  Cost r;
  if (!c.backward) {
    r = priced(c);
  } else {
    AttentionCall f = c;
    f.backward = false;
    r = backward_at_forward_rate(priced(c), priced(f));
  }
  if (unprofiled_) {
    r.origin = "tile model: no measured or published profile for this GPU and kernel, -v lists the shapes";
    if (log::enabled(log::Level::Info)) {
      char buf[400];
      std::snprintf(buf, sizeof buf,
                    "cost: attention %s q %lld kv %lld, %d/%d heads d%d on %s (%s): no measured or published "
                    "profile for this GPU and kernel, priced by the tile model",
                    c.backward ? "bwd" : "fwd", static_cast<long long>(c.q_len), static_cast<long long>(c.kv_len),
                    c.heads_q, c.heads_kv, c.head_dim, gpu_.name.c_str(), scenario::impl_name(impl_));
      log::once(log::Level::Info, buf, buf);
    }
  }
  return r;
}

Cost RooflineModel::priced(const AttentionCall& c) const {
  Cost r;
  r.flops = attention_flops(c);
  r.source = CostSource::Roofline;
  // The tile model's plateaus come from published kernel figures (FA2 paper, FA3 README and
  // paper, cuDNN in the FA3 paper, the FlexAttention blog): say so beside "roofline".
  r.origin = "tile model at published FA/cuDNN plateaus";
  if (!(r.flops > 0)) return r;  // nothing unmasked: no kernel
  const double q = static_cast<double>(c.q_len), kv = static_cast<double>(c.kv_len);
  // Tile level (tile_cost.hpp): each tile at the implementation's dense plateau, partially
  // masked tiles computed whole, CTA prologues, waves over the SMs.
  const TileShape tile = tile_shape(impl_, c.head_dim, c.backward, c.mask != scenario::Mask::Full);
  const double share = plateau(c.head_dim, c.backward) * impl_scale(impl_, gpu_.arch, c.backward);
  const double tile_flops = 4.0 * tile.m * tile.n * c.head_dim * (c.backward ? 2.5 : 1.0);
  // One SM runs a tile at 1/sms of the GPU rate.
  const double tile_s = tile_flops * sms_ / (gpu_.peak_flops * share);
  const double t_compute = tile_time(c, tile, tile_s, sms_);
  const double elems_q = c.batch * q * c.heads_q * c.head_dim;
  const double elems_kv = c.batch * kv * c.heads_kv * c.head_dim;
  // BF16 tensors: forward reads Q, K, V and writes O; backward reads Q, K, V, O, dO and
  // writes dQ, dK, dV.
  const double bytes =
      c.backward ? 2 * (4 * elems_q + 4 * elems_kv) : 2 * (2 * elems_q + 2 * elems_kv);
  r.time_s = std::max({t_compute, bytes / gpu_.hbm_Bps, kLaunchFloor_s});
  return r;
}

// A measured table for the GPU where it covers the shape, else the tile/wave model
// (gemm_cost.hpp).
Cost RooflineModel::gemm(const GemmCall& c) const {
  const GemmShape shape = gemm_shape(c);
  const GemmFormat f = gemm_format(c);
  if (gemm_table_)
    if (const auto measured = gemm_table_->price(shape, f)) return *measured;
  return gemm_tile_cost(shape, f, gpu_);
}

Cost RooflineModel::linear_attention(int64_t tokens, int heads, int key_dim, int value_dim,
                                   int chunk, bool backward) const {
  GdnCall c;
  c.seq_len = tokens;
  c.heads_k = c.heads_v = heads;
  c.key_dim = key_dim;
  c.value_dim = value_dim;
  c.chunk = chunk;
  c.backward = backward;
  return gdn(c);
}

// A whole call the profile covers: its figure. A CP part (Local, Recurrence) of a covered call:
// the figure split in the proportions of the kernel-by-kernel roofline, marked derived. The CP
// pre-process, which no benchmark times, and calls outside the profile (marked extrapolated):
// the roofline.
Cost RooflineModel::gdn(const GdnCall& c) const {
  Cost roof = gdn_roofline(c, gpu_, sms_);
  // Kernel by kernel, each FLA chunk kernel at rates fitted to FLA's published H200 figures.
  roof.origin = "FLA chunk kernels, published H200 fit";
  // The CP pre-process is made of those same chunk kernels (no benchmark times it whole): its
  // price is derived from the published figures kernel by kernel, not a bare roofline.
  if (c.part == GdnPart::CpPreprocess) {
    roof.source = CostSource::Derived;
    roof.origin = "CP pre-process: FLA chunk kernels at rates fitted to FLA's published H200 figures";
  }
  if (c.part == GdnPart::CpPreprocess && log::enabled(log::Level::Info)) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "cost: gated-deltanet CP pre-process %s, %d/%d heads d%dx%d: no benchmark times this kernel, "
                  "priced kernel by kernel (FLA chunk kernels at rates fitted to FLA's published H200 figures)",
                  c.backward ? "bwd" : "fwd", c.heads_k, c.heads_v, c.key_dim, c.value_dim);
    log::once(log::Level::Info, buf, buf);
  }
  if (!gdn_ || c.part == GdnPart::CpPreprocess || !(roof.time_s > 0)) return roof;
  GdnCall whole = c;
  whole.part = GdnPart::Whole;
  const std::optional<Cost> p = gdn_->price(whole);
  if (!p) {
    Cost r = roof;
    r.extrapolated = true;
    if (log::enabled(log::Level::Info)) {
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "cost: gated-deltanet %s %d x %lld tokens, %d/%d heads d%dx%d: outside the Gated DeltaNet "
                    "profile's shapes, priced kernel by kernel by the roofline (extrapolated)",
                    c.backward ? "bwd" : "fwd", c.seqs, static_cast<long long>(c.seq_len), c.heads_k, c.heads_v,
                    c.key_dim, c.value_dim);
      log::once(log::Level::Info, buf, buf);
    }
    return r;
  }
  if (c.part == GdnPart::Whole) return *p;
  Cost r = roof;
  r.time_s = p->time_s * roof.time_s / gdn_roofline(whole, gpu_, sms_).time_s;
  r.source = CostSource::Derived;
  r.origin = "split of FLA's published H200 figures";
  return r;
}

std::string RooflineModel::describe() const {
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "roofline for %s (%s, %.0f TFLOP/s BF16 peak, %.0f GEMM, %.2f TB/s HBM, %d SMs): "
                "attention (%s) tile by tile at %.0f %% of peak for dense d128 forward tiles, "
                "%s",
                gpu_.name.c_str(), scenario::arch_name(gpu_.arch), gpu_.peak_flops / 1e12,
                gpu_.gemm_flops / 1e12, gpu_.hbm_Bps / 1e12, sms_, scenario::impl_name(impl_),
                100 * 0.67 * impl_scale(impl_, gpu_.arch, false),
                describe_gemm_model(gpu_).c_str());
  return std::string(buf) +
         (gemm_table_ ? ", measured where " + gemm_table_->origin() + " covers the shape" : std::string()) +
         "; Gated DeltaNet " +
         (gdn_ ? "from the " + gdn_->describe() + ", else " : std::string()) +
         "kernel by kernel (FLA chunk kernels, fitted to FLA's published H200 figures)";
}

Cost RooflineModel::memory_kernels(const std::vector<MemKernel>& ks) const { return mem_kernels_cost(ks, gpu_); }

}  // namespace cpsim::model
