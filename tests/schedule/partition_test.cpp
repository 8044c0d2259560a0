#include "schedule/partition.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::scenario::Layout;
using namespace cpsim::schedule;

namespace {

std::vector<int64_t> tokens(const std::vector<TokenRun>& runs) {
  std::vector<int64_t> out;
  for (const TokenRun& r : runs)
    for (int64_t c = 0; c < r.count; ++c)
      for (int64_t u = 0; u < r.length; ++u) out.push_back(r.begin + c * r.stride + u);
  return out;
}

std::vector<int64_t> doc_ids(const Documents& d, int64_t s) {
  std::vector<int64_t> id(static_cast<size_t>(s), 0);
  for (int64_t i = 0; i < s; ++i) {
    int64_t k = 0;
    for (size_t j = 0; j < d.starts.size(); ++j)
      if (d.starts[j] <= i) k = static_cast<int64_t>(j);
    id[static_cast<size_t>(i)] = k;
  }
  return id;
}

int64_t brute(const std::vector<TokenRun>& q, const std::vector<TokenRun>& kv, const Documents& d,
              int64_t s) {
  const auto id = doc_ids(d, s);
  int64_t n = 0;
  for (int64_t i : tokens(q))
    for (int64_t j : tokens(kv))
      if (j <= i && id[static_cast<size_t>(i)] == id[static_cast<size_t>(j)]) ++n;
  return n;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Partition, ContiguousLessonFigures) {
  const Partition p = make_partition(16, 4, Layout::Contiguous);
  ASSERT_EQ(p.chunks.size(), 4u);
  EXPECT_EQ(p.chunks[2][0].begin, 8);
  EXPECT_EQ(p.tokens_of(3), 4);
  const RingTable t = ring_table(p, Documents::single(16));
  EXPECT_EQ(t.per_rank, (std::vector<int64_t>{10, 26, 42, 58}));
  EXPECT_EQ(t.slowest_per_step, (std::vector<int64_t>{10, 16, 16, 16}));
  EXPECT_EQ(t.ring_total, 58);
  EXPECT_EQ(t.balanced_total, 34);
  EXPECT_NEAR(t.imbalance(), 58.0 / 34.0, 1e-12);  // "1.71x the mean"
  // step 1: rank 0 receives rank 3's (later) block: fully masked
  EXPECT_EQ(t.per_step[1], (std::vector<int64_t>{0, 16, 16, 16}));
}

TEST(Partition, ContiguousTendsToOneThreeFiveSeven) {
  const RingTable t =
      ring_table(make_partition(1 << 20, 4, Layout::Contiguous), Documents::single(1 << 20));
  const double unit = static_cast<double>(t.per_rank[0]);
  EXPECT_NEAR(t.per_rank[1] / unit, 3.0, 1e-4);
  EXPECT_NEAR(t.per_rank[2] / unit, 5.0, 1e-4);
  EXPECT_NEAR(t.per_rank[3] / unit, 7.0, 1e-4);
}

TEST(Partition, ZigZagLessonFigures) {
  const Partition p = make_partition(16, 4, Layout::ZigZag);
  ASSERT_EQ(p.chunks[1].size(), 2u);
  EXPECT_EQ(p.chunks[1][0].begin, 2);
  EXPECT_EQ(p.chunks[1][1].begin, 12);  // chunk 2N-1-k = 6
  const RingTable t = ring_table(p, Documents::single(16));
  EXPECT_EQ(t.per_rank, (std::vector<int64_t>{34, 34, 34, 34}));
  EXPECT_EQ(t.ring_total, 34);
  EXPECT_EQ(t.balanced_total, 34);
  EXPECT_DOUBLE_EQ(t.imbalance(), 1.0);
  // step 0: two causal diagonal chunks (3 + 3) plus one full chunk pair (4); later: two full (8)
  EXPECT_EQ(t.per_step[0], (std::vector<int64_t>{10, 10, 10, 10}));
  for (size_t step = 1; step < 4; ++step)
    EXPECT_EQ(t.per_step[step], (std::vector<int64_t>{8, 8, 8, 8})) << "step " << step;
}

TEST(Partition, ZigZagEqualForAnyN) {
  const RingTable t8 = ring_table(make_partition(32, 8, Layout::ZigZag), Documents::single(32));
  EXPECT_EQ(t8.per_rank, std::vector<int64_t>(8, 66));
  EXPECT_EQ(t8.ring_total, 66);
  for (int n : {2, 3, 5, 8, 16}) {
    for (int64_t a : {1, 2, 7, 64}) {
      const int64_t s = 2 * n * a;
      const RingTable t = ring_table(make_partition(s, n, Layout::ZigZag), Documents::single(s));
      const int64_t each = (2 * n - 1) * a * a + a * (a + 1);
      EXPECT_EQ(t.per_rank, std::vector<int64_t>(static_cast<size_t>(n), each));
      for (const auto& row : t.per_step)
        EXPECT_EQ(row, std::vector<int64_t>(static_cast<size_t>(n), row[0]));
      EXPECT_EQ(t.ring_total, each);
    }
  }
}

TEST(Partition, StripedBalance) {
  // token i on rank i mod N; rank r holds c = s/N tokens qN + r, which see qN + r + 1 keys.
  const int n = 8;
  const int64_t s = 1 << 16, c = s / n;
  const Partition p = make_partition(s, n, Layout::Striped);
  ASSERT_EQ(p.chunks[3].size(), 1u);
  EXPECT_EQ(p.chunks[3][0].stride, n);
  EXPECT_EQ(p.chunks[3][0].count, c);
  const RingTable t = ring_table(p, Documents::single(s));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(t.per_rank[static_cast<size_t>(r)], c * (r + 1) + n * c * (c - 1) / 2);
    for (int step = 0; step < n; ++step) {
      const int src = ((r - step) % n + n) % n;
      EXPECT_EQ(t.per_step[static_cast<size_t>(step)][static_cast<size_t>(r)],
                src <= r ? c * (c + 1) / 2 : c * (c - 1) / 2);
    }
  }
  EXPECT_LT(t.imbalance(), 1.001);
  EXPECT_LT(static_cast<double>(t.ring_total) / static_cast<double>(t.balanced_total), 1.001);
}

TEST(Partition, StripeWidthBalance) {
  const RingTable t =
      ring_table(make_partition(1 << 16, 4, Layout::Striped, 64), Documents::single(1 << 16));
  EXPECT_LT(t.imbalance(), 1.01);
  int64_t sum = std::accumulate(t.per_rank.begin(), t.per_rank.end(), int64_t{0});
  EXPECT_EQ(sum, total_pairs(Documents::single(1 << 16)));
}

TEST(Partition, DivisibilityErrors) {
  EXPECT_EQ(message_of([] { make_partition(1000, 8, Layout::ZigZag); }),
            "seq_len 1000 is not divisible by 2*cp = 16 (zig-zag needs 2N equal chunks)");
  EXPECT_EQ(message_of([] { make_partition(1001, 8, Layout::Contiguous); }),
            "seq_len 1001 is not divisible by cp = 8 (contiguous needs N equal blocks)");
  EXPECT_EQ(message_of([] { make_partition(1000, 8, Layout::Striped, 4); }),
            "seq_len 1000 is not divisible by cp*stripe_width = 8*4 = 32 (striped needs whole "
            "stripes on every rank)");
  EXPECT_THROW(make_partition(16, 0, Layout::ZigZag), std::invalid_argument);
  EXPECT_THROW(make_partition(16, 4, Layout::Striped, 0), std::invalid_argument);
  EXPECT_THROW(make_partition(0, 4, Layout::Contiguous), std::invalid_argument);
}

TEST(Documents, FromLengthsAndSingle) {
  const Documents d = Documents::from_lengths({4, 4, 8});
  EXPECT_EQ(d.starts, (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(d.seq_len, 16);
  EXPECT_EQ(total_pairs(d), 10 + 10 + 36);
  EXPECT_EQ(total_pairs(Documents::single(16)), 136);
  EXPECT_EQ(total_pairs(Documents{{}, 16}), 136);  // empty = one document
  EXPECT_EQ(message_of([] {
              Documents::from_lengths({4, 0, 8});
            }),
            "documents: length 1 is 0 (must be positive)");
  EXPECT_THROW(Documents::from_lengths({}), std::invalid_argument);
  EXPECT_THROW(Documents::from_lengths({5, -1}), std::invalid_argument);
}

TEST(Documents, RandomSumsExactlyAndIsDeterministic) {
  for (const char* dist : {"uniform", "lognormal"}) {
    const Documents a = Documents::random(1 << 20, 8192, dist, 7);
    const Documents b = Documents::random(1 << 20, 8192, dist, 7);
    const Documents c = Documents::random(1 << 20, 8192, dist, 8);
    EXPECT_EQ(a.starts, b.starts);
    EXPECT_NE(a.starts, c.starts);
    EXPECT_EQ(a.seq_len, 1 << 20);
    ASSERT_FALSE(a.starts.empty());
    EXPECT_EQ(a.starts[0], 0);
    for (size_t i = 1; i < a.starts.size(); ++i) EXPECT_LT(a.starts[i - 1], a.starts[i]);
    EXPECT_LT(a.starts.back(), a.seq_len);
    // about s / mean documents (128 expected)
    EXPECT_GT(a.starts.size(), 64u) << dist;
    EXPECT_LT(a.starts.size(), 256u) << dist;
  }
  // The first draws pin the transforms: mt19937_64 is fixed by the standard and the transforms
  // are ours, so these hold on every platform (a change would silently move every result).
  const Documents u = Documents::random(100000, 1000, "uniform", 1);
  const Documents l = Documents::random(100000, 1000, "lognormal", 1);
  EXPECT_EQ(std::vector<int64_t>(u.starts.begin(), u.starts.begin() + 6),
            (std::vector<int64_t>{0, 268, 541, 1443, 1486, 2188}));
  EXPECT_EQ(u.starts.size(), 103u);
  EXPECT_EQ(std::vector<int64_t>(l.starts.begin(), l.starts.begin() + 6),
            (std::vector<int64_t>{0, 2254, 4372, 6444, 8258, 8559}));
  EXPECT_EQ(l.starts.size(), 104u);
  EXPECT_EQ(message_of([] { Documents::random(100, 10, "zipf", 1); }),
            "document distribution 'zipf' is not one of: uniform, lognormal");
  EXPECT_THROW(Documents::random(100, 0, "uniform", 1), std::invalid_argument);
  EXPECT_THROW(Documents::random(0, 10, "uniform", 1), std::invalid_argument);
}

TEST(CountPairs, MatchesBruteForceOnRandomPartitions) {
  std::mt19937_64 g(12345);
  auto pick = [&](int64_t lo, int64_t hi) {  // inclusive
    return lo + static_cast<int64_t>(g() % static_cast<uint64_t>(hi - lo + 1));
  };
  int cases = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int n = static_cast<int>(pick(1, 6));
    const Layout layout = static_cast<Layout>(pick(0, 2));
    const int64_t w = layout == Layout::Striped ? pick(1, 4) : 1;
    const int64_t unit = layout == Layout::Contiguous ? n
                         : layout == Layout::ZigZag   ? 2 * n
                                                      : n * w;
    const int64_t s = unit * pick(1, std::max<int64_t>(1, 48 / unit));
    // documents: one, or random positive lengths summing to s
    Documents docs = Documents::single(s);
    if (pick(0, 3) != 0) {
      std::vector<int64_t> lengths;
      for (int64_t left = s; left > 0;) {
        const int64_t len = std::min(left, pick(1, std::max<int64_t>(1, s / 3)));
        lengths.push_back(len);
        left -= len;
      }
      docs = Documents::from_lengths(lengths);
    }
    const Partition p = make_partition(s, n, layout, w);
    const RingTable t = ring_table(p, docs);
    int64_t sum = 0;
    for (int r = 0; r < n; ++r) {
      sum += t.per_rank[static_cast<size_t>(r)];
      for (int src = 0; src < n; ++src) {
        const auto& q = p.chunks[static_cast<size_t>(r)];
        const auto& kv = p.chunks[static_cast<size_t>(src)];
        ASSERT_EQ(count_pairs(q, kv, docs), brute(q, kv, docs, s))
            << "s=" << s << " n=" << n << " layout=" << static_cast<int>(layout) << " w=" << w
            << " rank=" << r << " src=" << src << " docs=" << docs.starts.size();
        ++cases;
      }
    }
    ASSERT_EQ(sum, total_pairs(docs)) << "conservation, s=" << s << " n=" << n;
  }
  EXPECT_GT(cases, 10000);
}

TEST(CountPairs, MatchesBruteForceOnArbitraryRuns) {
  // Runs no partition makes: unequal strides, offsets, partial overlap of spans.
  std::mt19937_64 g(99);
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(g() % static_cast<uint64_t>(hi - lo + 1));
  };
  auto random_run = [&](int64_t s) {
    TokenRun r;
    r.length = pick(1, 6);
    r.count = pick(1, 6);
    r.stride = r.count == 1 ? 0 : r.length + pick(0, 5);
    const int64_t span = (r.count - 1) * r.stride + r.length;
    r.begin = pick(0, std::max<int64_t>(0, s - span));
    return r;
  };
  for (int iter = 0; iter < 20000; ++iter) {
    const int64_t s = 64;
    std::vector<int64_t> lengths;
    for (int64_t left = s; left > 0;) {
      const int64_t len = std::min(left, pick(1, 20));
      lengths.push_back(len);
      left -= len;
    }
    const Documents docs =
        pick(0, 4) == 0 ? Documents::single(s) : Documents::from_lengths(lengths);
    const TokenRun a = random_run(s), b = random_run(s);
    ASSERT_EQ(count_pairs(a, b, docs), brute({a}, {b}, docs, s))
        << "a={" << a.begin << "," << a.length << "," << a.stride << "," << a.count << "} b={"
        << b.begin << "," << b.length << "," << b.stride << "," << b.count << "}";
  }
}

TEST(CountPairs, RejectsOverlappingBlocks) {
  EXPECT_THROW(count_pairs(TokenRun{0, 4, 2, 3}, TokenRun{0, 1, 0, 1}, Documents::single(16)),
               std::invalid_argument);
}

TEST(CountPairs, MillionTokensThousandDocumentsIsFast) {
  const int64_t s = 1 << 20;
  std::vector<int64_t> lengths(1000, s / 1000);
  lengths.back() += s - (s / 1000) * 1000;
  const Documents docs = Documents::from_lengths(lengths);
  const auto t0 = std::chrono::steady_clock::now();
  for (Layout layout : {Layout::Contiguous, Layout::ZigZag, Layout::Striped}) {
    const RingTable t = ring_table(make_partition(s, 8, layout), docs);
    const int64_t sum = std::accumulate(t.per_rank.begin(), t.per_rank.end(), int64_t{0});
    EXPECT_EQ(sum, total_pairs(docs));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 1.0);  // generous: it takes milliseconds; token enumeration would take hours
}

TEST(CountPairs, HugeSequencesStayExactOrThrow) {
  // s = 2^31, one document: s(s+1)/2 fits int64; the per-rank split still sums exactly.
  const int64_t s = int64_t{1} << 31;
  const RingTable t = ring_table(make_partition(s, 8, Layout::Striped), Documents::single(s));
  int64_t sum = 0;  // s(s+1)/2 is about 2^61: no partial sum overflows
  for (int64_t v : t.per_rank) sum += v;
  EXPECT_EQ(sum, total_pairs(Documents::single(s)));
  // s = 2^40: 2^79 pairs cannot be returned as int64
  EXPECT_THROW(total_pairs(Documents::single(int64_t{1} << 40)), std::overflow_error);
  const int64_t big = int64_t{1} << 40;
  const Partition p = make_partition(big, 8, Layout::Striped);
  const Documents halves{{0, big / 2}, big};  // two documents of 2^39: 2^76 pairs each
  EXPECT_THROW(count_pairs(p.chunks[0], p.chunks[0], halves), std::overflow_error);
  // 2^20 documents of 2^20 tokens: rank 0 holds c = 2^17 tokens of each, c(c+1)/2 pairs each
  Documents many;
  many.seq_len = big;
  for (int64_t k = 0; k < (int64_t{1} << 20); ++k) many.starts.push_back(k << 20);
  const int64_t c = int64_t{1} << 17;
  EXPECT_EQ(count_pairs(p.chunks[0], p.chunks[0], many), (int64_t{1} << 20) * (c * (c + 1) / 2));
}

}  // namespace CPSIM_TEST_TU
