#include "schedule/grad_buckets.hpp"

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
  for (const auto& bucket : form_buckets(b)) {
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
    req.label.phase = Phase::Backward;
    req.ranks = b.members;
    for (size_t i = 0; i < b.members.size(); ++i) req.deps.push_back(b.ready(i, l));
    done = add_collective(g, topo, req).done;
  }
  return done;
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
