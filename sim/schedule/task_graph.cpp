// TaskGraph's storage: adding ops, edges, pipelines and strings, and the build hints.
#include "schedule/task_graph.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace cpsim::schedule {

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

}  // namespace cpsim::schedule
