#include "schedule/grad_buckets.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "schedule/collectives.hpp"

namespace cpsim::schedule {

std::vector<std::vector<int>> form_buckets(const GradBuckets& b) {
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  double bucket = 0;
  // Buckets fill in backward order: the stage's last layers produce gradients first.
  for (auto it = b.layers.rbegin(); it != b.layers.rend(); ++it) {
    const int l = *it;
    cur.push_back(l);
    bucket += b.bytes(l);
    const bool close = l == b.layers.front() || bucket >= b.bucket_bytes || (b.closes && b.closes(l));
    if (!(bucket > 0) || !close) continue;
    out.push_back(cur);
    cur.clear();
    bucket = 0;
  }
  return out;
}

std::vector<OpId> add_grad_buckets(TaskGraph& g, const model::Topology& topo, const GradBuckets& b) {
  std::vector<OpId> done(b.members.size(), kNoOp);
  for (const auto& bucket : form_buckets(b)) add_grad_bucket(g, topo, b, bucket, done);
  return done;
}

void add_grad_bucket(TaskGraph& g, const model::Topology& topo, const GradBuckets& b,
                     const std::vector<int>& bucket, std::vector<OpId>& done) {
  const size_t groups = b.reduce_scatter ? static_cast<size_t>(std::max(1, b.replicate)) : 1;
  const size_t n = b.members.size() / groups;  // one shard group's members
  const int l = bucket.back();  // the last layer the backward reaches
  double bytes = 0;
  for (int k : bucket) bytes += b.bytes(k);
  CollectiveRequest req;
  req.op = b.reduce_scatter ? CollOp::ReduceScatter : CollOp::AllReduce;
  req.bytes = bytes;
  req.send_stream = stream::kDpSend;
  req.recv_stream = stream::kDpRecv;
  req.label.name = g.intern(b.name);
  req.label.category = g.intern("collective");
  req.label.scheme = g.intern("dp");
  req.label.layer = l;
  req.label.micro = b.micro;
  req.label.phase = Phase::Backward;
  for (size_t r = 0; r < groups; ++r) {
    req.ranks.assign(b.members.begin() + static_cast<std::ptrdiff_t>(r * n),
                     b.members.begin() + static_cast<std::ptrdiff_t>((r + 1) * n));
    req.deps.clear();
    for (size_t i = r * n; i < (r + 1) * n; ++i) req.deps.push_back(b.ready(i, l));
    const auto res = add_collective(g, topo, req).done;
    std::copy(res.begin(), res.end(), done.begin() + static_cast<std::ptrdiff_t>(r * n));
  }
  if (groups == 1) return;
  // Each member's reduced shard (bytes / n, in the reduce dtype) summed across the replicas
  // after its reduce-scatter, as foreach_reduce issues it, on the replicate group's streams.
  CollectiveRequest ar = req;
  ar.op = CollOp::AllReduce;
  ar.send_stream = stream::kDpReplicateSend;
  ar.recv_stream = stream::kDpReplicateRecv;
  ar.bytes = bytes / static_cast<double>(n);
  ar.label.name = g.intern(b.replicate_name);
  std::vector<OpId> reduced = done;
  for (size_t k = 0; k < n; ++k) {
    ar.ranks.clear();
    ar.deps.clear();
    for (size_t r = 0; r < groups; ++r) {
      ar.ranks.push_back(b.members[r * n + k]);
      ar.deps.push_back(done[r * n + k]);
    }
    const auto res = add_collective(g, topo, ar).done;
    for (size_t r = 0; r < groups; ++r) reduced[r * n + k] = res[r];
  }
  done = reduced;
}

QueuedGradBuckets::QueuedGradBuckets(TaskGraph& g, const model::Topology& topo,
                                     std::vector<std::vector<GradBuckets>> groups)
    : g_(g), topo_(topo), groups_(std::move(groups)) {
  for (const auto& stage : groups_) {
    buckets_.emplace_back();
    pending_.emplace_back();
    done_.emplace_back();
    for (const auto& b : stage) {
      buckets_.back().push_back(form_buckets(b));
      done_.back().emplace_back(b.members.size(), kNoOp);
    }
  }
}

void QueuedGradBuckets::grads_ready(int s, int layer, int mb) {
  const auto su = static_cast<size_t>(s);
  // The expert groups (listed last) first: a block's experts finish their backward, and their
  // post-backward hook issues their reduce-scatter, before the block's attention does.
  for (size_t k = buckets_[su].size(); k-- > 0;)
    for (size_t j = 0; j < buckets_[su][k].size(); ++j)
      if (buckets_[su][k][j].back() == layer && queued_.insert({s, k, j, mb}).second) pending_[su].emplace_back(k, j, mb);
}

void QueuedGradBuckets::queue(int s) {
  const auto su = static_cast<size_t>(s);
  for (const auto& [k, j, m] : pending_[su]) {
    GradBuckets b = groups_[su][k];
    const int ki = static_cast<int>(k), mb = m;
    const GradBuckets& own = groups_[su][k];
    if (own.ready_micro) b.micro = mb;
    b.ready = [&](size_t i, int l) {
      const OpId r = own.ready_micro ? own.ready_micro(i, l, mb) : own.ready(i, l);
      if (r != kNoOp) return r;
      Op gate;  // in no stream: it only holds the member's first step until its gradients exist
      gate.rank = b.members[i];
      gate.stream = stream::kDpSend;
      gate.unordered = true;
      gate.label.name = g_.intern("grads_ready");
      gate.label.category = g_.intern("overhead");
      gate.label.layer = l;
      gate.label.phase = Phase::Backward;
      gates_.push_back({g_.add(gate), s, ki, l, mb, i});
      return gates_.back().op;
    };
    add_grad_bucket(g_, topo_, b, buckets_[su][ki][j], done_[su][k]);
  }
  pending_[su].clear();
}

void QueuedGradBuckets::wire() {
  for (size_t s = 0; s < pending_.size(); ++s) queue(static_cast<int>(s));
  for (const Gate& q : gates_) {
    const GradBuckets& own = groups_[static_cast<size_t>(q.s)][static_cast<size_t>(q.k)];
    const OpId r = own.ready_micro ? own.ready_micro(q.member, q.layer, q.mb) : own.ready(q.member, q.layer);
    if (r == kNoOp) throw std::logic_error("a reduce-scatter member's gradients were never built");
    g_.add_edge(r, q.op);
  }
  gates_.clear();
}

void add_param_allgather(TaskGraph& g, const model::Topology& topo, const std::vector<int>& members,
                         const std::vector<OpId>& deps, double bytes, const char* name) {
  CollectiveRequest req;
  req.op = CollOp::AllGather;
  req.bytes = bytes;
  req.send_stream = stream::kDpSend;
  req.recv_stream = stream::kDpRecv;
  req.label.name = g.intern(name);
  req.label.category = g.intern("collective");
  req.label.scheme = g.intern("dp");
  req.label.phase = Phase::Optimizer;
  req.ranks = members;
  req.deps = deps;
  add_collective(g, topo, req);
}

}  // namespace cpsim::schedule
