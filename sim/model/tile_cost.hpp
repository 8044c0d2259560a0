#pragma once
/// Tile-level attention cost: an attention call priced from the tiles the kernel runs. Each
/// thread block (CTA) owns one row block of queries (forward) or one column block of keys
/// (backward) and loops over the other side in tiles of m x n; a tile is full (every pair
/// unmasked), partially masked (computed whole, then masked) or skipped (no unmasked pair: the
/// causal and varlen kernels never load it). CTAs run in waves over the SMs. Formula and
/// sources: docs/cost-model.md.
#include "model/cost_model.hpp"
#include "scenario/attention_kernel.hpp"

namespace cpsim::model {

/// Tile of one CTA iteration: m query rows x n key columns.
struct TileShape {
  int m = 128, n = 64;
};

/// The tile shape `impl` uses for `head_dim` in one direction (from the kernels' launch
/// templates; see tile_cost.cpp for the files).
TileShape tile_shape(scenario::AttnImpl impl, int head_dim, bool backward, bool masked);

/// Tiles of one (batch, head) slice of a call.
struct TileWork {
  double full = 0;      ///< tiles with every pair unmasked
  double partial = 0;   ///< tiles computed whole, partly masked
  double ctas = 0;      ///< thread blocks (row blocks forward, column blocks backward)
  double max_cta = 0;   ///< the longest CTA's loop, in tiles
};

/// Counts the tiles of `call` (q_len x kv_len, its mask and unmasked fraction). Causal and
/// causal-offset masks are a diagonal boundary placed so the unmasked pairs match the call's
/// (bottom-right aligned, as FlashAttention's causal flag); document masks are causal blocks of
/// mean length 2 x fraction x min(q, kv) along the diagonal.
TileWork count_tiles(const AttentionCall& call, TileShape tile);

/// Per-tile efficiency of a masked (causal / varlen) kernel relative to the dense kernel, on
/// top of its partial tiles being computed whole: 0.97, the mean of the ratio the tile count
/// leaves unexplained in FlashAttention-2's published causal vs non-causal figures (A100 and
/// H100, d64 and d128, 512-16K: 21 pairs, spread 0.94-1.00).
inline constexpr double kMaskedKernelEfficiency = 0.97;

/// Prologue / epilogue of one CTA (load Q, write O and LSE, fill the pipeline) in keys of its
/// loop: 235 forward, 470 backward (the FlashAttention-3 H100 fit of roofline_model.cpp).
inline constexpr double kFwdPrologueKeys = 235, kBwdPrologueKeys = 470;

/// Dense-equivalent tile count of a call: what it costs relative to one dense tile,
/// including CTA prologues. Used to price masked calls from a dense curve.
double tile_equivalents(const AttentionCall& call, TileShape tile);

/// Compute time of a call at `dense_tile_s` seconds per dense tile on one SM, with its tiles spread in
/// waves over `sms` SMs (wave quantization: a partial last wave costs a whole one).
double tile_time(const AttentionCall& call, TileShape tile, double dense_tile_s, int sms);

}  // namespace cpsim::model
