#pragma once
/// Both engines' event queue: the earliest event first, by time then by op (detail::Later's
/// order, so that events at one instant run in an order set by the graph alone).
///
/// Why not std::priority_queue: an event-driven replay only ever queues events at or after the
/// last one it took (a kernel's end, a latency, a transfer's end, all from the clock's now), so
/// a radix heap (Ahuja, Mehlhorn, Orlin & Tarjan 1990; the monotone queue of Dijkstra codes)
/// does it in O(1) per push and amortised O(bits a key drops) per event taken.
/// On the Llama-3 70B full replay (24.3 M ops, ~40 M events with the kernels interference
/// moved) the binary heap's sift-downs were ~15 % of the whole process's samples.
///
/// Keys are the times' IEEE-754 bits: for non-negative doubles their order is the numbers'.
/// Bucket 0 holds the events at exactly the last time looked at, sorted by op (the last the
/// smallest); bucket i >= 1 those whose highest bit that differs from that time's is bit
/// i - 1, with its smallest key kept as events come. Looking at the next event when bucket 0 is
/// empty spreads the lowest non-empty bucket over the lower ones from its smallest key. On the
/// 70B full replay ~45 events share each instant (eight identical replicas, rings in step), so
/// bucket 0 is sorted once per instant rather than kept as a heap.
/// Events move one by one when a bucket is spread. Holding each time's events as one group
/// that moves whole (blocks of 15 events, a hashed cache of open groups) saved 7 % of the
/// replay's instructions on the 70B cut to 16 layers (7.01 -> 6.54 G), but not the whole
/// process's time: on the 70B full replay (1,024 GPUs, symmetry off), four pairs alternating
/// on a shared 2-core machine, wall 0.81-1.49x without groups against with them (median
/// 0.97x), CPU median 0.97x, JSON identical; the simpler queue stays.
/// An event queued before that time (SimGrid's engine looks ahead to set its timer, and a Comm
/// that ends sooner queues events before it; or float rounding in a caller's arithmetic) or at
/// a negative time waits in a binary heap of its own, taken first: every event in the buckets
/// is later.
/// Inline, a template over the engine's event type: push and pop are the replay's hottest path.
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
    if (!(e.t >= 0 || e.t != e.t) || k < last_) {  // negative, or before the last time looked at
      past_.push(e);
      return;
    }
    const int b = bucket(k);
    if (b == 0) {  // rare: a zero delay (most such ops complete at once, without an event)
      b_[0].insert(std::upper_bound(b_[0].begin(), b_[0].end(), e, ByOpDescending{}), e);
      return;
    }
    b_[b].push_back(e);
    min_key_[b] = std::min(min_key_[b], k);
    full_ |= uint64_t{1} << (b - 1);
  }

  /// The earliest event (the queue must not be empty).
  const E& top() {
    if (!past_.empty()) return past_.top();
    if (b_[0].empty()) spread();
    return b_[0].back();
  }

  void pop() {
    --size_;
    if (!past_.empty()) {
      past_.pop();
      return;
    }
    if (b_[0].empty()) spread();
    b_[0].pop_back();
  }

 private:
  struct ByOpDescending {
    bool operator()(const E& a, const E& b) const { return a.op > b.op; }
  };
  static constexpr uint64_t kNoKey = std::numeric_limits<uint64_t>::max();
  static uint64_t key(double t) {
    if (t != t) return kNoKey;  // NaN: after every time
    const double p = t + 0.0;   // -0.0 -> +0.0
    uint64_t k;
    std::memcpy(&k, &p, sizeof k);
    return k;
  }
  int bucket(uint64_t k) const { return k == last_ ? 0 : 64 - std::countl_zero(k ^ last_); }

  /// Bucket 0 and past_ are empty: the lowest non-empty bucket's smallest key becomes the last
  /// time, and its events move to lower buckets (those at that time to bucket 0, by op).
  void spread() {
    const int from = std::countr_zero(full_) + 1;  // (scanning up to it was 1.4 % of a replay)
    std::vector<E>& v = b_[from];
    last_ = min_key_[from];
    min_key_[from] = kNoKey;
    full_ &= ~(uint64_t{1} << (from - 1));
    for (const E& e : v) {
      const uint64_t k = key(e.t);
      const int b = bucket(k);
      b_[b].push_back(e);
      if (b != 0) {
        min_key_[b] = std::min(min_key_[b], k);
        full_ |= uint64_t{1} << (b - 1);
      }
    }
    v.clear();
    std::sort(b_[0].begin(), b_[0].end(), ByOpDescending{});
  }

  std::array<std::vector<E>, 65> b_{};
  std::array<uint64_t, 65> min_key_ = filled();
  static std::array<uint64_t, 65> filled() {
    std::array<uint64_t, 65> a;
    a.fill(kNoKey);
    return a;
  }
  uint64_t last_ = 0;
  uint64_t full_ = 0;  ///< bit b - 1: bucket b >= 1 holds events
  size_t size_ = 0;
  std::priority_queue<E, std::vector<E>, Later> past_{};
};

}  // namespace cpsim::engine::detail
