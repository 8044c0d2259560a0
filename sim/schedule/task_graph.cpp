#include "schedule/task_graph.hpp"

#include <algorithm>
#include <array>
// Boost.Graph's graphviz writer trips GCC's -Wmaybe-uninitialized inside Boost at -O2.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>
#include <sstream>
#include <stdexcept>

namespace cpsim::schedule {

const char* stream::name(uint16_t s) {
  switch (s) {
    case kCompute: return "compute";
    case kHost: return "host";
    case kOffload: return "offload";
    case kCpSend: return "cp-send";
    case kCpRecv: return "cp-recv";
    case kTpSend: return "tp-send";
    case kTpRecv: return "tp-recv";
    case kDpSend: return "dp-send";
    case kDpRecv: return "dp-recv";
    case kPpSend: return "pp-send";
    case kPpRecv: return "pp-recv";
    case kPpGradSend: return "pp-grad-send";
    case kPpGradRecv: return "pp-grad-recv";
    case kCpGradSend: return "cp-dkv-send";
    case kCpGradRecv: return "cp-dkv-recv";
    case kCpOuterSend: return "cp-outer-send";
    case kCpOuterRecv: return "cp-outer-recv";
    case kCpOuterGradSend: return "cp-outer-dkv-send";
    case kCpOuterGradRecv: return "cp-outer-dkv-recv";
    case kEpSend: return "ep-send";
    case kEpRecv: return "ep-recv";
    default: return "stream";
  }
}

OpId TaskGraph::add(const Op& op) {
  if (finalized_) throw std::logic_error("TaskGraph::add after finalize");
  if (over_limit(ops_.size() + 1, size_ - ops_.size()))
    throw OpLimitExceeded("the task graph passed " + std::to_string(op_limit_) + " ops while being built");
  ops_.push_back(op);
  num_ranks_ = std::max({num_ranks_, op.rank + 1, op.peer + 1});
  const auto id = static_cast<OpId>(size_++);
  if (!bystander_.empty() && !op.unordered) {
    note_tail(op.rank, op.stream, id);
    if (op.kind == OpKind::Transfer) note_tail(op.peer, op.peer_stream, id);
  }
  return id;
}

void TaskGraph::set_bystanders(std::vector<uint8_t> mask) {
  if (finalized_ || size_ > 0) throw std::logic_error("TaskGraph::set_bystanders: set before the first op");
  bystander_ = std::move(mask);
  tails_.assign(bystander_.size() * kTailStreams, kNoOp);
}

void TaskGraph::note_tail(int rank, uint16_t stream, OpId id) {
  if (!bystander(rank)) return;
  if (stream >= kTailStreams)
    throw std::logic_error("TaskGraph: bystander GPU " + std::to_string(rank) + " on stream " +
                           std::to_string(stream) + ", past the streams it remembers");
  tails_[static_cast<size_t>(rank) * kTailStreams + stream] = id;
}

OpId TaskGraph::bystander_tail(int rank, uint16_t stream) const {
  if (!bystander(rank) || stream >= kTailStreams) return kNoOp;
  return tails_[static_cast<size_t>(rank) * kTailStreams + stream];
}

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

Op& TaskGraph::op_mut(OpId id) {
  const size_t i = stored_index(id);
  if (i == SIZE_MAX) throw std::logic_error("TaskGraph::op_mut: op " + std::to_string(id) + " is a copy");
  return ops_[i];
}

OpId TaskGraph::add_compute(int rank, uint16_t stream, double duration_s, const OpLabel& label,
                            double flops) {
  Op op;
  op.kind = OpKind::Compute;
  op.rank = rank;
  op.stream = stream;
  op.duration_s = duration_s;
  op.flops = flops;
  op.label = label;
  return add(op);
}

OpId TaskGraph::add_priced(int rank, uint16_t stream, double nominal_s, const OpLabel& label,
                           double flops) {
  const OpId id = add_compute(rank, stream, nominal_s, label, flops);
  ops_.back().noisy = true;  // just added: the last stored op
  return id;
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

bool TaskGraph::add_pipeline(OpId first, OpId last) {
  if (finalized_) throw std::logic_error("TaskGraph::add_pipeline after finalize");
  if (last > size_ || last < first + 2) return false;
  if (!pipelines_.empty() && pipelines_.back().first + pipelines_.back().count > first) return false;
  const Op a = op(first);
  for (OpId i = first; i < last; ++i) {
    const Op o = op(i);
    if (o.kind != OpKind::Transfer || !o.unordered || o.rank == o.peer || o.max_rate_Bps > 0 ||
        o.bytes != a.bytes)
      return false;
  }
  pipelines_.push_back({first, static_cast<uint32_t>(last - first)});
  return true;
}

void TaskGraph::set_phantom_ranks(const std::vector<int32_t>& twin) {
  phantoms_ = Phantoms();
  for (int32_t t : twin) phantoms_.state.push_back(t >= 0 ? Phantoms::kUnseen : Phantoms::kReal);
  phantoms_.twin = twin;
  phantoms_.history.assign(twin.size(), 0);
}

uint32_t TaskGraph::pipeline_of(OpId id) const {
  auto it = std::upper_bound(pipelines_.begin(), pipelines_.end(), id,
                             [](OpId v, const Pipeline& p) { return v < p.first; });
  if (it == pipelines_.begin()) return UINT32_MAX;
  --it;
  return id < it->first + it->count ? static_cast<uint32_t>(it - pipelines_.begin()) : UINT32_MAX;
}

OpId TaskGraph::add_transfer(int src, uint16_t src_stream, int dst, uint16_t dst_stream,
                             double bytes, const OpLabel& label, double max_rate_Bps,
                             double extra_latency_s, bool unordered) {
  Op op;
  op.kind = OpKind::Transfer;
  op.unordered = unordered;
  op.rank = src;
  op.stream = src_stream;
  op.peer = dst;
  op.peer_stream = dst_stream;
  op.bytes = bytes;
  op.max_rate_Bps = max_rate_Bps;
  op.extra_latency_s = extra_latency_s;
  op.label = label;
  return add(op);
}

void TaskGraph::add_edge(OpId before, OpId after) {
  if (before == kNoOp || after == kNoOp || before == after) return;
  if (finalized_) throw std::logic_error("TaskGraph::add_edge after finalize");
  for (const CopiedSource& cs : copied_sources_)
    if (before >= cs.first && before < cs.last && after >= cs.first && after < cs.last)
      throw std::logic_error("TaskGraph::add_edge: inside a range already copied (its copies would miss it)");
  backward_edge_ = backward_edge_ || after < before;
  edge_from_.push_back(before);
  edge_to_.push_back(after);
}

uint32_t TaskGraph::intern(std::string_view s) {
  RecentIntern& r = recent_[(reinterpret_cast<uintptr_t>(s.data()) >> 3) % std::size(recent_)];
  if (r.data == s.data() && r.size == s.size() && r.id < strings_.size() && std::string_view(strings_[r.id]) == s)
    return r.id;
  uint32_t id;
  if (auto it = string_ids_.find(s); it != string_ids_.end()) {
    id = it->second;
  } else {
    id = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(s);
    string_ids_.emplace(std::string(s), id);
  }
  r = {s.data(), s.size(), id};
  return id;
}

uint32_t TaskGraph::interned(std::string_view s) const {
  auto it = string_ids_.find(s);
  return it == string_ids_.end() ? UINT32_MAX : it->second;
}

int32_t TaskGraph::add_shape(const KernelShape& s) {
  shapes_.push_back(s);
  return static_cast<int32_t>(shapes_.size() - 1);
}

std::string TaskGraph::describe(OpId id) const {
  const Op op = this->op(id);
  const OpLabel& l = op.label;
  std::ostringstream os;
  if (l.layer >= 0) os << "L" << l.layer << ' ';
  if (l.micro >= 0) os << "mb" << l.micro << ' ';
  if (l.phase == Phase::Forward) os << "fwd ";
  if (l.phase == Phase::Backward) os << "bwd ";
  if (l.phase == Phase::Optimizer) os << "opt ";
  if (l.scheme) os << strings_[l.scheme] << ' ';
  if (l.step >= 0) os << "step " << l.step << ' ';
  os << strings_[l.name];
  if (l.chunk_q >= 0) os << " q" << l.chunk_q << "/kv" << l.chunk_kv;
  if (op.kind == OpKind::Transfer)
    os << " [r" << op.rank << "->r" << op.peer << "]";
  else
    os << " [r" << op.rank << "]";
  return os.str();
}

std::string TaskGraph::to_dot() const {
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  G g(size_);
  if (!finalized_)
    for (size_t e = 0; e < edge_from_.size(); ++e) boost::add_edge(edge_from_[e], edge_to_[e], g);
  else  // finalize() keeps the edges in CSR form only
    for (OpId id = 0; id < size_; ++id)
      for_each_succ(id, [&](OpId s) { boost::add_edge(id, s, g); });
  std::ostringstream os;
  boost::write_graphviz(os, g, [&](std::ostream& out, const auto& v) {
    out << "[label=\"" << describe(static_cast<OpId>(v)) << "\"]";
  });
  return os.str();
}

}  // namespace cpsim::schedule
#pragma GCC diagnostic pop
