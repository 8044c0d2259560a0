#pragma once
/// Both engines' event queue: the earliest event first, by time then by op (detail::Later's
/// order, so that events at one instant run in an order set by the graph alone).
///
/// Why not std::priority_queue: an event-driven replay only ever queues events at or after the
/// last one it took (a kernel's end, a latency, a transfer's end, all from the clock's now), so
/// a radix heap (Ahuja, Mehlhorn, Orlin & Tarjan 1990; the monotone queue of Dijkstra codes)
/// does it in O(1) per push and a bucket scan per pop amortised over the bits a key drops.
/// On the Llama-3 70B full replay (24.3 M ops, ~40 M events with the kernels interference
/// moved) the binary heap's sift-downs were ~15 % of the whole process's samples.
///
/// Keys are the times' IEEE-754 bits: for non-negative doubles their order is the numbers'.
/// Bucket 0 holds the events at exactly the last time taken, as a heap by op; bucket i >= 1
/// those whose highest bit that differs from that time's is bit i - 1. Taking from an empty
/// bucket 0 finds the earliest event of the lowest non-empty bucket and spreads that bucket over
/// the lower ones. An event queued before the last time taken (float rounding in a caller's
/// arithmetic) or at a negative time waits in a binary heap of its own, taken first: every
/// event in the buckets is later. top() looks without taking, so the last time taken never
/// passes the clock of an engine that peeks ahead (SimGrid's: its Comms end between our events).
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <vector>

#include "engine/replay_common.hpp"

namespace cpsim::engine::detail {

template <class E>
class EventQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void push(const E& e) {
    ++size_;
    const uint64_t k = key(e.t);
    if (!(e.t >= 0 || e.t != e.t) || k < last_) {  // negative, or before the last taken
      past_.push(e);
      return;
    }
    const int b = bucket(k);
    if (b == 0) {
      b_[0].push_back(e);
      std::push_heap(b_[0].begin(), b_[0].end(), ByOp{});
    } else {
      b_[b].push_back(e);
      if (min_ok_ && b <= min_b_ && Later{}(b_[min_b_][min_i_], e)) {
        min_b_ = b;
        min_i_ = b_[b].size() - 1;
      }
    }
  }

  /// The earliest event (the queue must not be empty).
  const E& top() {
    if (!past_.empty()) return past_.top();
    if (!b_[0].empty()) return b_[0].front();
    find_min();
    return b_[min_b_][min_i_];
  }

  void pop() {
    --size_;
    if (!past_.empty()) {
      past_.pop();
      return;
    }
    if (b_[0].empty()) spread();
    std::pop_heap(b_[0].begin(), b_[0].end(), ByOp{});
    b_[0].pop_back();
  }

 private:
  struct ByOp {  // a max-heap's comparator whose top is the smallest op
    bool operator()(const E& a, const E& b) const { return a.op > b.op; }
  };
  static uint64_t key(double t) {
    if (t != t) return std::numeric_limits<uint64_t>::max();  // NaN: after every time
    const double p = t + 0.0;                                   // -0.0 -> +0.0
    uint64_t k;
    std::memcpy(&k, &p, sizeof k);
    return k;
  }
  int bucket(uint64_t k) const { return k == last_ ? 0 : 64 - std::countl_zero(k ^ last_); }

  /// Locates the earliest event of the lowest non-empty bucket (bucket 0 and past_ empty).
  void find_min() {
    if (min_ok_) return;
    int b = 1;
    while (b_[b].empty()) ++b;
    const std::vector<E>& v = b_[b];
    size_t best = 0;
    for (size_t i = 1; i < v.size(); ++i)
      if (Later{}(v[best], v[i])) best = i;
    min_b_ = b;
    min_i_ = best;
    min_ok_ = true;
  }
  /// Takes the earliest time as the last taken and spreads its bucket over the lower ones.
  void spread() {
    find_min();
    min_ok_ = false;
    std::vector<E>& v = b_[min_b_];
    last_ = key(v[min_i_].t);
    for (const E& e : v) {
      const int b = bucket(key(e.t));
      b_[b].push_back(e);
      if (b == 0) std::push_heap(b_[0].begin(), b_[0].end(), ByOp{});
    }
    v.clear();
  }

  std::array<std::vector<E>, 65> b_{};
  uint64_t last_ = 0;
  size_t size_ = 0;
  std::priority_queue<E, std::vector<E>, Later> past_{};
  /// The earliest event's place while bucket 0 is empty, once find_min found it; a push of an
  /// earlier event updates it.
  bool min_ok_ = false;
  int min_b_ = 0;
  size_t min_i_ = 0;
};

}  // namespace cpsim::engine::detail
