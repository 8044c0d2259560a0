#pragma once
/// How a sequence is split over N context-parallel ranks, and exact causal (and document-masked)
/// (i, j) pair counting between any two token sets without enumerating tokens.
#include <cstdint>
#include <string>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::schedule {

/// A set of token positions: `count` runs of `length` tokens starting at begin, begin + stride,
/// begin + 2*stride, ... (a contiguous block is count = 1; a striped rank is count = s/(N*w)).
struct TokenRun {
  int64_t begin = 0;
  int64_t length = 0;
  int64_t stride = 0;
  int64_t count = 1;
  int64_t tokens() const { return length * count; }
};

/// Document boundaries of a packed sequence (empty = one document spanning the sequence), and
/// the attention mask inside each document (causal by default).
struct Documents {
  std::vector<int64_t> starts;   ///< sorted, starts[0] == 0 when non-empty
  int64_t seq_len = 0;
  scenario::AttentionMask mask = scenario::AttentionMask::Causal;
  int64_t window = 0;            ///< SlidingWindow: query i sees keys i - window < j <= i
  /// This document set under another mask.
  Documents with_mask(scenario::AttentionMask m, int64_t w) const {
    Documents d = *this;
    d.mask = m;
    d.window = w;
    return d;
  }
  static Documents single(int64_t seq_len);
  static Documents from_lengths(const std::vector<int64_t>& lengths);
  /// Lengths drawn from a seeded distribution ("uniform", "lognormal") summing to seq_len.
  static Documents random(int64_t seq_len, int64_t mean_len, const std::string& dist,
                          uint64_t seed);
};

/// Which chunks each rank owns. Ring steps move whole ranks' token sets; kernels are launched
/// per (query chunk, key chunk) pair.
struct Partition {
  int64_t seq_len = 0;
  int ranks = 0;
  scenario::Layout layout = scenario::Layout::ZigZag;
  std::vector<std::vector<TokenRun>> chunks;  ///< per rank, its chunks in position order
  int64_t tokens_of(int rank) const;
};

/// Throws std::invalid_argument (with a reason naming the constraint) if seq_len is not
/// divisible as the layout needs (contiguous: N, zig-zag: 2N, striped: N * stripe_width).
Partition make_partition(int64_t seq_len, int ranks, scenario::Layout layout,
                         int64_t stripe_width = 1);

/// Per-document zig-zag (TransformerEngine's THD format): every document is cut into 2N
/// chunks (chunk k = [floor(k L / 2N), floor((k+1) L / 2N)) of a document of L tokens) and
/// rank r owns chunks r and 2N - 1 - r of each, so causal work balances per document.
Partition make_document_partition(const Documents& docs, int ranks);

/// Number of pairs (i, j), i in q, j in kv, i and j in the same document and unmasked under
/// docs.mask: j <= i (causal), any (full), or i - window < j <= i (sliding window).
/// Cost O(runs x documents touched), never O(tokens).
int64_t count_pairs(const TokenRun& q, const TokenRun& kv, const Documents& docs);
int64_t count_pairs(const std::vector<TokenRun>& q, const std::vector<TokenRun>& kv,
                    const Documents& docs);

/// Total unmasked pairs of the whole sequence under the document mask and docs.mask.
int64_t total_pairs(const Documents& docs);

/// The lesson's table: pairs per rank and per ring step (rank r at step t computes its queries
/// against the keys of rank (r - t) mod N).
struct RingTable {
  std::vector<int64_t> per_rank;                 ///< total pairs per rank
  std::vector<std::vector<int64_t>> per_step;    ///< [step][rank]
  std::vector<int64_t> slowest_per_step;
  int64_t ring_total = 0;        ///< sum over steps of the slowest rank
  int64_t balanced_total = 0;    ///< ceil(total pairs / N)
  double imbalance() const;      ///< max(per_rank) / mean(per_rank)
};
RingTable ring_table(const Partition& p, const Documents& docs);

}  // namespace cpsim::schedule
