#pragma once
/// Sorting a list that is a few sorted lists shuffled together: one rank's transfers in id
/// order (its send and receive streams interleaved, each in start order), its kernels and host
/// overheads. std::sort ignores that order: on the 70B full replay (1,024 ranks) the report's
/// interval lists sorted 17 M entries, 21 % of them out of order, and sorts were ~15 % of
/// the report's samples (perf).
///
/// Here each element goes to the first of a few runs (kept with their last elements in
/// decreasing order) that it extends, which finds as many runs as the longest decreasing
/// subsequence (patience sorting): a shuffle of k sorted lists gives k runs at most. The runs are
/// then merged pairwise, O(n log k). Beyond kMaxRuns it falls back to std::sort. The order is
/// the same as std::sort's wherever `less` is a total order (no two elements equivalent), as
/// for its callers; else equivalent elements may come in another order.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace cpsim::support {

template <class T>
struct RunSortScratch {
  std::vector<T> buf;
  std::vector<uint8_t> run;
};

template <class T, class Less>
void sort_runs(std::vector<T>& v, Less less, RunSortScratch<T>& s) {
  constexpr size_t kMaxRuns = 16;
  const size_t n = v.size();
  if (n < 2) return;
  // Each element's run, and each run's length.
  T last[kMaxRuns];
  size_t len[kMaxRuns] = {};
  size_t runs = 0;
  s.run.resize(n);
  for (size_t i = 0; i < n; ++i) {
    size_t r = 0;
    while (r < runs && less(v[i], last[r])) ++r;
    if (r == runs) {
      if (runs == kMaxRuns) {
        std::sort(v.begin(), v.end(), less);
        return;
      }
      ++runs;
    }
    last[r] = v[i];
    ++len[r];
    s.run[i] = static_cast<uint8_t>(r);
  }
  if (runs == 1) return;
  // The runs laid out one after another (each keeps its order), then merged pairwise between
  // the two buffers until one is left.
  size_t at[kMaxRuns + 1] = {};
  for (size_t r = 0; r < runs; ++r) at[r + 1] = at[r] + len[r];
  s.buf.resize(n);
  {
    size_t put[kMaxRuns];
    std::copy(at, at + runs, put);
    for (size_t i = 0; i < n; ++i) s.buf[put[s.run[i]]++] = v[i];
  }
  T* from = s.buf.data();
  T* to = v.data();
  while (runs > 1) {
    size_t r = 0, out = 0;
    for (; r + 1 < runs; r += 2) {
      std::merge(from + at[r], from + at[r + 1], from + at[r + 1], from + at[r + 2], to + at[r], less);
      at[out++] = at[r];
    }
    if (r < runs) {
      std::copy(from + at[r], from + at[r + 1], to + at[r]);
      at[out++] = at[r];
    }
    at[out] = n;
    runs = out;
    std::swap(from, to);
  }
  if (from != v.data()) std::copy(from, from + n, v.data());
}

}  // namespace cpsim::support
