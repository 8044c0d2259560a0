#pragma once
// TaskGraph's inline walks, out of task_graph.hpp's class body: from a copied op (copy_ops) to
// the stored op it copies and to its neighbours, and over the ops in id order. Inline because
// they are the replay's and the report's per-op hot paths: every start and end of the 70B full
// replay's 24.3 M ops walks a successor list and a wait count, and the report's passes call
// for_each_op_in once per op (a call through a function pointer per op there would be 24 M
// calls a pass). Included at the end of task_graph.hpp only.
#include <algorithm>

#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

inline TaskGraph::CopyChain TaskGraph::chain(OpId id) const {
  CopyChain ch;
  ch.depth = 0;
  ch.at[0] = id;
  for (;;) {
    if (id < copies_.front().base) {
      ch.stored = id;
      return ch;
    }
    const CopyRange* it = range_of(id);
    if (id - it->base >= it->count) {
      ch.stored = id - it->copied_before - it->count;
      return ch;
    }
    if (ch.depth == kMaxCopyDepth) too_deep();
    ch.hop[ch.depth] = it;
    id = it->src + (id - it->base);
    ch.at[++ch.depth] = id;
  }
}

inline const TaskGraph::CopyRange* TaskGraph::range_of(OpId id) const {
  if (id >= copies_.back().base) return &copies_.back();
  size_t k = range_block_[(id - copies_.front().base) >> kRangeBlockShift];
  while (copies_[k + 1].base <= id) ++k;
  return &copies_[k];
}

template <class F>
void TaskGraph::one_hop_neighbours(int dir, const CopyRange& c, OpId id, F&& f) const {
  const OpId k = id - c.base, stored = c.src + k;
  const OpId* to = edge_csr_[dir].data();
  const auto& off = edge_off_[dir];
  for (uint32_t e = off[stored]; e < off[stored + 1]; ++e)
    if (const OpId t = to[e] - c.src; t < c.count) f(t + c.base);  // (one outside the range: not the copy's)
  if (extra_flag(dir, id)) {
    const auto& ex = extra_[dir];
    for (auto it = std::lower_bound(ex.begin(), ex.end(), std::pair<OpId, OpId>{id, 0}); it != ex.end() && it->first == id; ++it)
      f(it->second);
  }
  for (int side = 0; side < 2; ++side) {
    const OpId t = qlink_[dir][side][stored];
    if (t == kNotQueued) continue;
    if (t != kNoOp && t - c.src < c.count) {
      f(t - c.src + c.base);
    } else if (const OpId own = own_queue_link(id, side, dir); own != kNoOp) {
      f(own);
    }
  }
}

template <class F>
void TaskGraph::chain_edges(int dir, const CopyChain& ch, F&& f) const {
  auto emit = [&](OpId t, int level) {
    for (int j = level - 1; j >= 0; --j) {
      const CopyRange& h = *ch.hop[j];
      if (t < h.src || t - h.src >= h.count) return;
      t = t - h.src + h.base;
    }
    f(t);
  };
  const auto& off = edge_off_[dir];
  const OpId* to = edge_csr_[dir].data();
  for (uint32_t e = off[ch.stored]; e < off[ch.stored + 1]; ++e) emit(to[e], ch.depth);
  for (int j = ch.depth - 1; j >= 0; --j) {
    if (!extra_flag(dir, ch.at[j])) continue;
    const auto& ex = extra_[dir];
    auto it = std::lower_bound(ex.begin(), ex.end(), std::pair<OpId, OpId>{ch.at[j], 0});
    for (; it != ex.end() && it->first == ch.at[j]; ++it) emit(it->second, j);
  }
}

inline const Op& TaskGraph::stored_op(OpId id, int32_t& shift) const {
  shift = 0;
  if (copies_.empty()) return ops_[id];
  while (id >= copies_.front().base) {  // (chain()'s walk, without keeping the chain)
    const CopyRange* it = range_of(id);
    if (id - it->base >= it->count) return ops_[id - it->copied_before - it->count];
    shift += it->rank_offset;
    id = it->src + (id - it->base);
  }
  return ops_[id];
}

template <class F>
void TaskGraph::for_each_op_in(OpId lo, OpId hi, F&& f, int r0, int r1) const {
  hi = static_cast<OpId>(std::min<size_t>(hi, size_));
  OpId id = lo;
  size_t copied = 0;  // ops copied before id's stretch of stored ops
  for (const CopyRange& c : copies_) {
    if (id >= hi) return;
    for (; id < c.base && id < hi; ++id) f(id, static_cast<const Op&>(ops_[id - c.copied_before]));
    const OpId end = static_cast<OpId>(std::min<size_t>(size_t{c.base} + c.count, hi));
    if (c.max_rank < r0 || c.min_rank >= r1) id = std::max(id, end);
    if (id < end) {
      const size_t first = stored_index(c.src);
      const bool flat = first != SIZE_MAX && std::none_of(copies_.begin(), copies_.end(), [&](const CopyRange& o) {
        return o.base >= c.src && o.base < c.src + c.count;
      });
      for (; id < end; ++id) {
        const uint32_t k = id - c.base;
        Op o = flat ? static_cast<const Op&>(ops_[first + k]) : op(c.src + k);
        o.rank += c.rank_offset;
        if (o.peer >= 0) o.peer += c.rank_offset;
        f(id, static_cast<const Op&>(o));
      }
    }
    copied = c.copied_before + c.count;
  }
  for (; id < hi; ++id) f(id, static_cast<const Op&>(ops_[id - copied]));
}

template <class S, class C>
void TaskGraph::for_each_stretch(S&& stored, C&& copied) const {
  OpId id = 0;
  for (const CopyRange& c : copies_) {
    if (id < c.base) stored(id, c.base);
    copied(c.base, c.count, c.src, c.rank_offset);
    id = c.base + c.count;
  }
  if (id < size_) stored(id, static_cast<OpId>(size_));
}

template <class F>
void TaskGraph::for_each_successor(OpId id, F&& f) const {
  if (before_copies(id)) {
    for_each_edge(0, id, f);
    for (int side = 0; side < 2; ++side)
      if (const OpId s = qlink_[0][side][id]; s < kNotQueued) f(s);
    return;
  }
  if (const CopyRange* c = one_hop(id)) return one_hop_neighbours(0, *c, id, f);
  const CopyChain ch = chain(id);  // (once for the edges and both queues)
  chain_edges(0, ch, f);
  for (int side = 0; side < 2; ++side)
    if (const OpId s = chain_queue_link(ch, side, 0); s != kNoOp) f(s);
}

inline uint32_t TaskGraph::waits_on(OpId id) const {
  uint32_t w = 0;
  auto count = [&](OpId) { ++w; };
  if (before_copies(id)) {
    for_each_edge(1, id, count);
    for (int side = 0; side < 2; ++side) w += qlink_[1][side][id] < kNotQueued;
    return w;
  }
  if (const CopyRange* c = one_hop(id)) {
    one_hop_neighbours(1, *c, id, count);
    return w;
  }
  const CopyChain ch = chain(id);
  chain_edges(1, ch, count);
  for (int side = 0; side < 2; ++side) w += chain_queue_link(ch, side, 1) != kNoOp;
  return w;
}

}  // namespace cpsim::schedule
