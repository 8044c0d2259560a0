// TaskGraph::copy_ops: a data-parallel replica appended as a range that reads its original's
// ops on shifted ranks, and the reads that resolve a copied op to the op it copies.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

size_t TaskGraph::stored_index(OpId id) const {
  if (before_copies(id)) return id;
  const CopyChain ch = chain(id);
  return ch.depth == 0 ? ch.stored : SIZE_MAX;
}

Op TaskGraph::copied_op(OpId id) const {
  int32_t shift;  // (a copy of copies resolves to a stored op)
  Op o = stored_op(id, shift);
  o.rank += shift;
  if (o.peer >= 0) o.peer += shift;
  return o;
}

OpId TaskGraph::copy_ops(OpId first, OpId last, size_t edge_first, size_t edge_last, int rank_offset) {
  if (finalized_) throw std::logic_error("TaskGraph::copy_ops after finalize");
  const OpId base = static_cast<OpId>(size_);
  if (last <= first) return base;
  if (over_limit(ops_.size(), size_ - ops_.size() + (last - first)))
    throw OpLimitExceeded("the task graph passed " + std::to_string(op_limit_) + " ops while being built");
  if (edge_last > edge_from_.size() || edge_first > edge_last)
    throw std::logic_error("TaskGraph::copy_ops: edges past those added");
  // The copy reads its original's edges (finalize): [edge_first, edge_last) must be every edge
  // added so far between ops of the range, and none may be added there later (add_edge).
  const std::array<size_t, 4> range{first, last, edge_first, edge_last};
  if (range != last_copied_range_) {  // (once copied, no edge can join the range: add_edge)
    for (size_t e = 0; e < edge_from_.size(); ++e) {
      const OpId a = edge_from_[e], b = edge_to_[e];
      const bool in = a >= first && a < last && b >= first && b < last;
      if (in != (e >= edge_first && e < edge_last))
        throw std::logic_error(in ? "TaskGraph::copy_ops: an edge inside the copied range is not among those copied"
                                  : "TaskGraph::copy_ops: an edge leaves the copied range");
    }
    last_copied_range_ = range;
  }
  size_t internal = edge_last - edge_first;
  // Copies inside the range bring their own copied edges; one straddling its end is not a copy.
  for (const CopyRange& c : copies_) {
    const bool inside = c.base >= first && c.base + c.count <= last;
    const bool apart = c.base + c.count <= first || c.base >= last;
    if (!inside && !apart) throw std::logic_error("TaskGraph::copy_ops: the range cuts an earlier copy");
    if (inside) internal += c.internal_edges;
  }
  const size_t copied = copies_.empty() ? 0 : copies_.back().copied_before + copies_.back().count;
  copies_.push_back({base, last - first, first, rank_offset, copied, internal, INT32_MAX, INT32_MIN});
  index_copies();
  size_ += last - first;
  // The range's ranks, read once per source range (the 70B full replay copies one range of
  // 3.0 M ops seven times: reading it per copy was 8 % of its build's samples).
  auto src = std::find_if(copied_sources_.begin(), copied_sources_.end(),
                          [&](const CopiedSource& cs) { return cs.first == first && cs.last == last; });
  if (src == copied_sources_.end()) {
    CopiedSource cs{first, last};
    for (OpId i = first; i < last; ++i) {
      const Op o = op(i);
      cs.lo = std::min({cs.lo, o.rank, o.peer >= 0 ? o.peer : INT32_MAX});
      cs.hi = std::max({cs.hi, o.rank, o.peer});
    }
    src = copied_sources_.insert(copied_sources_.end(), cs);
  }
  CopyRange& c = copies_.back();
  c.min_rank = src->lo + rank_offset;  // (a range holds an op: lo <= hi)
  c.max_rank = src->hi + rank_offset;
  num_ranks_ = std::max(num_ranks_, c.max_rank + 1);
  if (!bystander_.empty())
    for (OpId i = first; i < last; ++i) {
      const Op o = op(i);
      if (bystander(o.rank + rank_offset) || (o.peer >= 0 && bystander(o.peer + rank_offset)))
        throw std::logic_error("TaskGraph::copy_ops: a copy lands on bystander GPU " +
                               std::to_string(o.rank + rank_offset) + " (its stream tails would be stale)");
    }
  // The copied range's pipelines, in order (they end before the copies begin).
  auto it = std::lower_bound(pipelines_.begin(), pipelines_.end(), first,
                             [](const Pipeline& p, OpId id) { return p.first < id; });
  std::vector<Pipeline> copies;
  for (; it != pipelines_.end() && it->first + it->count <= last; ++it)
    copies.push_back({it->first - first + base, it->count});
  pipelines_.insert(pipelines_.end(), copies.begin(), copies.end());
  return base;
}

}  // namespace cpsim::schedule
