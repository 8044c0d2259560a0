// The data-parallel parameter gathers a stage issues (stage_builder.hpp): ZeRO-3 / FSDP's
// per-block all-gathers before a block runs, and Megatron's overlapped gather of the updated
// weights before the next step's forward, both over the DP x CP group of each TP index.
#include <algorithm>
#include <string>

#include "model/data_parallel.hpp"
#include "model/moe.hpp"
#include "model/transformer.hpp"
#include "schedule/collectives.hpp"
#include "schedule/replicas.hpp"
#include "schedule/stage_builder.hpp"

namespace cpsim::schedule {

using scenario::LayerKind;

double zero3_gather_bytes(const scenario::Scenario& sc, int layer) {
  const auto& m = sc.model;
  // (a MoE layer's routed experts gather their EP shard over the same group: an approximation
  // of Megatron's expert-DP group, the same bytes per rank)
  const double bytes =
      (model::layer_ffn_replicated_params(m, layer) +
       (model::layer_kind(m, layer) == LayerKind::FullAttention ? model::full_attention_layer_params(m)
                                                                 : model::linear_attention_layer_params(m))) /
          sc.parallel.tp * model::kBf16Bytes +
      model::layer_expert_params(m, layer) / (sc.parallel.ep * sc.parallel.expert_tp) * model::kBf16Bytes;
  return sc.training.fp8 ? bytes / 2 : bytes;  // FP8 param gather: 1 B
}

size_t dp_group_gather_ops(const scenario::Scenario& sc, const model::Topology& topo, bool symmetric) {
  const Mesh mesh(sc.parallel);
  TaskGraph g;
  g.set_pipelined_collectives(pipelined_collectives(sc));
  CollectiveRequest req;
  req.op = CollOp::AllGather;
  req.bytes = zero3_gather_bytes(sc, 0);
  req.send_stream = stream::kDpSend;
  req.recv_stream = stream::kDpRecv;
  req.label.name = g.intern("zero3_allgather_params");
  // HSDP gathers within the shard group (replica 0's: dp / dp_replicate ranks x cp).
  for (int d = 0; d < sc.parallel.dp_shard(); ++d)
    for (int c = 0; c < sc.parallel.cp; ++c) req.ranks.push_back(mesh.rank_of({0, c, 0, d}));
  if (sc.simulation.lean_collectives && sc.parallel.dp > 1) {  // as a lean build of replica 0
    std::vector<int32_t> twin(static_cast<size_t>(mesh.size()), -1);
    for (int r = 0; r < mesh.size(); ++r) {
      auto co = mesh.coord_of(r);
      if (co[Mesh::kDp] == 0) continue;
      co[Mesh::kDp] = 0;
      twin[static_cast<size_t>(r)] = mesh.rank_of(co);
    }
    g.set_phantom_ranks(twin);
  } else if (symmetric && sc.parallel.dp > 1 && sc.simulation.bystanders) {  // as a full build of replica 0
    std::vector<char> built(static_cast<size_t>(sc.parallel.dp), 0);
    built[0] = 1;
    g.set_bystanders(bystanders(mesh, built));
  }
  add_collective(g, topo, req);
  return g.size();
}

/// ZeRO-3: all-gather the layer's weights over DP x CP before its GEMMs, prefetched when the
/// previous layer pass starts (FSDP's one-layer lookahead). HSDP gathers over the shard group
/// (the dp / dp_replicate consecutive DP indices holding dp_i_, x CP) only.
void StageBuilder::gather_params(int layer, int mb, int pass) {
  param_ready_.clear();
  const auto& p = sc_.parallel;
  // Prefill keeps whole (TP-split) weights on every rank, as inference engines do.
  if (p.zero_stage < 3 || p.dp_shard() * p.cp == 1 || sc_.mode == scenario::Mode::Prefill) return;
  const int shard = p.dp_shard(), group = dp_i_ / shard;
  const double gathered = zero3_gather_bytes(sc_, layer);
  // A recomputed forward runs on the backward's gather: FSDP2 unshards a block in its
  // pre-backward hook (torch/distributed/fsdp/_fully_shard/_fsdp_state.py _pre_backward), the
  // checkpoint's rerun happens inside that backward, where _pre_forward returns at once
  // (training state PRE_BACKWARD), and the block reshards only after its backward.
  if (pass == 1) pass = 2;
  // A block that does not reshard after its forward (model::fsdp_reshards) keeps the weights
  // its first forward gathered for every later pass and micro-batch: PyTorch's pipelining
  // stages also keep FSDP from resharding after each micro-batch's backward
  // (set_reshard_after_backward(False) until the last).
  if (!model::fsdp_reshards(p, layer, m_.layers)) mb = pass = 0;
  param_ready_.assign(ranks_.size(), kNoOp);
  for (int t = 0; t < tp_; ++t) {
    if (mirrored_[index(0, t)]) {
      for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = param_ready_[index(c, 0)];
      continue;
    }
    // One gather per shard group: the key's TP slot counts the group too.
    auto& done = gathers_[{layer, mb, pass, t + tp_ * group}];
    if (done.empty()) {
      CollectiveRequest req;
      req.op = CollOp::AllGather;
      req.bytes = gathered;
      req.send_stream = stream::kDpSend;
      req.recv_stream = stream::kDpRecv;
      req.label = label("zero3_allgather_params", mb, layer,
                        pass == 2 ? Phase::Backward : Phase::Forward, "collective");
      req.label.scheme = g_.intern("dp");
      for (int d = group * shard; d < (group + 1) * shard; ++d)
        for (int c = 0; c < cp_; ++c) {
          const int r = mesh_.rank_of({t, c, pp_i_, d});
          req.ranks.push_back(r);
          // Replica-local lookahead; other replicas' members are gated by their own streams.
          OpId dep = kNoOp;
          for (size_t i = 0; i < ranks_.size() && d == dp_i_; ++i)
            if (ranks_[i] == r && i < prev_entry_.size()) dep = prev_entry_[i];
          req.deps.push_back(dep);
        }
      const auto res = add_collective(g_, topo_, req);
      // (a phantom GPU's replica is never built: nothing reads its end)
      for (size_t k = 0; k < req.ranks.size(); ++k)
        if (!g_.phantom(req.ranks[k])) done[req.ranks[k]] = res.done[k];
    }
    for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = done.at(ranks_[index(c, t)]);
  }
}

/// Megatron's overlapped parameter gather: the updated weights of the last step's optimizer,
/// gathered bucket by bucket before the first micro-batch's forward uses them. Megatron
/// dispatches the first bucket's gather in the first forward pre-hook (so it waits for the
/// stage's input), or at the step's start on every stage with --align-param-gather
/// (pipeline_parallel/schedules.py); each finish_param_sync dispatches the next bucket's
/// (param_and_grad_buffer.py), so the rest follow back to back on the DP stream while the
/// forward runs. The gathers are per TP index over DP x CP, shared by the replicas.
void StageBuilder::overlapped_param_gather(int layer, int mb, int pass, const Ops& entry) {
  if (param_buckets_.empty() || mb != 0 || pass != 0) return;
  size_t k = 0;
  while (k < param_buckets_.size() &&
         std::find(param_buckets_[k].layers.begin(), param_buckets_[k].layers.end(), layer) ==
             param_buckets_[k].layers.end())
    ++k;
  if (k == param_buckets_.size()) return;
  const auto& p = sc_.parallel;
  param_ready_.assign(ranks_.size(), kNoOp);
  for (int t = 0; t < tp_; ++t) {
    if (mirrored_[index(0, t)]) {
      for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = param_ready_[index(c, 0)];
      continue;
    }
    // Every bucket's gather is built when the stage's first layer is: the first with its
    // dispatch dependency, the rest queued behind it.
    const int first = param_buckets_[k].layers.front();
    if (k == 0 && layer == first && !gathers_.count({first, -1, 3, t})) {
      for (size_t b = 0; b < param_buckets_.size(); ++b) {
        CollectiveRequest req;
        req.op = CollOp::AllGather;
        req.bytes = param_buckets_[b].bytes;
        req.send_stream = stream::kDpSend;
        req.recv_stream = stream::kDpRecv;
        req.label = label("dp_allgather_params", 0, param_buckets_[b].layers.front(), Phase::Forward,
                          "collective");
        req.label.scheme = g_.intern("dp");
        for (int d = 0; d < p.dp; ++d)
          for (int c = 0; c < cp_; ++c) {
            const int r = mesh_.rank_of({t, c, pp_i_, d});
            req.ranks.push_back(r);
            OpId dep = kNoOp;
            // (a replica's first forward input gates its own members only)
            for (size_t i = 0; i < ranks_.size() && b == 0 && d == dp_i_ && !p.align_param_gather; ++i)
              if (ranks_[i] == r) dep = entry[i];
            req.deps.push_back(dep);
          }
        const auto res = add_collective(g_, topo_, req);
        auto& done = gathers_[{param_buckets_[b].layers.front(), -1, 3, t}];
        for (size_t q = 0; q < req.ranks.size(); ++q)
          if (!g_.phantom(req.ranks[q])) done[req.ranks[q]] = res.done[q];
      }
    }
    const auto& done = gathers_.at({first, -1, 3, t});
    for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = done.at(ranks_[index(c, t)]);
  }
}

}  // namespace cpsim::schedule
