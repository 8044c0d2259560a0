#include "schedule/partition.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace cpsim::schedule {

namespace {

// Pair counts reach s^2/2, and the sums of positions inside them reach s^3: 128-bit keeps every
// intermediate exact for any s that fits int64, and the result is checked before narrowing.
__extension__ typedef __int128 i128;

int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

int64_t narrow(i128 v, const char* what) {
  if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min())
    throw std::overflow_error(std::string(what) + ": pair count exceeds int64");
  return static_cast<int64_t>(v);
}

/// A run in canonical form: count == 1 means one contiguous block (stride unused); otherwise
/// length < stride (gapped). Empty runs have length 0 or count 0.
TokenRun canonical(const TokenRun& r) {
  if (r.length < 0 || r.count < 0)
    throw std::invalid_argument("TokenRun: negative length or count");
  if (r.length == 0 || r.count == 0) return TokenRun{r.begin, 0, 0, 1};
  if (r.count == 1) return TokenRun{r.begin, r.length, 0, 1};
  if (r.stride < r.length)
    throw std::invalid_argument("TokenRun: blocks overlap (stride " + std::to_string(r.stride) +
                                " < length " + std::to_string(r.length) + ")");
  if (r.stride == r.length) return TokenRun{r.begin, r.length * r.count, 0, 1};
  return r;
}

int64_t run_end(const TokenRun& r) {  // one past the last token, canonical non-empty run
  return r.begin + (r.count - 1) * r.stride + r.length;
}

bool empty(const TokenRun& r) { return r.length == 0 || r.count == 0; }

/// Number of tokens of r below x, and their sum (sum in 128 bits).
struct Below {
  i128 count = 0;
  i128 sum = 0;
};
Below below(const TokenRun& r, int64_t x) {
  Below out;
  int64_t y = x - r.begin;
  if (empty(r) || y <= 0) return out;
  const i128 len = r.length;
  int64_t m = 0, rem = y;  // full blocks below x, and tokens into the next block
  if (r.count > 1) {
    m = y / r.stride;
    rem = y % r.stride;
    if (m >= r.count) {
      m = r.count;
      rem = 0;
    }
  }
  const i128 part = std::min<int64_t>(rem, r.length);
  const i128 mm = m;
  const i128 b = r.begin, s = r.stride;
  // blocks 0..m-1: sum over q of (len*(b + q*s) + len*(len-1)/2)
  out.count = mm * len + part;
  out.sum = len * mm * b + len * s * (mm * (mm - 1) / 2) + mm * (len * (len - 1) / 2);
  const i128 p0 = b + mm * s;  // start of the partial block
  out.sum += part * p0 + part * (part - 1) / 2;
  return out;
}

/// H(x) = sum_{y < x} #{t in r : t < y} = sum_{t in r, t < x} (x - 1 - t).
i128 prefix_of_counts(const TokenRun& r, int64_t x) {
  Below b = below(r, x);
  return b.count * (static_cast<i128>(x) - 1) - b.sum;
}

/// F(x) = sum_{v < x} clamp(v, 0, h) over integers v (terms with v <= 0 vanish).
i128 clamp_prefix(i128 x, i128 h) {
  if (x <= 0) return 0;
  if (x <= h + 1) return x * (x - 1) / 2;
  return h * (h + 1) / 2 + (x - h - 1) * h;
}
/// sum_{k=0}^{n-1} clamp(k + c, 0, h)
i128 clamp_sum(i128 n, i128 c, i128 h) {
  if (n <= 0) return 0;
  return clamp_prefix(c + n, h) - clamp_prefix(c, h);
}

/// #{(i, j) : i in a, j in b, j <= i} with no document mask; both runs canonical.
i128 causal_pairs(const TokenRun& a, const TokenRun& b) {
  if (empty(a) || empty(b)) return 0;
  if (a.count == 1) {
    // sum over i in [p, p+L) of #{j in b : j < i+1}
    return prefix_of_counts(b, a.begin + a.length + 1) - prefix_of_counts(b, a.begin + 1);
  }
  if (b.count == 1) {
    // sum over j in [p, p+L) of #{i in a : i >= j}
    const i128 na = static_cast<i128>(a.length) * a.count;
    return na * b.length - (prefix_of_counts(a, b.begin + b.length) - prefix_of_counts(a, b.begin));
  }
  if (a.stride == b.stride) {
    // Block k of a against block k' of b depends only on d = k - k': the offset between them is
    // delta = (a.begin - b.begin) + d*S. Every pair counts once delta >= Lb - 1, none once
    // delta <= -La; only the few d in between need the partial count P(delta).
    const int64_t S = a.stride, La = a.length, Lb = b.length;
    const i128 na = a.count, nb = b.count;
    const int64_t base = a.begin - b.begin;
    const int64_t d_full = -floor_div(-(Lb - 1 - base), S);  // ceil((Lb-1-base)/S)
    const int64_t d_zero = floor_div(-La - base, S);
    // #{(k, k') : k - k' >= d_full} = sum_k clamp(k - d_full + 1, 0, nb)
    i128 total = static_cast<i128>(La) * Lb * clamp_sum(na, 1 - static_cast<i128>(d_full), nb);
    for (int64_t d = std::max<int64_t>(d_zero + 1, -b.count); d < d_full && d < a.count; ++d) {
      const i128 pairs_at_d = std::min<i128>(na, nb + d) - std::max<i128>(0, d);
      if (pairs_at_d <= 0) continue;
      const i128 delta = static_cast<i128>(base) + static_cast<i128>(d) * S;
      // P(delta) = #{(u, u') in [0,La) x [0,Lb) : u' <= u + delta}
      total += pairs_at_d * clamp_sum(La, delta + 1, Lb);
    }
    return total;
  }
  // Different strides (never produced by one partition): walk the blocks of the shorter run.
  const bool walk_a = a.count <= b.count;
  const TokenRun& w = walk_a ? a : b;
  i128 total = 0;
  for (int64_t k = 0; k < w.count; ++k) {
    TokenRun blk{w.begin + k * w.stride, w.length, 0, 1};
    total += walk_a ? causal_pairs(blk, b) : causal_pairs(a, blk);
  }
  return total;
}

/// r restricted to [lo, hi), as at most three canonical pieces (clipped first block, whole
/// middle blocks, clipped last block).
int clip(const TokenRun& r, int64_t lo, int64_t hi, TokenRun out[3]) {
  if (empty(r) || lo >= hi) return 0;
  auto clip_block = [&](int64_t b, int64_t e) {
    b = std::max(b, lo);
    e = std::min(e, hi);
    return TokenRun{b, std::max<int64_t>(0, e - b), 0, 1};
  };
  if (r.count == 1) {
    out[0] = clip_block(r.begin, r.begin + r.length);
    return empty(out[0]) ? 0 : 1;
  }
  // blocks with end > lo and begin < hi
  const int64_t q0 = std::max<int64_t>(0, floor_div(lo - r.length - r.begin, r.stride) + 1);
  const int64_t q1 = std::min<int64_t>(r.count - 1, -floor_div(-(hi - r.begin), r.stride) - 1);
  if (q0 > q1) return 0;
  int n = 0;
  auto push = [&](TokenRun t) {
    if (!empty(t)) out[n++] = t;
  };
  const int64_t b0 = r.begin + q0 * r.stride, b1 = r.begin + q1 * r.stride;
  push(clip_block(b0, b0 + r.length));
  if (q1 > q0) {
    if (q1 - q0 >= 2) {
      TokenRun mid{b0 + r.stride, r.length, r.stride, q1 - q0 - 1};
      push(canonical(mid));
    }
    push(clip_block(b1, b1 + r.length));
  }
  return n;
}

/// Index of the document holding position x (x clamped into the sequence).
size_t doc_of(const Documents& docs, int64_t x) {
  auto it = std::upper_bound(docs.starts.begin(), docs.starts.end(), x);
  return it == docs.starts.begin() ? 0 : static_cast<size_t>(it - docs.starts.begin()) - 1;
}

/// Pairs of a and b (canonical, inside one document) unmasked under docs.mask. A causal window
/// of W keeps j <= i but drops j <= i - W: the causal pairs of a moved W tokens earlier.
i128 mask_pairs(const TokenRun& a, const TokenRun& b, const Documents& docs) {
  switch (docs.mask) {
    case scenario::AttentionMask::Causal: return causal_pairs(a, b);
    case scenario::AttentionMask::Full:
      return static_cast<i128>(a.tokens()) * static_cast<i128>(b.tokens());
    case scenario::AttentionMask::SlidingWindow: {
      TokenRun shifted = a;
      shifted.begin -= docs.window;
      return causal_pairs(a, b) - causal_pairs(shifted, b);
    }
  }
  return 0;
}

i128 masked_pairs(const TokenRun& q_in, const TokenRun& kv_in, const Documents& docs) {
  const TokenRun q = canonical(q_in), kv = canonical(kv_in);
  if (empty(q) || empty(kv)) return 0;
  if (docs.starts.size() <= 1) return mask_pairs(q, kv, docs);  // one document: the mask only
  // A document contributes only if it meets both spans: it starts before min(ends) and ends
  // after max(begins). Documents are sorted, so those form one index range.
  const int64_t m_hi = std::min(run_end(q), run_end(kv)) - 1;
  const int64_t m_lo = std::max(q.begin, kv.begin);
  const size_t first = doc_of(docs, m_lo), last = doc_of(docs, m_hi);
  i128 total = 0;
  TokenRun qp[3], kp[3];
  for (size_t d = first; d <= last; ++d) {
    const int64_t lo = docs.starts[d];
    const int64_t hi =
        d + 1 < docs.starts.size() ? docs.starts[d + 1] : std::numeric_limits<int64_t>::max();
    const int nq = clip(q, lo, hi, qp), nk = clip(kv, lo, hi, kp);
    for (int i = 0; i < nq; ++i)
      for (int j = 0; j < nk; ++j) total += mask_pairs(qp[i], kp[j], docs);
  }
  return total;
}

void validate_docs(const Documents& docs) {
  if (!docs.starts.empty() && docs.starts.front() != 0)
    throw std::invalid_argument("Documents: starts[0] must be 0");
}

// Deterministic draws: mt19937_64's sequence is fixed by the standard, the std distributions'
// are not, so the transforms are written out here.
double unit_open_closed(std::mt19937_64& g) {  // (0, 1]
  return (static_cast<double>(g() >> 11) + 1.0) * 0x1.0p-53;
}
double unit_closed_open(std::mt19937_64& g) {  // [0, 1)
  return static_cast<double>(g() >> 11) * 0x1.0p-53;
}

}  // namespace

int64_t Partition::tokens_of(int rank) const {
  int64_t n = 0;
  for (const TokenRun& r : chunks.at(static_cast<size_t>(rank))) n += r.tokens();
  return n;
}

Documents Documents::single(int64_t seq_len) {
  if (seq_len <= 0)
    throw std::invalid_argument("seq_len must be positive (got " + std::to_string(seq_len) + ")");
  return Documents{{0}, seq_len};
}

Documents Documents::from_lengths(const std::vector<int64_t>& lengths) {
  if (lengths.empty()) throw std::invalid_argument("documents: need at least one length");
  Documents d;
  d.starts.reserve(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0)
      throw std::invalid_argument("documents: length " + std::to_string(i) + " is " +
                                  std::to_string(lengths[i]) + " (must be positive)");
    d.starts.push_back(d.seq_len);
    if (d.seq_len > std::numeric_limits<int64_t>::max() - lengths[i])
      throw std::invalid_argument("documents: total length overflows int64");
    d.seq_len += lengths[i];
  }
  return d;
}

Documents Documents::random(int64_t seq_len, int64_t mean_len, const std::string& dist,
                            uint64_t seed) {
  if (seq_len <= 0)
    throw std::invalid_argument("seq_len must be positive (got " + std::to_string(seq_len) + ")");
  if (mean_len <= 0)
    throw std::invalid_argument("document mean length must be positive (got " +
                                std::to_string(mean_len) + ")");
  const bool uniform = dist == "uniform";
  if (!uniform && dist != "lognormal")
    throw std::invalid_argument("document distribution '" + dist +
                                "' is not one of: uniform, lognormal");
  std::mt19937_64 gen(seed);
  // lognormal with sigma 1 whose mean is mean_len: mu = ln(mean) - sigma^2 / 2
  const double mu = std::log(static_cast<double>(mean_len)) - 0.5;
  const double two_pi = 6.283185307179586476925286766559;
  Documents d;
  d.seq_len = seq_len;
  int64_t pos = 0;
  while (pos < seq_len) {
    int64_t len;
    if (uniform) {  // integer uniform in [1, 2*mean): mean exactly mean_len
      const double span = 2.0 * static_cast<double>(mean_len) - 1.0;
      len = 1 + static_cast<int64_t>(unit_closed_open(gen) * span);
    } else {  // Box-Muller: one normal per two draws
      const double u1 = unit_open_closed(gen), u2 = unit_closed_open(gen);
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
      const double x = std::exp(mu + z);
      len = x >= static_cast<double>(seq_len) ? seq_len : std::max<int64_t>(1, std::llround(x));
    }
    d.starts.push_back(pos);
    pos += std::min(len, seq_len - pos);  // the last document is truncated to fit
  }
  return d;
}

Partition make_partition(int64_t seq_len, int ranks, scenario::Layout layout,
                         int64_t stripe_width) {
  using scenario::Layout;
  if (ranks < 1)
    throw std::invalid_argument("cp must be at least 1 (got " + std::to_string(ranks) + ")");
  if (seq_len <= 0)
    throw std::invalid_argument("seq_len must be positive (got " + std::to_string(seq_len) + ")");
  const std::string s = std::to_string(seq_len), n = std::to_string(ranks);
  Partition p;
  p.seq_len = seq_len;
  p.ranks = ranks;
  p.layout = layout;
  p.chunks.resize(static_cast<size_t>(ranks));
  switch (layout) {
    case Layout::Contiguous: {
      if (seq_len % ranks != 0)
        throw std::invalid_argument("seq_len " + s + " is not divisible by cp = " + n +
                                    " (contiguous needs N equal blocks)");
      const int64_t a = seq_len / ranks;
      for (int r = 0; r < ranks; ++r) p.chunks[static_cast<size_t>(r)] = {TokenRun{r * a, a, 0, 1}};
      break;
    }
    case Layout::ZigZag: {
      if (seq_len % (2 * static_cast<int64_t>(ranks)) != 0)
        throw std::invalid_argument("seq_len " + s + " is not divisible by 2*cp = " +
                                    std::to_string(2 * static_cast<int64_t>(ranks)) +
                                    " (zig-zag needs 2N equal chunks)");
      const int64_t a = seq_len / (2 * static_cast<int64_t>(ranks));
      for (int r = 0; r < ranks; ++r)
        p.chunks[static_cast<size_t>(r)] = {
            TokenRun{r * a, a, 0, 1},
            TokenRun{(2 * static_cast<int64_t>(ranks) - 1 - r) * a, a, 0, 1}};
      break;
    }
    case Layout::Striped: {
      if (stripe_width < 1)
        throw std::invalid_argument("stripe width must be at least 1 (got " +
                                    std::to_string(stripe_width) + ")");
      const int64_t period = static_cast<int64_t>(ranks) * stripe_width;
      if (seq_len % period != 0)
        throw std::invalid_argument("seq_len " + s + " is not divisible by cp*stripe_width = " + n +
                                    "*" + std::to_string(stripe_width) + " = " +
                                    std::to_string(period) +
                                    " (striped needs whole stripes on every rank)");
      for (int r = 0; r < ranks; ++r)
        p.chunks[static_cast<size_t>(r)] = {
            TokenRun{r * stripe_width, stripe_width, period, seq_len / period}};
      break;
    }
  }
  return p;
}

Partition make_document_partition(const Documents& docs, int ranks) {
  if (ranks < 1)
    throw std::invalid_argument("cp must be at least 1 (got " + std::to_string(ranks) + ")");
  validate_docs(docs);
  Partition p;
  p.seq_len = docs.seq_len;
  p.ranks = ranks;
  p.layout = scenario::Layout::ZigZag;
  p.chunks.resize(static_cast<size_t>(ranks));
  const int64_t parts = 2 * static_cast<int64_t>(ranks);
  std::vector<int64_t> starts = docs.starts;
  if (starts.empty()) starts = {0};
  for (size_t d = 0; d < starts.size(); ++d) {
    const int64_t b = starts[d];
    const int64_t len = (d + 1 < starts.size() ? starts[d + 1] : docs.seq_len) - b;
    auto cut = [&](int64_t k) { return b + static_cast<int64_t>(static_cast<i128>(len) * k / parts); };
    for (int r = 0; r < ranks; ++r) {
      for (int64_t k : {static_cast<int64_t>(r), parts - 1 - r}) {
        const int64_t lo = cut(k), hi = cut(k + 1);
        if (hi > lo) p.chunks[static_cast<size_t>(r)].push_back(TokenRun{lo, hi - lo, 0, 1});
      }
    }
  }
  return p;
}

int64_t count_pairs(const TokenRun& q, const TokenRun& kv, const Documents& docs) {
  validate_docs(docs);
  return narrow(masked_pairs(q, kv, docs), "count_pairs");
}

int64_t count_pairs(const std::vector<TokenRun>& q, const std::vector<TokenRun>& kv,
                    const Documents& docs) {
  validate_docs(docs);
  i128 total = 0;
  for (const TokenRun& a : q)
    for (const TokenRun& b : kv) total += masked_pairs(a, b, docs);
  return narrow(total, "count_pairs");
}

int64_t total_pairs(const Documents& docs) {
  validate_docs(docs);
  auto doc_pairs = [&](i128 len) -> i128 {
    switch (docs.mask) {
      case scenario::AttentionMask::Full: return len * len;
      case scenario::AttentionMask::SlidingWindow: {
        const i128 w = docs.window;
        if (len <= w) return len * (len + 1) / 2;
        return w * (w + 1) / 2 + (len - w) * w;
      }
      case scenario::AttentionMask::Causal: break;
    }
    return len * (len + 1) / 2;
  };
  i128 total = 0;
  if (docs.starts.empty()) total = doc_pairs(docs.seq_len);
  for (size_t d = 0; d < docs.starts.size(); ++d) {
    const i128 end = d + 1 < docs.starts.size() ? docs.starts[d + 1] : docs.seq_len;
    total += doc_pairs(end - docs.starts[d]);
  }
  return narrow(total, "total_pairs");
}

double RingTable::imbalance() const {
  if (per_rank.empty()) return 1.0;
  i128 sum = 0;
  int64_t mx = 0;
  for (int64_t v : per_rank) {
    sum += v;
    mx = std::max(mx, v);
  }
  if (sum == 0) return 1.0;
  return static_cast<double>(mx) * static_cast<double>(per_rank.size()) / static_cast<double>(sum);
}

RingTable ring_table(const Partition& p, const Documents& docs) {
  const int n = p.ranks;
  if (n < 1 || static_cast<int>(p.chunks.size()) != n)
    throw std::invalid_argument("ring_table: partition has no ranks");
  RingTable t;
  t.per_rank.assign(static_cast<size_t>(n), 0);
  t.per_step.assign(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), 0));
  t.slowest_per_step.assign(static_cast<size_t>(n), 0);
  // A rank's or the ring's sum over steps may overflow where each step does not.
  std::vector<i128> per_rank(static_cast<size_t>(n), 0);
  i128 total = 0, ring_total = 0;
  for (int step = 0; step < n; ++step) {
    int64_t slowest = 0;
    for (int r = 0; r < n; ++r) {
      const int src = ((r - step) % n + n) % n;
      const int64_t pairs =
          count_pairs(p.chunks[static_cast<size_t>(r)], p.chunks[static_cast<size_t>(src)], docs);
      t.per_step[static_cast<size_t>(step)][static_cast<size_t>(r)] = pairs;
      per_rank[static_cast<size_t>(r)] += pairs;
      total += pairs;
      slowest = std::max(slowest, pairs);
    }
    t.slowest_per_step[static_cast<size_t>(step)] = slowest;
    ring_total += slowest;
  }
  for (int r = 0; r < n; ++r)
    t.per_rank[static_cast<size_t>(r)] = narrow(per_rank[static_cast<size_t>(r)], "ring_table");
  t.ring_total = narrow(ring_total, "ring_table");
  t.balanced_total = narrow((total + n - 1) / n, "ring_table");
  return t;
}

}  // namespace cpsim::schedule
