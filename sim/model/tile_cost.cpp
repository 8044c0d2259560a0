// Tile-level attention cost (see tile_cost.hpp and docs/cost-model.md).
#include "model/tile_cost.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <cmath>

namespace cpsim::model {
namespace {

/// Unmasked keys of query row r under a bottom-right causal boundary shifted by `off`:
/// clamp(r + 1 + off, 0, kv).
double row_keys(double r, double off, double kv) { return std::clamp(r + 1 + off, 0.0, kv); }

/// Unmasked pairs of q rows: sum over r of row_keys(r, off, kv), in closed form.
double causal_pairs(double q, double kv, double off) {
  // Rows r < r0 = -1 - off see nothing; rows r >= r1 = kv - 1 - off see all kv keys.
  const double r0 = std::clamp(-1 - off, 0.0, q), r1 = std::clamp(kv - 1 - off, 0.0, q);
  const double ramp = (r1 - r0) * (r0 + r1 - 1) / 2 + (r1 - r0) * (1 + off);  // sum r + 1 + off
  return std::max(0.0, ramp) + (q - r1) * kv;
}

/// The shift whose causal boundary leaves `pairs` unmasked pairs (bisection; pairs grows with off).
double causal_offset(double q, double kv, double pairs) {
  double lo = -q, hi = kv;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (causal_pairs(q, kv, mid) < pairs ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

/// Tiles of a q x kv causal block with boundary shift `off`, per direction's CTA grouping.
/// O(row tiles): a row tile's visible column tiles never decrease down the block (row_keys
/// grows with the row), so in the backward grouping (one CTA per column tile) column b holds
/// the row tiles whose visible count exceeds b: the CTAs are the largest visible count and the
/// longest CTA is column 0, the row tiles that see any key. (Counting column by column was
/// rows x columns: 6e11 steps for a 100 M-token sequence, which the scenario fuzzer found.)
TileWork causal_tiles(double q, double kv, double off, TileShape t, bool backward) {
  TileWork w;
  const double rows = std::ceil(q / t.m);
  double widest = 0, seeing = 0;
  for (double a = 0; a < rows; ++a) {
    const double first = a * t.m, last = std::min(q, (a + 1) * t.m) - 1;
    const double full = std::floor(row_keys(first, off, kv) / t.n);
    const double visible = std::ceil(row_keys(last, off, kv) / t.n);
    w.full += full;
    w.partial += visible - full;
    widest = std::max(widest, visible);
    if (visible > 0) seeing += 1;
  }
  w.ctas = backward ? widest : seeing;
  w.max_cta = backward ? seeing : widest;
  return w;
}

}  // namespace

TileShape tile_shape(scenario::AttnImpl impl, int d, bool backward, bool masked) {
  using scenario::AttnImpl;
  // FlashAttention-2 (csrc/flash_attn/src/flash_fwd_launch_template.h, run_mha_fwd_hdim*, and
  // flash_bwd_launch_template.h, run_mha_bwd_hdim*, for sm80 with >= 144 KB shared memory):
  // forward d64 128 x 128 (128 x 64 causal), d128 128 x 64, d256 128 x 64; backward d64
  // 128 x 128, d128 and up 64 x 128. FlashAttention-3 (hopper/tile_size.h,
  // tile_size_fwd_sm90): forward d64 192 x 192 (192 x 128 causal), d128 128 x 176 (128 x 128
  // causal), d256 128 x 80; backward (hopper/flash_bwd_launch_template.h) d128 64 x 128, d64
  // 128 x 128, d256 64 x 64. cuDNN and FlexAttention do not publish theirs: FA3's on Hopper-class
  // cuDNN, FA2's for Flex (Triton's default 128 x 64 blocks).
  if (impl == AttnImpl::Fa3 || impl == AttnImpl::Cudnn) {
    if (backward) return d <= 64 ? TileShape{128, 128} : d <= 128 ? TileShape{64, 128} : TileShape{64, 64};
    if (d <= 64) return {192, masked ? 128 : 192};
    if (d <= 128) return {128, masked ? 128 : 176};
    return {128, 80};
  }
  if (backward) return d <= 64 ? TileShape{128, 128} : TileShape{64, 128};
  if (d <= 64) return {128, masked ? 64 : 128};
  return {128, 64};
}

namespace {

TileWork count_tiles_uncached(const AttentionCall& c, TileShape t);

/// The inputs count_tiles reads; equal keys give equal tiles (a pure function).
struct TileKey {
  int64_t q = -1, kv = -1;
  double fraction = 0;
  scenario::Mask mask = scenario::Mask::Full;
  bool backward = false;
  int m = 0, n = 0;
  bool operator==(const TileKey&) const = default;
};

}  // namespace

/// A graph prices the same few block shapes over and over (every ring step of every layer and
/// micro-batch), and a causal count loops over the block's row tiles: measured 14 % of a 405B
/// 16,384-GPU analytic run (tp 2, cp 8, pp 16, 17 M ops) before this cache. Direct-mapped, per
/// thread; a miss recomputes, so answers are the uncached ones exactly.
TileWork count_tiles(const AttentionCall& c, TileShape t) {
  struct Slot {
    TileKey key;
    TileWork work;
  };
  constexpr size_t kSlots = 1024;
  thread_local std::array<Slot, kSlots> cache{};
  const TileKey key{c.q_len, c.kv_len, c.unmasked_fraction, c.mask, c.backward, t.m, t.n};
  size_t h = std::hash<int64_t>{}(key.q) * 0x9e3779b97f4a7c15ULL;
  h ^= std::hash<int64_t>{}(key.kv) + 0x7f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= std::hash<double>{}(key.fraction) + (h << 6) + (h >> 2);
  h ^= static_cast<size_t>(key.mask) * 131 + static_cast<size_t>(key.backward) * 7 +
       static_cast<size_t>(key.m) * 8191 + static_cast<size_t>(key.n);
  Slot& slot = cache[(h ^ (h >> 29)) % kSlots];
  if (!(slot.key == key)) slot = {key, count_tiles_uncached(c, t)};
  return slot.work;
}

namespace {

TileWork count_tiles_uncached(const AttentionCall& c, TileShape t) {
  const double q = static_cast<double>(c.q_len), kv = static_cast<double>(c.kv_len);
  const double f = std::clamp(c.unmasked_fraction, 0.0, 1.0);
  TileWork w;
  if (q <= 0 || kv <= 0 || f <= 0) return w;
  if (c.mask == scenario::Mask::Full || f >= 1) {
    const double rows = std::ceil(q / t.m), cols = std::ceil(kv / t.n);
    w.full = rows * cols;
    w.ctas = c.backward ? cols : rows;
    w.max_cta = c.backward ? rows : cols;
    return w;
  }
  // Causal blocks of length D along the diagonal hold l D / 2 pairs (l = min(q, kv)), so
  // D = 2 f q kv / l; past D = l they cannot hold the call's pairs (documents under a full mask,
  // a document's prefix against more keys than queries): the causal boundary that leaves the
  // call's pairs prices those, as it does a causal-offset call.
  const double l_doc = std::min(q, kv), d_doc = 2 * f * q * kv / l_doc;
  if (c.mask == scenario::Mask::Document && d_doc <= l_doc) {
    const double l = l_doc;
    const double doc = std::max(1.0, d_doc);
    const double docs = l / doc;
    TileWork one = causal_tiles(doc, doc, 0, t, c.backward);
    w.full = one.full * docs;
    w.partial = one.partial * docs;
    w.ctas = one.ctas * docs;
    w.max_cta = one.max_cta;
    return w;
  }
  const double off = causal_offset(q, kv, f * q * kv);
  TileWork band = causal_tiles(q, kv, off, t, c.backward);
  // A sliding-window band has a partially masked tile diagonal on each of its two edges (the
  // causal one and the window's), where a causal block has one.
  if (c.mask == scenario::Mask::SlidingWindow) band.partial *= 2;
  return band;
}

}  // namespace

double tile_equivalents(const AttentionCall& c, TileShape t) {
  const TileWork w = count_tiles(c, t);
  const bool masked = w.partial > 0;
  const double prologue = (c.backward ? kBwdPrologueKeys : kFwdPrologueKeys) / (c.backward ? t.m : t.n);
  const double work = w.full + w.partial + w.ctas * prologue;
  return masked ? work / kMaskedKernelEfficiency : work;
}

double tile_time(const AttentionCall& c, TileShape t, double dense_tile_s, int sms) {
  const TileWork w = count_tiles(c, t);
  if (w.ctas <= 0) return 0;
  const double slices = static_cast<double>(c.batch) * c.heads_q;
  const double prologue = (c.backward ? kBwdPrologueKeys : kFwdPrologueKeys) / (c.backward ? t.m : t.n);
  const double eff = w.partial > 0 ? kMaskedKernelEfficiency : 1.0;
  const double total = slices * (w.full + w.partial + w.ctas * prologue) * dense_tile_s / eff;
  const double ctas = slices * w.ctas;
  const double waves = std::ceil(ctas / sms);
  const double occupancy = ctas / (waves * sms);
  const double longest = (w.max_cta + prologue) * dense_tile_s / eff;
  return std::max(total / (sms * occupancy), longest);
}

}  // namespace cpsim::model
