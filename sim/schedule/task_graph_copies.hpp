#pragma once
// TaskGraph's walks from a copied op (copy_ops) to the stored op it copies and to its neighbours,
// out of task_graph.hpp's class body: inline, on every start and end of a full replay's
// copied ops. Included at the end of task_graph.hpp only.
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

}  // namespace cpsim::schedule
