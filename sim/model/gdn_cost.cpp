// Gated DeltaNet kernel costs: the flash-linear-attention chunk kernels one by one (FLOPs and
// bytes read off their Triton sources), a roofline fitted to FLA's published H200 figures, and
// the profile of those figures.
#include "model/gdn_cost.hpp"
#include "model/cost_source.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace cpsim::model {
namespace {

// ---- Roofline constants ----------------------------------------------------------------------
// Least-squares fit (in log time) of gdn_roofline() to the 81 forward and 32 backward FLA 0.5.1
// figures on H200 (QwenLM/FlashQLA benchmark/benchmark_results_H200.txt, d128, 1 to 8
// sequences of 1K-32K tokens, 4-64 value heads; kernels/profiles/make_gdn_published.py):
//  - parallel chunk kernels at 11 % of BF16 peak forward, 8 % backward (Triton, 64-token
//    chunks, fp32 gate math between small GEMMs: far below FlashAttention's 65 %);
//  - the state recurrences (chunk_fwd_h, chunk_bwd_dhu, the CP pre-process) walk their chunks
//    in order: 1.2 us per chunk forward, 2.1 us backward (load the chunk's k/w/u, two dependent
//    64 x 128 x BV GEMMs, store h), waves over the SMs when CTAs outnumber them;
//  - a fixed 6 us forward / 10 us backward per kernel (fill and drain; the benchmark replays a
//    CUDA graph, so no host launch cost is included).
// Forward: every figure within 14 % (rms 6 %); backward: rms 15 %, worst 45 % (few heads split
// in many short sequences, where FLA's backward runs slower than its FLOPs suggest).
// The efficiencies are fractions of each GPU's peak; the latencies are Hopper's, assumed
// elsewhere (no published figure off Hopper).
struct Fit {
  double efficiency, step_s, kernel_s;
};
constexpr Fit kFwd{0.11, 1.2e-6, 6e-6};
constexpr Fit kBwd{0.08, 2.1e-6, 10e-6};
/// Value block of the recurrence kernels: BV autotuned over {32, 64} on Hopper
/// (fla/ops/common/chunk_delta_h.py); 64 assumed. CP pre-process column block: 64 for K > 64
/// (fla/ops/cp/chunk_delta_h.py, BLOCK_SIZE).
constexpr double kBlockV = 64;

}  // namespace

std::vector<GdnKernel> gdn_kernels(const GdnCall& c) {
  std::vector<GdnKernel> ks;
  if (c.seq_len <= 0 || c.seqs <= 0 || c.heads_v <= 0) return ks;
  const double C = std::max(1, c.chunk), K = c.key_dim, V = c.value_dim;
  const double tokens = static_cast<double>(c.seq_len) * c.seqs;
  const double th = tokens * c.heads_v;                       // token x value-head
  const double thk = tokens * std::max(1, c.heads_k);         // token x key-head
  const double steps = std::ceil(static_cast<double>(c.seq_len) / C);
  const double rec_ctas = std::ceil(V / kBlockV) * c.seqs * c.heads_v;
  const double h_bytes = th * K * V * 2 / C;  // bf16 chunk states h (or dh), one per chunk
  // Per token and value head, BF16 tensors of K or V elements (2 B each), fp32 gates.
  const GdnKernel cumsum{"chunk_local_cumsum", 0, th * 8};
  const GdnKernel fwd_h{"chunk_gated_delta_rule_fwd_h", th * 4 * K * V,
                        thk * K * 2 + th * (K * 2 + V * 2) + th * V * 2 + h_bytes, true, steps,
                        rec_ctas};
  const bool bwd = c.backward;
  const bool whole = c.part == GdnPart::Whole;
  if (c.part == GdnPart::CpPreprocess) {
    // pre_process_{fwd,bwd}_kernel_merged: the rank's end state (or dh) from a zero state (the
    // h / dh recurrence again) and its transition M = prod(diag(gamma) - k^T w) over the
    // chunks: k^T w (2 C K^2 per chunk) and M_i M (2 K^3 per chunk).
    const double m_flops = th * (2 * K * K + 2 * K * K * K / C);
    const double ctas = (std::ceil(V / kBlockV) + std::ceil(K / kBlockV)) * c.seqs * c.heads_v;
    if (!bwd) {
      ks.push_back({"pre_process_fwd_kernel_merged", th * 4 * K * V + m_flops,
                    thk * K * 2 + th * (K * 2 + V * 2), true, steps, ctas});
    } else {
      ks.push_back({"pre_process_bwd_kernel_merged", th * 6 * K * V + m_flops,
                    2 * thk * K * 2 + th * (K * 2 + V * 2 * 2), true, steps, ctas});
    }
    return ks;
  }
  const bool local = whole || c.part == GdnPart::Local;
  const bool rest = whole || c.part == GdnPart::Recurrence;
  if (!bwd) {
    if (local) {
      ks.push_back(cumsum);
      // chunk_gated_delta_rule_fwd_intra: A = tril(beta K K^T) (2 C K), its inverse by blocked
      // forward substitution (~2 C^2 / 3), W = A (beta g K) (2 C K), U = A (beta V) (2 C V);
      // writes W, U and A (fp32).
      ks.push_back({"chunk_gated_delta_rule_fwd_intra", th * (4 * C * K + 2 * C * V + 2 * C * C / 3),
                    thk * K * 2 + th * (V * 2 + 8) + th * (K * 2 + V * 2 + C * 4)});
    }
    if (rest) {
      ks.push_back(fwd_h);  // v_new = u - w h (2 K V), h += k^T v_new (2 K V) per token
      // chunk_fwd_o: o = q h (2 K V) + tril(q k^T) (2 C K) v_new (2 C V).
      ks.push_back({"chunk_fwd_o", th * (2 * K * V + 2 * C * K + 2 * C * V),
                    2 * thk * K * 2 + th * V * 2 + h_bytes + th * V * 2});
    }
    return ks;
  }
  if (local) {
    ks.push_back({"recompute_w_u_fwd", th * (2 * C * K + 2 * C * V),
                  thk * K * 2 + th * (V * 2 + C * 4) + th * (K * 2 + V * 2)});
    ks.push_back(fwd_h);  // h recomputed (not stored by the forward)
    // chunk_bwd_dv_local: dv = tril(k q^T) do.
    ks.push_back({"chunk_bwd_dv_local", th * (2 * C * K + 2 * C * V), 2 * thk * K * 2 + th * V * 2 * 2});
  }
  if (rest) {
    // chunk_gated_delta_rule_bwd_dhu, in reverse chunk order: dv += k dh (2 K V),
    // dh += q^T do - w^T dv (4 K V).
    ks.push_back({"chunk_gated_delta_rule_bwd_dhu", th * 6 * K * V,
                  2 * thk * K * 2 + th * (K * 2 + V * 2 * 3) + h_bytes, true, steps, rec_ctas});
    // chunk_bwd_dqkwg: dq = do h^T + ds k, dk = v_new dh^T + ds^T q, dw = dv h^T, ds = do v_new^T.
    ks.push_back({"chunk_bwd_dqkwg", th * (6 * K * V + 4 * C * K + 2 * C * V),
                  2 * thk * K * 2 + th * (K * 2 + V * 2 * 3) + 2 * h_bytes + th * (K * 2 * 2 + 8)});
    // prepare_wy_repr_bwd: dA from dw, du; dk, dv, dbeta, dg through the inverse.
    ks.push_back({"prepare_wy_repr_bwd", th * (4 * C * K + 4 * C * V + 2 * C * C),
                  thk * K * 2 + th * (V * 2 + C * 4 + K * 2 + V * 2) + th * (K * 2 + V * 2 + 8)});
    ks.push_back({"chunk_local_cumsum_reverse", 0, th * 8});
  }
  return ks;
}

Cost gdn_roofline(const GdnCall& c, const scenario::GpuSpec& gpu, int sms) {
  const Fit& fit = c.backward ? kBwd : kFwd;
  Cost r;
  r.source = CostSource::Roofline;
  for (const GdnKernel& k : gdn_kernels(c)) {
    double t = std::max(k.flops / (gpu.peak_flops * fit.efficiency), k.bytes / gpu.hbm_Bps);
    if (k.sequential) t = std::max(t, k.steps * fit.step_s * std::max(1.0, k.ctas / std::max(1, sms)));
    r.time_s += t + fit.kernel_s;
    r.flops += k.flops;
  }
  return r;
}

GdnProfile::GdnProfile(const scenario::GdnProfileTable& table) : path_(table.path) {
  for (const scenario::GdnProfileRow& row : table.rows) {
    auto& curves = curves_[{row.backward, row.key_dim, row.value_dim, row.chunk}];
    const int64_t heads = static_cast<int64_t>(row.heads_v) * row.seqs;
    curves[heads][row.seq_len].push_back({static_cast<double>(row.seqs),
                                          static_cast<double>(row.heads_k) * row.seqs, row.time_s,
                                          row_source(row.source)});
    ++rows_;
  }
}

std::optional<std::pair<double, CostSource>> GdnProfile::on_curve(
    const std::map<int64_t, std::vector<Point>>& curve, const GdnCall& c) const {
  const double seqs = c.seqs, hk = static_cast<double>(std::max(1, c.heads_k)) * c.seqs;
  auto pick = [&](const std::vector<Point>& pts) {
    const Point* best = &pts.front();
    double best_d = std::numeric_limits<double>::infinity();
    for (const Point& p : pts) {
      // nearest in sequences first (a whole log unit outweighs any key-head distance), then in
      // key heads
      const double d = 100 * std::fabs(std::log(p.seqs / seqs)) + std::fabs(std::log(p.heads_k_total / hk));
      if (d < best_d) best_d = d, best = &p;
    }
    return *best;
  };
  const auto hi = curve.lower_bound(c.seq_len);
  if (hi == curve.end()) return std::nullopt;
  const Point b = pick(hi->second);
  if (hi->first == c.seq_len) return std::make_pair(b.time_s, b.source);
  if (hi == curve.begin()) return std::nullopt;
  const auto lo = std::prev(hi);
  const Point a = pick(lo->second);
  const double w = std::log(static_cast<double>(c.seq_len) / lo->first) /
                   std::log(static_cast<double>(hi->first) / lo->first);
  return std::make_pair(std::exp(std::log(a.time_s) + w * std::log(b.time_s / a.time_s)),
                        weaker(a.source, b.source));
}

std::optional<Cost> GdnProfile::price(const GdnCall& c) const {
  if (c.part != GdnPart::Whole || c.seq_len <= 0 || c.seqs <= 0 || c.heads_v <= 0) return std::nullopt;
  const auto it = curves_.find({c.backward, c.key_dim, c.value_dim, c.chunk});
  if (it == curves_.end()) return std::nullopt;
  const int64_t heads = static_cast<int64_t>(c.heads_v) * c.seqs;
  // The nearest curves at or below and at or above heads x sequences that cover the tokens.
  std::optional<std::pair<int64_t, std::pair<double, CostSource>>> below, above;
  for (const auto& [h, curve] : it->second) {
    if (h <= heads) {
      if (auto v = on_curve(curve, c)) below = std::make_pair(h, *v);
    }
    if (h >= heads && !above) {
      if (auto v = on_curve(curve, c)) above = std::make_pair(h, *v);
    }
  }
  if (!below || !above) return std::nullopt;
  Cost r;
  r.flops = 0;
  for (const GdnKernel& k : gdn_kernels(c)) r.flops += k.flops;
  if (below->first == above->first) {
    r.time_s = below->second.first;
    r.source = below->second.second;
    return r;
  }
  const double w = std::log(static_cast<double>(heads) / below->first) /
                   std::log(static_cast<double>(above->first) / below->first);
  r.time_s = std::exp(std::log(below->second.first) +
                      w * std::log(above->second.first / below->second.first));
  r.source = weaker(below->second.second, above->second.second);
  return r;
}

std::string GdnProfile::describe() const {
  std::string s = "Gated DeltaNet profile " + path_ + " (" + std::to_string(rows_) + " rows";
  for (const auto& [key, curves] : curves_) {
    const auto& [bwd, k, v, chunk] = key;
    int64_t t_lo = std::numeric_limits<int64_t>::max(), t_hi = 0;
    for (const auto& [h, curve] : curves) {
      t_lo = std::min(t_lo, curve.begin()->first);
      t_hi = std::max(t_hi, curve.rbegin()->first);
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "; %s d%dx%d chunk %d: %lld-%lld tokens, %lld-%lld heads x seqs",
                  bwd ? "bwd" : "fwd", k, v, chunk, static_cast<long long>(t_lo),
                  static_cast<long long>(t_hi), static_cast<long long>(curves.begin()->first),
                  static_cast<long long>(curves.rbegin()->first));
    s += buf;
  }
  return s + ")";
}

}  // namespace cpsim::model
