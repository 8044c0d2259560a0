#include "report/intervals.hpp"

#include <algorithm>
#include <functional>
#include <iterator>

#include "support/run_sort.hpp"

namespace cpsim::report {

Intervals merged(Intervals v) {
  // A rank's intervals come as a few sorted lists shuffled (its streams): see run_sort.hpp.
  thread_local support::RunSortScratch<std::pair<double, double>> scratch;
  support::sort_runs(v, std::less<>(), scratch);
  Intervals out;
  for (const auto& iv : v) {
    if (iv.second <= iv.first) continue;
    if (!out.empty() && iv.first <= out.back().second)
      out.back().second = std::max(out.back().second, iv.second);
    else
      out.push_back(iv);
  }
  return out;
}

void add_interval(Intervals& v, double s, double e) {
  // In time order (a stream's ops, mostly), an interval that starts inside the last one only
  // extends it: the union, which is all merged() keeps, is the same. Empty ones it drops.
  if (!(s < e)) {
    if (!(e <= s)) v.push_back({s, e});  // (NaN: kept for merged() to see, as before)
    return;
  }
  if (!v.empty() && s >= v.back().first && s <= v.back().second) {
    if (e > v.back().second) v.back().second = e;
    return;
  }
  constexpr size_t kMergeFrom = 512;
  if (v.size() >= kMergeFrom && v.size() == v.capacity()) {
    v = merged(std::move(v));
    v.reserve(std::max(kMergeFrom, 2 * v.size()));
  }
  v.push_back({s, e});
}

double measure(const Intervals& v) {
  double s = 0;
  for (const auto& iv : v) s += iv.second - iv.first;
  return s;
}

/// |a \ b| for merged interval lists.
double measure_minus(const Intervals& a, const Intervals& b) {
  double s = 0;
  size_t j = 0;
  for (const auto& iv : a) {
    double cur = iv.first;
    while (j < b.size() && b[j].second <= cur) ++j;
    size_t k = j;
    while (k < b.size() && b[k].first < iv.second) {
      if (b[k].first > cur) s += b[k].first - cur;
      cur = std::max(cur, b[k].second);
      ++k;
    }
    if (cur < iv.second) s += iv.second - cur;
  }
  return s;
}

Intervals unite(const Intervals& a, const Intervals& b) {
  // Merged lists are sorted: merging them keeps the result sorted, so merged() only joins.
  Intervals v;
  v.reserve(a.size() + b.size());
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(v));
  return merged(std::move(v));
}

}  // namespace cpsim::report
