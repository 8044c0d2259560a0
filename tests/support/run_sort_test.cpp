// sort_runs (support/run_sort.hpp) sorts a list made of a few sorted lists shuffled together by
// finding those runs and merging them, and falls back to std::sort past 16 runs. Held against
// std::sort on shuffles of 1 to 40 sorted lists (so both paths run), on lists with ties, and
// on a comparator that orders by one field and breaks ties by another (WaitCharges' order).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "support/run_sort.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::support::RunSortScratch;
using cpsim::support::sort_runs;
using Pair = std::pair<double, double>;

namespace {

/// `lists` sorted lists of random lengths, their elements dealt out in a random interleaving.
std::vector<Pair> shuffled_runs(std::mt19937& rng, int lists, bool ties) {
  std::vector<std::vector<Pair>> src(static_cast<size_t>(lists));
  std::uniform_int_distribution<int> len(0, 60), val(0, ties ? 20 : 1000000);
  for (auto& l : src) {
    l.resize(static_cast<size_t>(len(rng)));
    for (auto& p : l) p = {val(rng), val(rng)};
    std::sort(l.begin(), l.end());
  }
  std::vector<Pair> out;
  std::vector<size_t> at(src.size(), 0);
  for (;;) {
    std::vector<size_t> open;
    for (size_t i = 0; i < src.size(); ++i)
      if (at[i] < src[i].size()) open.push_back(i);
    if (open.empty()) return out;
    const size_t i = open[std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng)];
    out.push_back(src[i][at[i]++]);
  }
}

}  // namespace

TEST(RunSort, ShufflesOfSortedListsComeOutAsStdSortPutsThem) {
  std::mt19937 rng(7);
  RunSortScratch<Pair> scratch;  // reused across calls, as the report's threads do
  for (int lists = 1; lists <= 40; ++lists)
    for (const bool ties : {false, true})
      for (int rep = 0; rep < 5; ++rep) {
        std::vector<Pair> v = shuffled_runs(rng, lists, ties);
        std::vector<Pair> want = v;
        std::sort(want.begin(), want.end());
        sort_runs(v, std::less<>(), scratch);
        ASSERT_EQ(v, want) << lists << " lists, ties " << ties;
      }
}

TEST(RunSort, ReversedAndEmptyListsAndATieBreakingOrder) {
  RunSortScratch<Pair> scratch;
  std::vector<Pair> none;
  sort_runs(none, std::less<>(), scratch);
  EXPECT_TRUE(none.empty());
  std::vector<Pair> down;
  for (int i = 100; i > 0; --i) down.push_back({i, 0});  // 100 runs of one: std::sort's path
  sort_runs(down, std::less<>(), scratch);
  EXPECT_TRUE(std::is_sorted(down.begin(), down.end()));
  // By start, then id: equal starts keep id order whichever run they came in.
  struct E {
    double start;
    int id;
    bool operator==(const E&) const = default;
  };
  auto before = [](const E& a, const E& b) { return a.start != b.start ? a.start < b.start : a.id < b.id; };
  std::vector<E> v = {{1, 5}, {0, 9}, {1, 2}, {2, 1}, {1, 7}, {0, 3}, {3, 0}};
  std::vector<E> want = v;
  std::sort(want.begin(), want.end(), before);
  RunSortScratch<E> es;
  sort_runs(v, before, es);
  EXPECT_EQ(v, want);
}

}  // namespace CPSIM_TEST_TU
