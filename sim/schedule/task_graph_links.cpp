// TaskGraph::finalize and what it builds: explicit edges in CSR form and each op's neighbours on
// its (rank, stream) queues, for stored ops only. A copied op (copy_ops) reads its original's,
// shifted into the copy; only the links that leave a copy are its own.
//
// Why: Llama-3 70B on 1,024 GPUs with every replica replayed is 24.3 M ops of which
// 21.3 M are copies of the first replica. Per op they held 16 B of queue slots, 8 B of CSR
// offsets, ~10 B of edges and ~5 B of queue entries, and the replay read them at random; now
// the eight replicas, which run nearly in step, read one replica's structure.
#include <stdexcept>
#include <string>

#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

void TaskGraph::index_copies() {
  const OpId lo = copies_.front().base, hi = copies_.back().base;
  range_block_.assign(((hi - lo) >> kRangeBlockShift) + 1, 0);
  size_t k = 0;
  for (size_t b = 0; b < range_block_.size(); ++b) {
    const OpId at = lo + static_cast<OpId>(b << kRangeBlockShift);
    while (k + 1 < copies_.size() && copies_[k + 1].base <= at) ++k;
    range_block_[b] = static_cast<uint32_t>(k);
  }
  for (CopyRange& c : copies_) c.one_hop = size_t{c.src} + c.count <= lo;
}

void TaskGraph::too_deep() {
  throw std::logic_error("TaskGraph: copies of copies nested past " + std::to_string(kMaxCopyDepth));
}

namespace {
uint64_t link_key(OpId id, int side, int dir) {
  return static_cast<uint64_t>(id) << 2 | static_cast<uint64_t>(dir) << 1 | static_cast<uint64_t>(side);
}
}  // namespace

OpId TaskGraph::own_queue_link(OpId id, int side, int dir) const {
  auto it = copy_links_.find(link_key(id, side, dir));
  return it == copy_links_.end() ? kNoOp : it->second;
}

OpId TaskGraph::copied_queue_link(OpId id, int side, int dir) const { return chain_queue_link(chain(id), side, dir); }

OpId TaskGraph::chain_queue_link(const CopyChain& ch, int side, int dir) const {
  OpId t = qlink_[dir][side][ch.stored];
  if (t == kNotQueued) return kNoOp;
  // From the stored original out to `id`: a neighbour inside the copied range is the copy's
  // neighbour shifted; one outside it (or none) means the copy's is its own.
  for (int j = ch.depth - 1; j >= 0; --j) {
    const CopyRange& h = *ch.hop[j];
    if (t != kNoOp && t >= h.src && t - h.src < h.count) {
      t = t - h.src + h.base;
    } else {
      auto it = copy_links_.find(link_key(ch.at[j], side, dir));
      t = it == copy_links_.end() ? kNoOp : it->second;
    }
  }
  return t;
}

std::vector<TaskGraph::QueueEnds> TaskGraph::queue_ends(OpId first, OpId count) const {
  std::vector<QueueEnds> ends;
  std::unordered_map<uint64_t, size_t> at;  // rank << 16 | stream -> ends index
  for (OpId k = 0; k < count; ++k) {
    const Op o = op(first + k);
    if (o.unordered) continue;
    for (int side = 0; side < 2; ++side) {
      if (side == 1 && o.kind != OpKind::Transfer) break;
      const int32_t rank = side ? o.peer : o.rank;
      const uint16_t stream = side ? o.peer_stream : o.stream;
      const uint64_t key = static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 16 | stream;
      auto [it, fresh] = at.try_emplace(key, ends.size());
      if (fresh) ends.push_back({rank, stream, static_cast<uint8_t>(side), static_cast<uint8_t>(side), k, k});
      ends[it->second].last = k;
      ends[it->second].last_side = static_cast<uint8_t>(side);
    }
  }
  return ends;
}

void TaskGraph::finalize() {
  if (finalized_) return;
  const size_t n = size_, stored = ops_.size();

  // Explicit edges: a stored end's side goes to the CSR arrays, a copied end's to extra_.
  edges_total_ = edge_from_.size();
  for (const CopyRange& c : copies_) edges_total_ += c.internal_edges;
  for (int dir = 0; dir < 2; ++dir) {
    const auto& key = dir ? edge_to_ : edge_from_;
    const auto& val = dir ? edge_from_ : edge_to_;
    auto& off = edge_off_[dir];
    off.assign(stored + 1, 0);
    extra_[dir].clear();
    extra_bits_[dir].assign((n + 63) / 64, 0);
    for (size_t e = 0; e < key.size(); ++e)
      if (const size_t s = stored_index(key[e]); s != SIZE_MAX) off[s + 1]++;
    for (size_t i = 0; i < stored; ++i) off[i + 1] += off[i];
    edge_csr_[dir].assign(off[stored], 0);
    std::vector<uint32_t> cur(off.begin(), off.end() - 1);
    for (size_t e = 0; e < key.size(); ++e) {
      const OpId k = key[e];
      if (const size_t s = stored_index(k); s != SIZE_MAX) {
        edge_csr_[dir][cur[s]++] = val[e];
      } else {
        extra_[dir].emplace_back(k, val[e]);
        extra_bits_[dir][k >> 6] |= uint64_t{1} << (k & 63);
      }
    }
    // By op, each op's in the order added (stable).
    std::stable_sort(extra_[dir].begin(), extra_[dir].end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  // The CSR arrays hold every edge now; the build-time lists would be 8 bytes per edge more.
  edge_from_.clear();
  edge_to_.clear();
  tails_ = {};  // (builders only)

  // Queues, walked in id order: a stored op links to the queue's last op so far; a copy links
  // its first op on each queue to it and leaves its last as the queue's last.
  for (auto& by_dir : qlink_)
    for (auto& v : by_dir) v.assign(stored, kNotQueued);
  copy_links_.clear();
  std::vector<std::vector<uint32_t>> qidx(static_cast<size_t>(num_ranks_));  // [rank][stream]
  struct Tail {
    OpId op = kNoOp;
    int side = 0;
  };
  std::vector<Tail> tails;
  auto queue_index = [&](int rank, uint16_t s) -> uint32_t {
    auto& by_stream = qidx[static_cast<size_t>(rank)];
    if (by_stream.size() <= s) by_stream.resize(static_cast<size_t>(s) + 1, UINT32_MAX);
    if (by_stream[s] == UINT32_MAX) {
      by_stream[s] = static_cast<uint32_t>(tails.size());
      tails.emplace_back();
    }
    return by_stream[s];
  };
  auto set_link = [&](OpId id, int side, int dir, OpId to) {
    if (const size_t s = stored_index(id); s != SIZE_MAX)
      qlink_[dir][side][s] = to;
    else if (to != kNoOp)
      copy_links_[link_key(id, side, dir)] = to;
  };
  auto append = [&](uint32_t q, OpId first, int first_side, OpId last, int last_side) {
    Tail& t = tails[q];
    if (t.op != kNoOp) set_link(t.op, t.side, 0, first);
    set_link(first, first_side, 1, t.op);
    set_link(last, last_side, 0, kNoOp);
    t = {last, last_side};
  };
  std::vector<std::pair<std::pair<OpId, OpId>, std::vector<QueueEnds>>> ends_of;  // by copied range
  OpId id = 0;
  size_t s = 0;  // stored index of id
  for (const CopyRange* c = copies_.data(), *ce = c + copies_.size(); id < n;) {
    if (c != ce && id == c->base) {
      auto it = std::find_if(ends_of.begin(), ends_of.end(),
                             [&](const auto& e) { return e.first == std::pair{c->src, static_cast<OpId>(c->count)}; });
      if (it == ends_of.end()) {
        ends_of.emplace_back(std::pair{c->src, static_cast<OpId>(c->count)}, queue_ends(c->src, c->count));
        it = ends_of.end() - 1;
      }
      for (const QueueEnds& e : it->second)
        append(queue_index(e.rank + c->rank_offset, e.stream), c->base + e.first, e.first_side, c->base + e.last,
               e.last_side);
      id += c->count;
      ++c;
      continue;
    }
    const Op& o = ops_[s];
    if (!o.unordered) {
      append(queue_index(o.rank, o.stream), id, 0, id, 0);
      if (o.kind == OpKind::Transfer) append(queue_index(o.peer, o.peer_stream), id, 1, id, 1);
    }
    ++id;
    ++s;
  }

  // Acyclic over explicit edges plus stream order? The queue links above all run forward in id
  // order (each links a queue's last op so far to a later one; a copy's are its original's,
  // shifted), so if every explicit edge does too (add_edge), ids are a topological order and
  // there is nothing to check: so on all 16 bundled scenarios, where the check below was
  // ~0.5 s of the 70B full replay's 2 s build. Else Kahn's algorithm with a stack: only
  // whether every op gets ready matters.
  finalized_ = true;  // (the walks below read the links just built)
  if (backward_edge_) check_acyclic();
  std::unordered_map<std::string, LeanLanes>().swap(phantoms_.lanes);
  memo_.reset();
}

void TaskGraph::check_acyclic() {
  const size_t n = size_;
  std::vector<uint32_t> indeg;
  indeg.assign(n, 0);
  for (OpId i = 0; i < n; ++i) for_each_successor(i, [&](OpId t) { indeg[t]++; });
  std::vector<OpId> ready;
  for (OpId i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push_back(i);
  size_t visited = 0;
  while (!ready.empty()) {
    const OpId i = ready.back();
    ready.pop_back();
    ++visited;
    for_each_successor(i, [&](OpId t) {
      if (--indeg[t] == 0) ready.push_back(t);
    });
  }
  if (visited != n) {
    finalized_ = false;
    // Name one op on the cycle to make the builder bug findable.
    OpId stuck = 0;
    for (OpId i = 0; i < n; ++i)
      if (indeg[i] > 0) {
        stuck = i;
        break;
      }
    throw std::logic_error("TaskGraph has a cycle (or a stream deadlock) through op " + describe(stuck));
  }
}

std::vector<OpId> TaskGraph::preds(OpId id) const {
  std::vector<OpId> v;
  for_each_pred(id, [&](OpId p) { v.push_back(p); });
  return v;
}

std::vector<OpId> TaskGraph::succs(OpId id) const {
  std::vector<OpId> v;
  for_each_succ(id, [&](OpId p) { v.push_back(p); });
  return v;
}

}  // namespace cpsim::schedule
