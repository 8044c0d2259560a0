// GEMM cost by shape (gemm_cost.hpp): the tile/wave model and the measured table.
#include "model/gemm_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <tuple>
#include <utility>
#include <limits>
#include <string>

namespace cpsim::model {
namespace {

// ---- Kernel facts the model is built from ---------------------------------------------------
// CTA output tiles the libraries choose between. cuBLASLt's sm90 kernels are named by them
// (e.g. "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_...", "...tilesize64x128x64")
// and CUTLASS 3's sm90/sm100 collective builders offer 64..256 x 64..256; Ampere's CUTLASS 2
// default set is the same range. The heuristics pick smaller tiles when large ones leave SMs idle.
struct Tile {
  double m, n;
};
constexpr Tile kTiles[] = {{128, 256}, {256, 128}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};

// Operand feed: a tile of tm x tn does 2 tm tn FLOPs per k for (tm + tn) operand elements
// loaded, so its arithmetic intensity is tm tn / (tm + tn). CUTLASS's default sm90 tile for
// BF16 and FP8 is 128 x 128 (with a 2-CTA cluster multicasting operands): the smallest tile
// that keeps the tensor cores busy at the best GEMM rate. Smaller tiles are feed-bound: their
// rate falls with their intensity relative to 128 x 128's (64 x 128: 2/3, 64 x 64: 1/2).
double feed(const Tile& t) {
  const double ai = t.m * t.n / (t.m + t.n);
  const double ai_ref = 128.0 * 128.0 / 256.0;
  return std::min(1.0, ai / ai_ref);
}

// K-loop prologue of each tile: the first TMA / cp.async stage must arrive from HBM before the
// first MMA; one HBM round trip under load, about 0.7 us on Hopper (Chips and Cheese, "Nvidia's
// H100: Funny L2, and Tons of Bandwidth", 2023: several hundred ns unloaded, more under load).
// An assumption of the same order for every architecture.
constexpr double kPrologue_s = 0.7e-6;

// One GEMM launch costs at least this on a busy stream (launch, grid ramp-up and tail): the
// project's kernel floor (roofline_model.cpp).
constexpr double kGemmFloor_s = 5e-6;

// Split-K: libraries split a long K over several CTAs when the output tiles alone cannot fill
// the SMs (small m x n, e.g. a weight gradient of a narrow layer or an expert with few
// tokens), reducing fp32 partials through a workspace: 2 x 4 B per output element per split,
// summed by a second kernel (cuBLAS's splitKreduce_kernel in Nsight traces) that pays a launch.
constexpr int kSplits[] = {1, 2, 3, 4, 6, 8, 12, 16};

// Blockwise FP8 on Hopper (DeepSeek-V3's 1x128 / 128x128 scales, which TransformerEngine runs
// through cuBLASLt's block-scaled GEMM): the partial sums are promoted to FP32 and rescaled on
// CUDA cores every 128 K, which costs issue slots. cuBLAS on H200 runs blockwise at 0.90 of its
// tensorwise rate (median time ratio over the 704 shapes timed both ways in
// kernels/profiles/h200-gemm-measured.csv); DeepGEMM's own kernel reaches 1,550 TFLOP/s on H800
// (deepseek-ai/DeepGEMM README). On Blackwell, block scales are applied by the tensor cores
// (tcgen05 block-scaled MMA): 1.
constexpr double kBlockwiseHopper = 0.90;

// Power-limited SM clock. The best measured GEMM (gemm_flops: the best shape of a sweep, e.g.
// 795 TFLOP/s on H100; our H200 grid's best is 793) is taken as the rate at the maximum clock; a
// GEMM that keeps the tensor cores busy draws more than the board's power limit there, and the
// driver lowers the SM clock until it fits (nvidia-smi clocks_event_reasons
// sw_power_cap). Dynamic power goes as activity x f x V^2 with V rising about linearly with f in
// the boost range, so P = P_idle + (P_max - P_idle) a (f / f_max)^3, where a is the share of
// time the tensor cores run at the best rate. Held to the limit the clock is
//   f / f_max = min(1, (h / a)^(1/3)),   h = (P_limit - P_idle) / (P_max - P_idle),
// the headroom: the share of the full-activity dynamic power the limit leaves. A GEMM whose
// activity is at most h (small, skinny, prologue- or wave-bound shapes) keeps the maximum clock;
// only its main loop slows (the prologue's HBM latency and the epilogue's stores do not scale
// with the SM clock). Published: H100/H200's 989 TFLOP/s dense BF16 is 132 SMs x 4096
// FLOP/clk x 1.83 GHz (NVIDIA cudnn-frontend PR 650), below the 1,980 MHz maximum nvidia-smi
// reports (kernels/measurements/h200/measure.log: 1,980 MHz max, 700 W limit); HPL's Rpeak was
// quoted by NVIDIA at the clock sustained under the power limit (A100: 1,305 of 1,410 MHz;
// G. Lockwood, "peak FLOPS"); back-to-back kernels on B200 drop the SM clock 1,965 -> ~1,580 MHz
// at the 1,000 W limit (flashinfer PR 2899, 15 % fewer TFLOP/s).
// Headroom per format, Hopper (H100, H800, H200: one GH100 die, one 700 W limit): fitted to the
// measured H200 grid (kernels/profiles/h200-gemm-measured.csv, cuBLAS through PyTorch, back to
// back, clocks not pinned) on the shapes whose 64-bit FNV-1a hash of "m,n,k" is even, the odd
// half held out (docs/cost-model.md, tests/model/gemm_cost_test.cpp): BF16 0.68 (full activity
// holds 0.88 of the maximum clock, ~1,740 MHz), FP8 0.48 (0.78, ~1,550 MHz): an FP8 MMA does
// twice the work per clock and draws 0.68 / 0.48 = 1.4 x BF16's dynamic power (the FP8 value
// also absorbs any FP8-only loss of issue efficiency: no clock trace separates the two). H200
// spends more of the same 700 W in its HBM3e than H100 in its HBM3 (Helma H100/H200
// power-capping study, arXiv 2604.11391: H100 keeps an edge in compute-bound DGEMM under a cap),
// so on H100 the fit may throttle slightly too much; no H100 clock trace was at hand to say how
// much.
// Ampere, Ada and Blackwell keep headroom 1 (their gemm_flops taken as sustained): A100 (400 W),
// L40S (350 W), B200 (1,000 W) and GB200 (1,200 W) have other limits and other dies, and no
// measured grid here to fit them from; their best-GEMM figures keep their own sources
// (platforms/gpus.yaml).
constexpr double kHopperHeadroomBf16 = 0.68, kHopperHeadroomFp8 = 0.48;

double power_headroom(GemmFormat f, const scenario::GpuSpec& g) {
  if (g.arch != scenario::GpuArch::Hopper) return 1.0;
  return f == GemmFormat::Bf16 ? kHopperHeadroomBf16 : kHopperHeadroomFp8;
}

/// The clock a kernel holds under the power limit, as a share of the maximum, at tensor-core
/// activity `a` (its rate at the maximum clock over the best rate) and headroom `h`.
double sustained_clock(double a, double h) {
  if (!(a > h)) return 1.0;
  return std::cbrt(h / a);
}

struct Format {
  double rate;       ///< best GEMM rate of the format, FLOP/s
  double in_bytes;   ///< bytes per input element (scales included)
  double k_tile;     ///< K per main-loop stage: 64 for BF16, 128 for 8-bit (cuBLASLt tile names)
};

Format format(GemmFormat f, const scenario::GpuSpec& g) {
  const double fp8 = g.fp8_gemm_flops > 0 ? g.fp8_gemm_flops : g.gemm_flops;
  switch (f) {
    case GemmFormat::Bf16: return {g.gemm_flops, 2, 64};
    case GemmFormat::Fp8: return {fp8, 1, 128};
    case GemmFormat::Fp8Blockwise:
      // 1 B plus one FP32 scale per 128 elements.
      return {fp8 * (g.arch == scenario::GpuArch::Blackwell ? 1.0 : kBlockwiseHopper), 1 + 4.0 / 128, 128};
    // MXFP8: one E8M0 scale byte per 32 elements, at the FP8 tensor-core rate (Blackwell
    // datasheet: FP8/FP6 share one rate; block scaling is in the MMA).
    case GemmFormat::Mxfp8: return {fp8, 1 + 1.0 / 32, 128};
    // NVFP4: FP4 E2M1 with one E4M3 scale per 16 elements, at twice the FP8 rate (B200
    // datasheet 9 PFLOP/s dense FP4 against 4.5 FP8; GB200 10 against 5).
    case GemmFormat::Nvfp4: return {2 * fp8, 0.5 + 1.0 / 16, 256};
  }
  return {g.gemm_flops, 2, 64};
}

}  // namespace

GemmShape gemm_shape(const GemmCall& c) {
  GemmShape s;
  s.batch = std::max(1, c.batch);
  switch (c.pass) {
    case GemmPass::Fprop:  // Y[m x n] = X[m x k] W^T
      s.m = c.m, s.n = c.n, s.k = c.k, s.layout = "TN";
      break;
    case GemmPass::Dgrad:  // dX[m x k] = dY[m x n] W[n x k]
      s.m = c.m, s.n = c.k, s.k = c.n, s.layout = "NN";
      break;
    case GemmPass::Wgrad:  // dW[n x k] = dY^T[n x m] X[m x k]: the tokens are the K loop
      s.m = c.n, s.n = c.k, s.k = c.m, s.layout = "NT";
      break;
  }
  return s;
}

GemmFormat gemm_format(const GemmCall& c) {
  if (!c.fp8) return GemmFormat::Bf16;
  switch (c.recipe) {
    case scenario::Fp8Recipe::Blockwise: return GemmFormat::Fp8Blockwise;
    case scenario::Fp8Recipe::Mxfp8: return GemmFormat::Mxfp8;
    // NVFP4 (TE's NVFP4BlockScaling) runs fprop and dgrad in FP4; the weight gradient, whose
    // inputs are Hadamard-rotated and stochastically rounded, too.
    case scenario::Fp8Recipe::Nvfp4: return GemmFormat::Nvfp4;
    default: return GemmFormat::Fp8;
  }
}

const char* gemm_format_name(GemmFormat f) {
  switch (f) {
    case GemmFormat::Bf16: return "bf16";
    case GemmFormat::Fp8: return "fp8";
    case GemmFormat::Fp8Blockwise: return "fp8-blockwise";
    case GemmFormat::Mxfp8: return "mxfp8";
    case GemmFormat::Nvfp4: return "nvfp4";
  }
  return "?";
}

Cost gemm_tile_cost(const GemmShape& s, GemmFormat f, const scenario::GpuSpec& gpu) {
  Cost r;
  r.flops = 2 * s.m * s.n * s.k * s.batch;
  r.source = CostSource::Published;
  // Where the power limit throttles the clock, its headroom is a component fit to our measured
  // H200 cuBLAS grid: the origin says so beside the tile model's published tiles and peaks.
  r.origin = power_headroom(f, gpu) < 1 ? "cuBLAS tile/wave model, clock at the power limit fitted to the measured H200 grid"
                                        : "cuBLAS tile/wave model";
  if (!(r.flops > 0)) return r;
  const Format fm = format(f, gpu);
  const int sms = gpu.sm_count > 0 ? gpu.sm_count : 132;
  const double sm_rate = fm.rate / sms;
  // Hopper and Blackwell kernels are persistent and warp-specialised: a tile's epilogue
  // overlaps the next tile's main loop, so only the last one shows; Ampere's run one tile per
  // CTA and each wave ends with its epilogue.
  const bool persistent = gpu.arch == scenario::GpuArch::Hopper || gpu.arch == scenario::GpuArch::Blackwell;
  // The output: BF16 (2 B); a weight gradient accumulates into FP32 main_grad (read + write).
  const double out_bytes = std::string(s.layout) == "NT" ? 8.0 : 2.0;
  const double k_steps = std::ceil(s.k / fm.k_tile);
  const double headroom = power_headroom(f, gpu);
  double best = std::numeric_limits<double>::infinity();
  for (const Tile& t : kTiles) {
    const double tiles = std::ceil(s.m / t.m) * std::ceil(s.n / t.n) * s.batch;
    // Each SM's share of HBM bandwidth when every SM stores its tile at once.
    const double epilogue = t.m * t.n * out_bytes * sms / gpu.hbm_Bps;
    for (const int split : kSplits) {
      const double steps = std::ceil(k_steps / split);
      if (split > 1 && steps < 4) break;  // too short a K loop to split
      const double ctas = tiles * split;
      const double waves = std::ceil(ctas / sms);
      const double main_loop = 2 * t.m * t.n * steps * fm.k_tile / (sm_rate * feed(t));
      double unclocked = waves * kPrologue_s + (persistent ? 1 : waves) * epilogue;
      if (split > 1) unclocked += split * s.m * s.n * s.batch * 8.0 / gpu.hbm_Bps + kGemmFloor_s;
      // Activity: the kernel's rate at the maximum clock over the format's best rate (a smaller
      // tile's feed-bound loop keeps the tensor cores busy for its FLOPs' share only).
      const double activity = r.flops / (fm.rate * (waves * main_loop + unclocked));
      const double time = waves * main_loop / sustained_clock(activity, headroom) + unclocked;
      best = std::min(best, time);
    }
  }
  const double bytes = s.batch * (fm.in_bytes * (s.m * s.k + s.k * s.n) + out_bytes * s.m * s.n);
  r.time_s = std::max({best, bytes / gpu.hbm_Bps, kGemmFloor_s});
  return r;
}

namespace {

/// A table row's number format from its dtype text (bf16; fp8, fp8-tensorwise, fp8_rowwise:
/// per-tensor/row scales in the epilogue; fp8-blockwise; mxfp8; nvfp4); nullopt for others.
std::optional<GemmFormat> row_format(const std::string& d) {
  if (d == "bf16" || d == "bfloat16") return GemmFormat::Bf16;
  // Row-wise scales (torchao's recipe) are no TransformerEngine format: kept out.
  if (d.find("rowwise") != std::string::npos) return std::nullopt;
  if (d.find("nvfp4") != std::string::npos) return GemmFormat::Nvfp4;
  if (d.find("mxfp8") != std::string::npos) return GemmFormat::Mxfp8;
  if (d.find("block") != std::string::npos) return GemmFormat::Fp8Blockwise;
  if (d.find("fp8") != std::string::npos || d.find("e4m3") != std::string::npos) return GemmFormat::Fp8;
  return std::nullopt;
}

/// The table's layout in cuBLAS's column-major terms. kernels/measure.sh names operands as
/// PyTorch's row-major matmul sees them (x @ w.T is "NT"); a row-major product is the
/// column-major product of the transposes in the other order, so its letters swap: x @ w.T is
/// cuBLAS "TN", TransformerEngine's fprop.
std::string cublas_layout(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s.size() == 2) std::swap(s[0], s[1]);
  return s;
}

/// Measured rows shorter than this may be host-bound (see GemmTable's constructor).
constexpr double kHostBoundRowS = 20e-6;

}  // namespace

GemmTable::GemmTable(const scenario::GemmProfileTable& t, const scenario::GpuSpec& gpu)
    : gpu_(gpu), path_(t.path) {
  origin_ = std::filesystem::path(t.path).filename().string();
  // A shape timed more than once (the grid and a model's own shapes overlap) is priced at the
  // mean of its timings.
  std::map<std::tuple<GemmFormat, std::string, double, double, double>, std::pair<double, int>> sum;
  std::map<std::tuple<GemmFormat, std::string, double, double, double>, CostSource> source;
  for (const auto& r : t.rows) {
    const auto f = row_format(r.dtype);
    if (!f) continue;
    // kernels/measure.sh times each GEMM through PyTorch's eager dispatch, calls back to back;
    // the host spends 10.3 us per eager op there (h200-block-measured.csv, tiny-op), so a call
    // under twice that may have timed the host, not the kernel: those shapes are left to the
    // tile/wave model.
    if (r.source == scenario::RowSource::Measured && r.time_s < kHostBoundRowS) continue;
    const auto key = std::make_tuple(*f, cublas_layout(r.layout), r.m, r.n, r.k);
    auto& [time, n] = sum[key];
    time += r.time_s;
    n++;
    source[key] = r.source == scenario::RowSource::Measured    ? CostSource::Measured
                  : r.source == scenario::RowSource::Published ? CostSource::Published
                                                               : CostSource::Derived;
  }
  for (const auto& [key, tn] : sum) {
    const auto& [f, layout, m, n, k] = key;
    rows_[f].push_back({m, n, k, tn.first / tn.second, layout, source.at(key)});
  }
}

std::optional<Cost> GemmTable::price(const GemmShape& s, GemmFormat f) const {
  const auto it = rows_.find(f);
  if (it == rows_.end() || s.batch != 1) return std::nullopt;
  const std::string layout = s.layout;
  const Row* best = nullptr;
  double best_d = std::numeric_limits<double>::infinity();
  const double kLn2 = std::log(2.0) + 1e-9;
  for (const Row& r : it->second) {
    const double dm = std::fabs(std::log(s.m / r.m)), dn = std::fabs(std::log(s.n / r.n)),
                 dk = std::fabs(std::log(s.k / r.k));
    if (dm > kLn2 || dn > kLn2 || dk > kLn2) continue;
    // The same layout first: a row of another layout is a step further away.
    const double d = dm + dn + dk + (r.layout.empty() || r.layout == layout ? 0 : 1e-3);
    if (d < best_d) {
      best_d = d;
      best = &r;
    }
  }
  if (!best) return std::nullopt;
  Cost c;
  c.flops = 2 * s.m * s.n * s.k;
  c.origin = origin_.c_str();
  if (best_d < 1e-12) {
    c.time_s = best->time_s;
    c.source = best->source;
    return c;
  }
  // Between rows: the nearest row's time, carried to this shape by the tile model's ratio.
  GemmShape at = s;
  at.m = best->m, at.n = best->n, at.k = best->k;
  c.time_s = best->time_s * gemm_tile_cost(s, f, gpu_).time_s / gemm_tile_cost(at, f, gpu_).time_s;
  c.source = CostSource::Derived;
  return c;
}

std::string describe_gemm_model(const scenario::GpuSpec& gpu) {
  char buf[400];
  const double hb = power_headroom(GemmFormat::Bf16, gpu), hf = power_headroom(GemmFormat::Fp8, gpu);
  std::snprintf(buf, sizeof buf,
                "GEMM by tile/wave model (CTA tiles 64..256 over %d SMs, split-K, %.1f us prologue, "
                "best BF16 GEMM %.0f TFLOP/s, FP8 %.0f; power-limited clock at full tensor-core "
                "activity %.3f BF16, %.3f FP8 of the maximum)",
                gpu.sm_count, kPrologue_s * 1e6, gpu.gemm_flops / 1e12, gpu.fp8_gemm_flops / 1e12,
                sustained_clock(1.0, hb), sustained_clock(1.0, hf));
  return buf;
}

}  // namespace cpsim::model
