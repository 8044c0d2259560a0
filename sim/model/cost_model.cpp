// Kernel cost models: a roofline whose efficiency curves are fitted to published kernel figures
// (calibration.md), and a profile table (kernels/profiles/*.csv) interpolated between measured
// shapes that falls back to the roofline, and says so, outside them.
#include "model/cost_model.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "scenario/load.hpp"

namespace cpsim::model {

const char* cost_source_name(CostSource s) {
  switch (s) {
    case CostSource::Measured:
      return "measured";
    case CostSource::Published:
      return "published";
    case CostSource::Roofline:
      return "roofline";
  }
  return "?";
}

double attention_flops(const AttentionCall& c) {
  const double fwd = 4.0 * c.batch * static_cast<double>(c.q_len) * static_cast<double>(c.kv_len) *
                     c.unmasked_fraction * c.heads_q * c.head_dim;
  return c.backward ? 2.5 * fwd : fwd;
}

double linear_attention_flops(int64_t tokens, int heads, int key_dim, int value_dim, int chunk,
                              bool backward) {
  // Chunkwise Gated DeltaNet, per chunk of C tokens and per head, with K = key_dim,
  // V = value_dim and S the K x V state (Yang et al., "Parallelizing Linear Transformers with
  // the Delta Rule over Sequence Length", NeurIPS 2024, sec. 3: WY representation and UT
  // transform; Yang, Kautz & Hatamizadeh, "Gated Delta Networks", ICLR 2025, sec. 3: the gated
  // chunkwise form; the flash-linear-attention chunk kernels follow it):
  //   A = tril((beta K) K^T)                2 C^2 K
  //   T = (I + A)^-1, forward substitution  C^3 / 3
  //   W = T (beta K), U = T (beta V)        2 C^2 K + 2 C^2 V
  //   V' = U - W S                          2 C K V   (inter-chunk)
  //   O = Q S + tril(Q K^T) V'              2 C K V + 2 C^2 K + 2 C^2 V
  //   S <- g S + K^T V'                     2 C K V
  // Total C^2 (6 K + 4 V) + 6 C K V + C^3 / 3 per chunk; per token C (6 K + 4 V) + 6 K V + C^2 / 3.
  const double c = chunk, k = key_dim, v = value_dim;
  const double per_token = c * (6 * k + 4 * v) + 6 * k * v + c * c / 3;
  const double fwd = static_cast<double>(tokens) * heads * per_token;
  return backward ? 3 * fwd : fwd;
}

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

/// Every kernel costs at least this: launch plus ramp-up of a back-to-back CUDA kernel.
constexpr double kLaunchFloor_s = 5e-6;

/// SMs of a GPU, for wave quantization (no SM count in GpuSpec): by name, else H100's 132.
int sm_count(const std::string& gpu_name) {
  static const std::pair<const char*, int> kTable[] = {
      {"gb200", 148}, {"b200", 148}, {"h200", 132}, {"h100", 132}, {"h800", 132},
      {"h20", 78},    {"a100", 108}, {"a800", 108}, {"l40", 142},
  };
  const std::string n = lower(gpu_name);
  for (const auto& [key, sms] : kTable) {
    if (n.find(key) != std::string::npos) return sms;
  }
  return 132;
}

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
constexpr double kFwdHalfTokens = 235;
constexpr double kBwdHalfTokens = 470;
constexpr double kBwdPlateauRatio = 0.63 / 0.73;
constexpr double kTileRows = 128;

double forward_plateau(int head_dim) {
  const double x = std::log2(static_cast<double>(std::max(head_dim, 1)));
  if (x <= 6) return 0.55;
  if (x <= 7) return 0.55 + (x - 6) * (0.67 - 0.55);
  if (x <= 8) return 0.67 + (x - 7) * (0.78 - 0.67);
  return 0.78;
}

double wave_occupancy(double tiles, int sms) {
  if (tiles <= 0) return 1;
  const double waves = std::ceil(tiles / sms);
  return tiles / (waves * sms);
}

// ---- GEMM -----------------------------------------------------------------------------------
// efficiency = gemm_flops / peak_flops (the best measured GEMM) x tiling x k roll-off:
//  - tiling: the best of three output-tile shapes, each wave-quantised over the SMs and
//    weighted by its data reuse relative to the 128 x 256 tile the best GEMMs use (assumed
//    weights 1, 0.85, 0.7 for 128 x 256, 128 x 128, 64 x 128): libraries switch to smaller
//    tiles when large ones leave SMs idle;
//  - k / (k + 128): prologue and epilogue of each output tile amortised over its k loop,
//    normalised to 1 at k = 8192, the size best-GEMM figures are measured at.
// Memory roofline: 2 (mk + kn + mn) bytes of BF16.
struct GemmTile {
  double m, n, weight;
};
constexpr GemmTile kGemmTiles[] = {{128, 256, 1.0}, {128, 128, 0.85}, {64, 128, 0.7}};
constexpr double kGemmHalfK = 128, kGemmRefK = 8192;

// ---- Linear attention (Gated DeltaNet chunk kernels) ---------------------------------------
// Assumed efficiencies (no published figure in calibration.md; replace with a measured profile):
// 25 % of dense peak forward, 20 % backward; Triton chunk kernels over 64-token chunks run far
// below FlashAttention's 65 %. Bytes per token and head: q, k, v, o in BF16 (2 (2 K + 2 V)), the
// W, U intermediates written and read (4 (K + V)), the per-chunk states written and read
// (4 K V / C): 8 (K + V) + 4 K V / C forward, 3 x that backward. Kernels launched: 6 forward
// (cumsum, K K^T, triangular solve, W/U, chunk states, output), 10 backward.
constexpr double kLinearFwdEfficiency = 0.25, kLinearBwdEfficiency = 0.20;
constexpr int kLinearFwdKernels = 6, kLinearBwdKernels = 10;

class RooflineModel final : public CostModel {
 public:
  explicit RooflineModel(const scenario::GpuSpec& gpu) : gpu_(gpu) {
    if (!(gpu_.peak_flops > 0)) {
      throw std::invalid_argument("cost model: GPU '" + gpu_.name + "' has no peak_flops");
    }
    if (!(gpu_.gemm_flops > 0)) gpu_.gemm_flops = 0.8 * gpu_.peak_flops;
    if (!(gpu_.hbm_Bps > 0)) {
      throw std::invalid_argument("cost model: GPU '" + gpu_.name + "' has no hbm bandwidth");
    }
    sms_ = sm_count(gpu_.name);
  }

  Cost attention(const AttentionCall& c) const override {
    Cost r;
    r.flops = attention_flops(c);
    r.source = CostSource::Roofline;
    if (!(r.flops > 0)) return r;  // nothing unmasked: no kernel
    const double q = static_cast<double>(c.q_len), kv = static_cast<double>(c.kv_len);
    const double f = c.unmasked_fraction;
    const double n = (c.backward ? q : kv) * f;
    const double n0 = c.backward ? kBwdHalfTokens : kFwdHalfTokens;
    const double tiles =
        static_cast<double>(c.batch) * c.heads_q * std::ceil((c.backward ? kv : q) / kTileRows);
    const double efficiency = forward_plateau(c.head_dim) * (c.backward ? kBwdPlateauRatio : 1.0) *
                              n / (n + n0) * wave_occupancy(tiles, sms_);
    const double pairs = q * kv * f;
    double waste = 0;
    if (f < 1) {
      double diagonal = std::min(q, kv);
      if (c.mask != 2) diagonal = std::min(diagonal, std::sqrt(2 * pairs));
      waste = 0.5 * kTileRows * diagonal;
    }
    const double t_compute = r.flops * (1 + waste / pairs) / (gpu_.peak_flops * efficiency);
    const double elems_q = c.batch * q * c.heads_q * c.head_dim;
    const double elems_kv = c.batch * kv * c.heads_kv * c.head_dim;
    // BF16 tensors: forward reads Q, K, V and writes O; backward reads Q, K, V, O, dO and
    // writes dQ, dK, dV.
    const double bytes =
        c.backward ? 2 * (4 * elems_q + 4 * elems_kv) : 2 * (2 * elems_q + 2 * elems_kv);
    r.time_s = std::max({t_compute, bytes / gpu_.hbm_Bps, kLaunchFloor_s});
    return r;
  }

  Cost gemm(double m, double n, double k) const override {
    Cost r;
    r.flops = 2 * m * n * k;
    r.source = CostSource::Roofline;
    if (!(r.flops > 0)) return r;
    double tiling = 0;
    for (const GemmTile& t : kGemmTiles) {
      const double tiles = std::ceil(m / t.m) * std::ceil(n / t.n);
      tiling = std::max(tiling, t.weight * wave_occupancy(tiles, sms_));
    }
    const double k_rolloff =
        std::min(1.0, (k / (k + kGemmHalfK)) / (kGemmRefK / (kGemmRefK + kGemmHalfK)));
    const double rate = gpu_.gemm_flops * tiling * k_rolloff;
    const double bytes = 2 * (m * k + k * n + m * n);
    r.time_s = std::max({r.flops / rate, bytes / gpu_.hbm_Bps, kLaunchFloor_s});
    return r;
  }

  Cost memory_bound(double bytes) const override {
    Cost r;
    r.source = CostSource::Roofline;
    r.time_s = std::max(0.0, bytes) / gpu_.hbm_Bps + kLaunchFloor_s;
    return r;
  }

  // FP8: the same tiling and k roll-off over the measured FP8 plateau (fp8_gemm_flops), 1 B
  // inputs and a 2 B output. TE's per-tensor scaling (amax, cast) is a memory op of its own
  // that fuses into the neighbouring norm / activation kernels, so it is not priced here.
  Cost gemm_fp8(double m, double n, double k) const override {
    if (!(gpu_.fp8_gemm_flops > 0)) return gemm(m, n, k);
    Cost r = gemm(m, n, k);
    if (!(r.flops > 0)) return r;
    double tiling = 0;
    for (const GemmTile& t : kGemmTiles) {
      const double tiles = std::ceil(m / t.m) * std::ceil(n / t.n);
      tiling = std::max(tiling, t.weight * wave_occupancy(tiles, sms_));
    }
    const double k_rolloff =
        std::min(1.0, (k / (k + kGemmHalfK)) / (kGemmRefK / (kGemmRefK + kGemmHalfK)));
    const double rate = gpu_.fp8_gemm_flops * tiling * k_rolloff;
    const double bytes = m * k + k * n + 2 * m * n;
    r.time_s = std::max({r.flops / rate, bytes / gpu_.hbm_Bps, kLaunchFloor_s});
    return r;
  }

  Cost linear_attention(int64_t tokens, int heads, int key_dim, int value_dim, int chunk,
                        bool backward) const override {
    Cost r;
    r.source = CostSource::Roofline;
    r.flops = linear_attention_flops(tokens, heads, key_dim, value_dim, chunk, backward);
    if (!(r.flops > 0) || chunk <= 0) return r;
    const double k = key_dim, v = value_dim;
    const double fwd_bytes =
        static_cast<double>(tokens) * heads * (8 * (k + v) + 4 * k * v / chunk);
    const double bytes = backward ? 3 * fwd_bytes : fwd_bytes;
    const double eff = backward ? kLinearBwdEfficiency : kLinearFwdEfficiency;
    const int kernels = backward ? kLinearBwdKernels : kLinearFwdKernels;
    r.time_s = std::max(
        {r.flops / (gpu_.peak_flops * eff), bytes / gpu_.hbm_Bps, kernels * kLaunchFloor_s});
    return r;
  }

  std::string describe() const override {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "roofline for %s (%.0f TFLOP/s BF16 peak, %.0f GEMM, %.2f TB/s HBM, %d SMs): "
                  "attention at the FlashAttention-3 H100 efficiency curve scaled to peak "
                  "(d128 forward plateau 67 %%), GEMM at %.0f %% of peak",
                  gpu_.name.c_str(), gpu_.peak_flops / 1e12, gpu_.gemm_flops / 1e12,
                  gpu_.hbm_Bps / 1e12, sms_, 100 * gpu_.gemm_flops / gpu_.peak_flops);
    return buf;
  }

 private:
  scenario::GpuSpec gpu_;
  int sms_ = 132;
};

// ---- Profile table --------------------------------------------------------------------------

/// Shape class a profile curve is keyed by: full, causal (diagonal and offset), document.
int mask_class(int mask) { return mask == 3 ? 1 : mask; }

int mask_code(const std::string& name) {
  if (name == "full") return 0;
  if (name == "causal") return 1;
  if (name == "document") return 2;
  if (name == "causal-offset") return 3;
  return -1;
}

/// One interpolation curve: log(time) piecewise linear in log(FLOPs) through the measured
/// points, made monotone (time never falls as FLOPs grow) by pooling adjacent violators.
struct Curve {
  std::vector<double> log_flops, log_time;
  bool published = false;
};

struct ProfileError {
  int line, col;
  std::string message;
};

class ProfileModel final : public CostModel {
 public:
  ProfileModel(const std::string& path, const scenario::GpuSpec& gpu)
      : path_(path), fallback_(gpu) {
    load();
  }

  Cost attention(const AttentionCall& c) const override {
    const double flops = attention_flops(c);
    if (!(flops > 0)) return fallback_.attention(c);
    if (c.batch == 1) {
      const auto it =
          exact_.find(exact_key(c.backward, c.q_len, c.kv_len, c.mask, c.unmasked_fraction,
                                c.heads_q, c.heads_kv, c.head_dim));
      if (it != exact_.end()) return Cost{it->second.first, flops, it->second.second, false};
    }
    const Curve* curve = find_curve(c.backward, c.head_dim, mask_class(c.mask));
    if (curve == nullptr && mask_class(c.mask) == 2) curve = find_curve(c.backward, c.head_dim, 1);
    const double x = std::log(flops);
    if (curve != nullptr && x >= curve->log_flops.front() - 1e-9 &&
        x <= curve->log_flops.back() + 1e-9) {
      const auto& xs = curve->log_flops;
      const auto& ys = curve->log_time;
      size_t i = static_cast<size_t>(std::lower_bound(xs.begin(), xs.end(), x - 1e-9) - xs.begin());
      double log_t;
      if (i >= xs.size()) {
        log_t = ys.back();
      } else if (i == 0 || std::fabs(xs[i] - x) <= 1e-9) {
        log_t = ys[i];
      } else {
        const double w = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
        log_t = ys[i - 1] + w * (ys[i] - ys[i - 1]);
      }
      return Cost{std::exp(log_t), flops,
                  curve->published ? CostSource::Published : CostSource::Measured, false};
    }
    Cost r = fallback_.attention(c);
    r.extrapolated = true;
    return r;
  }

  Cost gemm(double m, double n, double k) const override { return fallback_.gemm(m, n, k); }
  Cost gemm_fp8(double m, double n, double k) const override { return fallback_.gemm_fp8(m, n, k); }
  Cost memory_bound(double bytes) const override { return fallback_.memory_bound(bytes); }
  Cost linear_attention(int64_t tokens, int heads, int key_dim, int value_dim, int chunk,
                        bool backward) const override {
    return fallback_.linear_attention(tokens, heads, key_dim, value_dim, chunk, backward);
  }

  std::string describe() const override {
    std::string classes;
    for (const auto& [key, curve] : curves_) {
      const auto& [bwd, d, cls] = key;
      static const char* const kClass[] = {"full", "causal", "document"};
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s%s d%d %s %.3g-%.3g FLOP", classes.empty() ? "" : "; ",
                    bwd ? "bwd" : "fwd", d, kClass[cls], std::exp(curve.log_flops.front()),
                    std::exp(curve.log_flops.back()));
      classes += buf;
    }
    return "profile " + path_ + " (" + std::to_string(rows_) + " rows, " + source_names_ +
           ", gpu " + gpus_ + "; attention interpolated in log-log between measured FLOPs per " +
           "direction / head dim / mask class: " + classes + "); outside that range and for " +
           "other kernels: " + fallback_.describe();
  }

 private:
  using CurveKey = std::tuple<bool, int, int>;
  using ExactKey = std::tuple<bool, int64_t, int64_t, int, int64_t, int, int, int>;

  static ExactKey exact_key(bool bwd, int64_t q, int64_t kv, int mask, double frac, int hq, int hkv,
                            int d) {
    return {bwd, q, kv, mask, std::llround(frac * 1e6), hq, hkv, d};
  }

  const Curve* find_curve(bool bwd, int d, int cls) const {
    const auto it = curves_.find({bwd, d, cls});
    return it == curves_.end() ? nullptr : &it->second;
  }

  [[noreturn]] void fail(const std::string& text, const ProfileError& e) const {
    std::istringstream in(text);
    std::string line;
    for (int i = 0; i < e.line && std::getline(in, line); ++i) {
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string msg = path_;
    if (e.line > 0) msg += ":" + std::to_string(e.line) + ":" + std::to_string(e.col);
    msg += ": error: cost.profile: " + e.message;
    if (e.line > 0)
      msg += "\n  " + line + "\n  " + std::string(static_cast<size_t>(e.col - 1), ' ') + "^";
    throw scenario::InputError(msg, path_, e.line, e.col, "cost.profile");
  }

  void load() {
    std::ifstream in(path_);
    if (!in) {
      throw scenario::InputError(path_ + ": error: cost.profile: cannot read the profile CSV",
                                 path_, 0, 0, "cost.profile");
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    static const char* const kColumns[] = {
        "gpu",     "kernel",   "direction", "q_len", "kv_len",  "mask",   "unmasked_fraction",
        "heads_q", "heads_kv", "head_dim",  "dtype", "time_us", "tflops", "source",
        "commit"};
    std::map<std::string, size_t> col;
    struct Point {
      double flops, time_s;
      bool published;
    };
    std::map<CurveKey, std::vector<Point>> points;
    std::map<std::string, int> sources, gpus;
    std::istringstream lines(text);
    std::string line;
    int line_no = 0;
    bool header = false;
    while (std::getline(lines, line)) {
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const auto first = line.find_first_not_of(" \t");
      if (first == std::string::npos || line[first] == '#') continue;
      std::vector<std::string> cells;
      std::vector<int> starts;
      size_t at = 0;
      while (true) {
        const size_t comma = line.find(',', at);
        cells.push_back(
            line.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        starts.push_back(static_cast<int>(at) + 1);
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      if (!header) {
        for (size_t i = 0; i < cells.size(); ++i) col[cells[i]] = i;
        for (const char* c : kColumns) {
          if (!col.count(c))
            fail(text, {line_no, 1, std::string("the header has no column '") + c + "'"});
        }
        header = true;
        continue;
      }
      auto cell = [&](const char* name) -> const std::string& {
        const size_t i = col.at(name);
        if (i >= cells.size()) {
          fail(text, {line_no, static_cast<int>(line.size()) + 1,
                      "row has " + std::to_string(cells.size()) + " columns, the header " +
                          std::to_string(col.size())});
        }
        return cells[i];
      };
      auto number = [&](const char* name, bool positive) {
        const std::string& s = cell(name);
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) ||
            (positive && !(v > 0)) || v < 0) {
          fail(text, {line_no, starts[col.at(name)],
                      std::string("column '") + name + "': '" + s + "' is not a " +
                          (positive ? "positive number" : "number >= 0")});
        }
        return v;
      };
      const std::string& dir = cell("direction");
      if (dir != "fwd" && dir != "bwd") {
        fail(text, {line_no, starts[col.at("direction")],
                    "column 'direction': expected fwd or bwd, got '" + dir + "'"});
      }
      const int mask = mask_code(cell("mask"));
      if (mask < 0) {
        fail(text, {line_no, starts[col.at("mask")],
                    "column 'mask': expected full, causal, document or causal-offset, got '" +
                        cell("mask") + "'"});
      }
      const std::string& source = cell("source");
      if (source != "measured" && source != "published") {
        fail(text, {line_no, starts[col.at("source")],
                    "column 'source': expected measured or published, got '" + source + "'"});
      }
      const double frac = number("unmasked_fraction", true);
      if (frac > 1 + 1e-9) {
        fail(text,
             {line_no, starts[col.at("unmasked_fraction")], "column 'unmasked_fraction': above 1"});
      }
      const bool bwd = dir == "bwd";
      // Shapes within the scenario limits (seq_len, heads, head_dim), so the casts are defined.
      auto whole = [&](const char* name, double max) {
        const double v = number(name, true);
        if (v != std::floor(v) || v > max) {
          fail(text, {line_no, starts[col.at(name)],
                      std::string("column '") + name + "': '" + cell(name) +
                          "' is not a whole number from 1 to " + std::to_string(int64_t(max))});
        }
        return v;
      };
      const auto q = static_cast<int64_t>(whole("q_len", 1099511627776.0));
      const auto kv = static_cast<int64_t>(whole("kv_len", 1099511627776.0));
      const int hq = static_cast<int>(whole("heads_q", 1e6));
      const int hkv = static_cast<int>(whole("heads_kv", 1e6));
      const int d = static_cast<int>(whole("head_dim", 65536));
      const double time_s = number("time_us", true) * 1e-6;
      if (!(time_s > 0)) {  // a denormal time_us underflows to 0 s, whose log is -inf
        fail(text, {line_no, starts[col.at("time_us")],
                    "column 'time_us': '" + cell("time_us") + "' is not a positive number"});
      }
      AttentionCall call;
      call.q_len = q;
      call.kv_len = kv;
      call.mask = static_cast<uint8_t>(mask);
      call.unmasked_fraction = frac;
      call.heads_q = hq;
      call.heads_kv = hkv;
      call.head_dim = d;
      call.backward = bwd;
      const double flops = attention_flops(call);
      const bool published = source == "published";
      const CostSource src = published ? CostSource::Published : CostSource::Measured;
      // Several kernels may time one shape: a framework would pick the fastest.
      const auto key = exact_key(bwd, q, kv, mask, frac, hq, hkv, d);
      auto [it, inserted] = exact_.emplace(key, std::make_pair(time_s, src));
      if (!inserted && time_s < it->second.first) it->second = {time_s, src};
      points[{bwd, d, mask_class(mask)}].push_back({flops, time_s, published});
      ++rows_;
      ++sources[source];
      ++gpus[cell("gpu")];
    }
    if (!header) fail(text, {0, 0, "empty profile (no header line)"});
    if (rows_ == 0) fail(text, {0, 0, "the profile has no rows"});
    for (auto& [key, pts] : points) {
      std::sort(pts.begin(), pts.end(),
                [](const Point& a, const Point& b) { return a.flops < b.flops; });
      // Equal FLOPs: keep the fastest (the kernel a framework would pick), as for exact shapes.
      std::vector<Point> uniq;
      for (const Point& p : pts) {
        if (!uniq.empty() && std::fabs(p.flops - uniq.back().flops) <= 1e-9 * p.flops) {
          if (p.time_s < uniq.back().time_s) uniq.back() = p;
          uniq.back().published = uniq.back().published || p.published;
          continue;
        }
        uniq.push_back(p);
      }
      // Pool adjacent violators on log(time) so the curve never decreases.
      struct Block {
        double sum_y, weight, first_x, last_x;
      };
      std::vector<Block> blocks;
      std::vector<double> xs;
      Curve curve;
      for (const Point& p : uniq) {
        curve.published = curve.published || p.published;
        blocks.push_back({std::log(p.time_s), 1, std::log(p.flops), std::log(p.flops)});
        while (blocks.size() > 1 &&
               blocks[blocks.size() - 2].sum_y / blocks[blocks.size() - 2].weight >
                   blocks.back().sum_y / blocks.back().weight) {
          Block b = blocks.back();
          blocks.pop_back();
          blocks.back().sum_y += b.sum_y;
          blocks.back().weight += b.weight;
          blocks.back().last_x = b.last_x;
        }
      }
      size_t pi = 0;
      for (const Block& b : blocks) {
        for (int j = 0; j < static_cast<int>(b.weight); ++j, ++pi) {
          curve.log_flops.push_back(std::log(uniq[pi].flops));
          curve.log_time.push_back(b.sum_y / b.weight);
        }
      }
      curves_[key] = std::move(curve);
    }
    for (const auto& [s, n] : sources) source_names_ += (source_names_.empty() ? "" : "+") + s;
    for (const auto& [g, n] : gpus) gpus_ += (gpus_.empty() ? "" : "+") + g;
  }

  std::string path_;
  RooflineModel fallback_;
  std::map<CurveKey, Curve> curves_;
  std::map<ExactKey, std::pair<double, CostSource>> exact_;
  int rows_ = 0;
  std::string source_names_, gpus_;
};

/// The bundled profile for `gpu` in `dir`: <key>-measured.csv whose key the GPU's name contains
/// (the longest such key), else <key>-published.csv likewise, where the published H100 profile
/// also serves H800 and H200 (the same SM90 compute). Empty if none.
std::string find_bundled_profile(const std::string& dir, const scenario::GpuSpec& gpu) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  const std::string name = lower(gpu.name);
  for (const std::string suffix : {"-measured.csv", "-published.csv"}) {
    std::string best, best_key;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.size() <= suffix.size() ||
          file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      const std::string key = lower(file.substr(0, file.size() - suffix.size()));
      bool match = name.find(key) != std::string::npos;
      if (!match && suffix == "-published.csv" && key == "h100") {
        match = name.find("h800") != std::string::npos || name.find("h200") != std::string::npos;
      }
      if (match &&
          (key.size() > best_key.size() || (key.size() == best_key.size() && file < best))) {
        best = entry.path().string();
        best_key = key;
      }
    }
    if (!best.empty()) return best;
  }
  return {};
}

}  // namespace

std::unique_ptr<CostModel> CostModel::roofline(const scenario::GpuSpec& gpu) {
  return std::make_unique<RooflineModel>(gpu);
}

std::unique_ptr<CostModel> CostModel::from_profile(const std::string& csv_path,
                                                   const scenario::GpuSpec& gpu) {
  return std::make_unique<ProfileModel>(csv_path, gpu);
}

std::unique_ptr<CostModel> CostModel::make(const std::string& choice,
                                           const scenario::GpuSpec& gpu) {
  if (choice == "none") return roofline(gpu);
  if (choice == "auto") {
    const std::string found = find_bundled_profile(
        (std::filesystem::path(scenario::data_dir()) / "kernels" / "profiles").string(), gpu);
    return found.empty() ? roofline(gpu) : from_profile(found, gpu);
  }
  return from_profile(choice, gpu);
}

}  // namespace cpsim::model
