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
/// Buckets >= 1 hold groups, each the events of one time in blocks, so a spread moves a group
/// rather than its events: on the 70B full replay cut to 16 layers 98 % of 7.6 M pushes found
/// their time's group already open (a hashed cache of the groups last opened), and the events
/// had moved ~3 times each before (the replay's instructions, counted: 7.01 -> 6.54 G). Groups
/// as linked lists of single events cost more wall time than they saved (a miss per event:
/// replay median 4.71 s against 4.58 s with events moved, five runs each alternating); in
/// blocks of 15, 4.40 s against 4.68 s (nine runs each).
/// What the groups save, whole process on the 70B full replay (1,024 GPUs, symmetry off), four
/// pairs alternating on a shared 2-core machine at load ~5: without them 1.08-1.19x the wall
/// time (median 1.14x), CPU median 1.06x; JSON identical. (At load ~16 the same comparison was
/// lost in noise: 0.81-1.49x.)
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
      b0_.insert(std::upper_bound(b0_.begin(), b0_.end(), e, ByOpDescending{}), e);
      return;
    }
    Recent& r = recent_[(k ^ (k >> 17)) & (kRecent - 1)];
    if (r.key == k && groups_[r.group].key == k && groups_[r.group].head != kNil) {
      append(groups_[r.group], e);  // (any queued group of this time will do)
      return;
    }
    const uint32_t g = group(k);
    append(groups_[g], e);
    r = {k, g};
    b_[b].push_back(g);
    min_key_[b] = std::min(min_key_[b], k);
    full_ |= uint64_t{1} << (b - 1);
  }

  /// The earliest event (the queue must not be empty).
  const E& top() {
    if (!past_.empty()) return past_.top();
    if (b0_.empty()) spread();
    return b0_.back();
  }

  void pop() {
    --size_;
    if (!past_.empty()) {
      past_.pop();
      return;
    }
    if (b0_.empty()) spread();
    b0_.pop_back();
  }

 private:
  struct ByOpDescending {
    bool operator()(const E& a, const E& b) const { return a.op > b.op; }
  };
  static constexpr uint64_t kNoKey = std::numeric_limits<uint64_t>::max();
  static constexpr uint32_t kNil = std::numeric_limits<uint32_t>::max();
  static uint64_t key(double t) {
    if (t != t) return kNoKey;  // NaN: after every time
    const double p = t + 0.0;   // -0.0 -> +0.0
    uint64_t k;
    std::memcpy(&k, &p, sizeof k);
    return k;
  }
  int bucket(uint64_t k) const { return k == last_ ? 0 : 64 - std::countl_zero(k ^ last_); }

  /// A group's events, in the order they came, in blocks of a few cache lines: appended at the
  /// group's last block, read in order when the group's time comes (a list of single events
  /// was slower than moving the events themselves: a cache miss per event).
  static constexpr uint32_t kPerBlock = (256 - 8) / sizeof(E);
  struct Block {
    E e[kPerBlock];
    uint32_t n;
    uint32_t next;  ///< the group's next block, or the next free one
  };
  struct Group {
    uint64_t key;
    uint32_t head, tail;  ///< blocks; head kNil: free (next free group in tail)
  };
  uint32_t block() {
    uint32_t b = free_block_;
    if (b != kNil) {
      free_block_ = blocks_[b].next;
    } else {
      b = static_cast<uint32_t>(blocks_.size());
      blocks_.emplace_back();
    }
    blocks_[b].n = 0;
    blocks_[b].next = kNil;
    return b;
  }
  void append(Group& gr, const E& e) {
    Block* t = &blocks_[gr.tail];
    if (t->n == kPerBlock) {
      const uint32_t b = block();  // (may move blocks_)
      t = &blocks_[gr.tail];
      t->next = b;
      gr.tail = b;
      t = &blocks_[b];
    }
    t->e[t->n++] = e;
  }
  uint32_t group(uint64_t k) {
    const uint32_t first = block();
    uint32_t g = free_group_;
    if (g != kNil) {
      free_group_ = groups_[g].tail;
      groups_[g] = {k, first, first};
    } else {
      g = static_cast<uint32_t>(groups_.size());
      groups_.push_back({k, first, first});
    }
    return g;
  }

  /// Bucket 0 and past_ are empty: the lowest non-empty bucket's smallest key becomes the last
  /// time, and its groups move to lower buckets (the events of that time to bucket 0, by op).
  void spread() {
    const int from = std::countr_zero(full_) + 1;  // (scanning up to it was 1.4 % of a replay)
    std::vector<uint32_t>& v = b_[from];
    last_ = min_key_[from];
    min_key_[from] = kNoKey;
    full_ &= ~(uint64_t{1} << (from - 1));
    for (const uint32_t g : v) {
      Group& gr = groups_[g];
      const int b = bucket(gr.key);
      if (b != 0) {
        b_[b].push_back(g);
        min_key_[b] = std::min(min_key_[b], gr.key);
        full_ |= uint64_t{1} << (b - 1);
        continue;
      }
      for (uint32_t k = gr.head; k != kNil;) {
        Block& bl = blocks_[k];
        b0_.insert(b0_.end(), bl.e, bl.e + bl.n);
        const uint32_t next = bl.next;
        bl.next = free_block_;
        free_block_ = k;
        k = next;
      }
      gr.head = kNil;
      gr.tail = free_group_;
      free_group_ = g;
    }
    v.clear();
    std::sort(b0_.begin(), b0_.end(), ByOpDescending{});
  }

  /// Bucket 0: the events at the last time looked at, sorted by op (the last the smallest).
  std::vector<E> b0_;
  /// Buckets 1-64: groups (one time each) by the highest bit where their time differs from it.
  std::array<std::vector<uint32_t>, 65> b_{};
  std::array<uint64_t, 65> min_key_ = filled();
  static std::array<uint64_t, 65> filled() {
    std::array<uint64_t, 65> a;
    a.fill(kNoKey);
    return a;
  }
  std::vector<Block> blocks_;
  std::vector<Group> groups_;
  uint32_t free_block_ = kNil, free_group_ = kNil;
  /// The group last opened per time, hashed: events of one time come in runs (eight replicas
  /// in step queue the same ends one after another), and a miss only opens another group.
  static constexpr size_t kRecent = 256;
  /// (No time's key: those of negative times, which wait in past_.)
  static constexpr uint64_t kNoRecent = uint64_t{1} << 63 | 1;
  struct Recent {
    uint64_t key = kNoRecent;
    uint32_t group = 0;
  };
  std::array<Recent, kRecent> recent_{};
  uint64_t last_ = 0;
  uint64_t full_ = 0;  ///< bit b - 1: bucket b >= 1 holds events
  size_t size_ = 0;
  std::priority_queue<E, std::vector<E>, Later> past_{};
};

}  // namespace cpsim::engine::detail
