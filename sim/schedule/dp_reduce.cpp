#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "model/data_parallel.hpp"
#include "model/host_ops.hpp"
#include "model/moe.hpp"
#include "model/transformer.hpp"
#include "schedule/collectives.hpp"
#include "schedule/moe_layer.hpp"
#include "schedule/optimizer_step.hpp"
#include "schedule/step_parts.hpp"

// The data-parallel half of the step: gradient buckets over DP x CP, the optimizer step of
// each member's shard and the gathers of the updated weights.
namespace cpsim::schedule {

using scenario::LayerKind;

namespace {

/// Dense (non-expert) parameters per TP rank of layer l.
double layer_params(const scenario::Scenario& sc, int l) {
  const auto& m = sc.model;
  return (model::layer_ffn_replicated_params(m, l) +
          (model::layer_kind(m, l) == LayerKind::FullAttention ? model::full_attention_layer_params(m)
                                                               : model::linear_attention_layer_params(m))) /
         sc.parallel.tp;
}

/// Stage s's gradient buckets as Megatron's DDP forms them (model/data_parallel.hpp): its layers,
/// their reduced bytes, the bucket size, a bucket closing at each model chunk's first layer
/// (each chunk is a DDP of its own).
GradBuckets stage_buckets(const scenario::Scenario& sc, const ChunkLayout& cl, int s) {
  GradBuckets b;
  b.layers = cl.stage_layers(s);
  b.bytes = [&sc](int l) { return layer_params(sc, l) * model::grad_reduce_bytes(sc.parallel); };
  b.bucket_bytes = model::dp_bucket_bytes(sc.parallel, s);
  b.closes = [cl](int l) {
    for (int c = 0; c < cl.chunks; ++c)
      if (cl.layers_of(c).first == l) return true;
    return false;
  };
  return b;
}

/// The members of stage s's data-parallel x context-parallel group of TP index t: d-major, then c.
std::vector<int> dp_members(const StepCtx& x, int s, int t) {
  std::vector<int> members;
  for (int d = 0; d < x.sc.parallel.dp; ++d)
    for (int c = 0; c < x.sc.parallel.cp; ++c) members.push_back(x.mesh.rank_of({t, c, s, d}));
  return members;
}

/// Gradient buckets reduced after the whole backward; returns, per member, the op after which
/// its last bucket is reduced.
std::vector<OpId> reduce_after_backward(const StepCtx& x, GradBuckets b) {
  if (b.members.size() <= 1) return std::vector<OpId>(b.members.size(), kNoOp);
  return add_grad_buckets(x.g, x.topo, b);
}

}  // namespace

/// Stage s's overlapped parameter gathers (Megatron --overlap-param-gather): its gradient
/// buckets in forward order, each with its layers and the bytes its all-gather moves (bf16
/// weights; FP8 training gathers its FP8 copies, --fp8-param-gather: 1 B per parameter).
std::vector<ParamBucket> param_buckets(const scenario::Scenario& sc, const ChunkLayout& cl, int s) {
  std::vector<ParamBucket> out;
  const auto& p = sc.parallel;
  if (!p.overlap_param_gather || p.zero_stage < 1 || p.zero_stage > 2 || p.dp * p.cp == 1 ||
      sc.mode == scenario::Mode::Prefill)
    return out;
  const GradBuckets b = stage_buckets(sc, cl, s);
  const auto buckets = form_buckets(b);
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    ParamBucket pb;
    pb.layers.assign(it->rbegin(), it->rend());
    for (int l : pb.layers) pb.bytes += layer_params(sc, l) * (sc.training.fp8 ? 1.0 : model::kBf16Bytes);
    out.push_back(pb);
  }
  return out;
}

/// The TP indices whose gradients are reduced as built: mirrored indices (tp_mirror) reduce as
/// index 0 does, over their own GPUs and rails.
int reduced_tp(const StepCtx& x, const ReplicaPlan& rp) { return rp.tp_mirrored ? 1 : x.sc.parallel.tp; }

/// The gradient buckets of stage s for TP index t over dp_members (their `ready` unset).
GradBuckets dp_grad_buckets(const StepCtx& x, const ChunkLayout& cl, int s, int t) {
  const auto& p = x.sc.parallel;
  GradBuckets b = stage_buckets(x.sc, cl, s);
  b.members = dp_members(x, s, t);
  b.reduce_scatter = p.zero_stage >= 1;
  b.name = p.zero_stage >= 1 ? "dp_reducescatter_grads" : "dp_allreduce_grads";
  // HSDP: members are d-major, so the dp_replicate shard groups are consecutive runs.
  b.replicate = p.zero_stage >= 3 ? p.dp_replicate : 1;
  b.replicate_name = "hsdp_allreduce_grads";
  return b;
}

/// The op after which member i of dp_members(s, t) holds its gradients of layer l; kNoOp while
/// its replica (or the one it mirrors) is not built.
OpId member_grads(const scenario::ParallelSpec& p, const GradsReady& grads, const ReplicaPlan& rp, int t,
                  size_t i, int l) {
  const int d = static_cast<int>(i) / p.cp, c = static_cast<int>(i) % p.cp;
  const std::vector<OpId>& ready = grads[rp.source(d)][l];
  return ready.empty() ? kNoOp : ready[static_cast<size_t>(c * p.tp + t)];
}

bool reduces_every_micro_batch(const scenario::Scenario& sc) {
  // torchtitan's train_step runs forward_backward_step once per gradient-accumulation step with
  // a plain loss.backward() (torchtitan/train.py) and never calls set_requires_gradient_sync,
  // whose default is to reduce: FSDP2 reduce-scatters each block in every backward and adds the
  // output into the sharded gradient (FSDPModule.set_requires_gradient_sync,
  // torch/distributed/fsdp/_fully_shard/_fully_shard.py: "gradient accumulation *without
  // communication*" only when turned off). PyTorch's pipelining stages turn it off for all but
  // the last micro-batch ("accumulate gradients on previous steps and reduce them on the last
  // step", _PipelineStageBase.backward_maybe_with_nosync, torch/distributed/pipelining/stage.py).
  return gathers_in_backward(sc) && sc.parallel.pp == 1 && sc.training.micro_batches > 1;
}

std::vector<GradBuckets> stage_grad_groups(const StepCtx& x, const ChunkLayout& cl, int s, const GradsReady& grads,
                                           const ReplicaPlan& rp, const std::vector<GradsReady>* micro) {
  const auto& p = x.sc.parallel;
  std::vector<GradBuckets> out;
  for (int t = 0; t < reduced_tp(x, rp); ++t) {
    out.push_back(dp_grad_buckets(x, cl, s, t));
    out.back().ready = [&p, &grads, &rp, t](size_t i, int l) { return member_grads(p, grads, rp, t, i, l); };
    if (micro)
      out.back().ready_micro = [&p, micro, &rp, t](size_t i, int l, int mb) {
        return member_grads(p, (*micro)[static_cast<size_t>(mb)], rp, t, i, l);
      };
  }
  for (GradBuckets& b : expert_grad_buckets(x.sc, x.mesh, s, cl.stage_layers(s))) {
    // (expert groups join ranks of any TP and CP index: their grid slot read directly)
    auto expert_grads = [&x, &rp, members = b.members](const GradsReady& from, size_t i, int l) {
      const auto co = x.mesh.coord_of(members[i]);
      const std::vector<OpId>& ready = from[rp.source(co[Mesh::kDp])][l];
      return ready.empty() ? kNoOp : ready[static_cast<size_t>(co[Mesh::kCp] * x.sc.parallel.tp + co[Mesh::kTp])];
    };
    b.ready = [expert_grads, &grads](size_t i, int l) { return expert_grads(grads, i, l); };
    if (micro)
      b.ready_micro = [expert_grads, micro](size_t i, int l, int mb) {
        return expert_grads((*micro)[static_cast<size_t>(mb)], i, l);
      };
    out.push_back(std::move(b));
  }
  return out;
}

/// Whether the backward queues parameter gathers on the DP streams (StageBuilder::gather_params),
/// so that the gradient buckets must be queued between them (QueuedGradBuckets).
bool gathers_in_backward(const scenario::Scenario& sc) {
  const auto& p = sc.parallel;
  return p.zero_stage >= 3 && p.dp_shard() * p.cp > 1 && sc.mode != scenario::Mode::Prefill;
}

/// Gradient reduction of stage s over the data-parallel x context-parallel group (CP ranks
/// hold the same weights), in buckets as the backward produces them, on its own streams so it
/// overlaps the rest of the backward. ZeRO 1-2 (distributed optimizer) reduce-scatters, steps
/// its shard and all-gathers the updated bf16 weights; ZeRO 3 (FSDP) reduce-scatters and steps
/// its shard; ZeRO 0 all-reduces and steps everything.
void reduce_stage(const StepCtx& x, const ChunkLayout& cl, int s, const GradsReady& grads,
                  const ReplicaPlan& rp, const QueuedGradBuckets* queued) {
  const auto& p = x.sc.parallel;
  const int dp_group = p.dp * p.cp;
  const std::vector<int> owned = cl.stage_layers(s);  // in forward order
  double stage_params = 0;
  for (int l : owned) stage_params += layer_params(x.sc, l);
  const double experts_held = stage_expert_params(x.sc, owned);
  const std::vector<GradBuckets> groups = stage_grad_groups(x, cl, s, grads, rp);
  const size_t dense = static_cast<size_t>(reduced_tp(x, rp));
  // The stage's routed experts, reduced over their expert-DP groups (moe_layer.cpp): each
  // rank's optimizer step waits for its expert gradients too, as Megatron's finish_grad_sync
  // and FSDP2's root post-backward wait for every bucket before the step.
  std::map<int, OpId> experts_done;
  for (size_t k = dense; k < groups.size(); ++k) {
    const GradBuckets& b = groups[k];
    const std::vector<OpId> done = queued ? queued->done(s, static_cast<int>(k)) : reduce_after_backward(x, b);
    for (size_t i = 0; i < b.members.size(); ++i) experts_done[b.members[i]] = done[i];
    // Megatron's distributed optimizer gathers the updated expert shards; FSDP (zero_stage 3)
    // gathers them in the next forward with the block's (zero3_gather_bytes).
    if (p.zero_stage >= 1 && p.zero_stage <= 2)
      add_param_allgather(x.g, x.topo, b.members, done, experts_held * model::kBf16Bytes, "expert_dp_allgather_params");
  }
  for (size_t t = 0; t < dense; ++t) {
    const std::vector<int>& members = groups[t].members;
    const std::vector<OpId> done = queued ? queued->done(s, static_cast<int>(t)) : reduce_after_backward(x, groups[t]);
    // HSDP steps the shard of its shard group (dp / dp_replicate x cp ranks).
    const int shard_group = p.zero_stage >= 3 ? p.dp_shard() * p.cp : dp_group;
    double shard = p.zero_stage >= 1 ? stage_params / shard_group : stage_params;
    shard += p.zero_stage >= 1 ? experts_held / model::expert_dp(p) : experts_held;
    // Parameter tensors stepped per member: Megatron's distributed optimizer steps a contiguous
    // range of the stage's buffer (its tensors over the group, plus the one it starts inside);
    // FSDP shards every tensor (zero_stage 3) and ZeRO 0 steps them all.
    double tensors = 0;
    for (int l : owned)
      tensors += model::layer_param_tensors(
          x.sc.training.stack, model::layer_kind(x.sc.model, l) == scenario::LayerKind::FullAttention,
          model::is_moe_layer(x.sc.model, l) ? x.sc.model.moe.experts / std::max(1, p.ep) : 0);
    if (p.zero_stage >= 1 && p.zero_stage <= 2) tensors = std::ceil(tensors / shard_group) + 1;
    const std::vector<OpId> opt =
        add_optimizer_steps(x.sc, x.pricer, x.g, members, done, shard, tensors, rp, &experts_done);
    // Megatron's distributed optimizer (zero_stage 1-2) holds whole bf16 weights and gathers
    // the updated shards after its step; FP8 training gathers their FP8 copies
    // (--fp8-param-gather): 1 B per parameter. Overlapped, the gather runs ahead of the next
    // step's forward instead (param_buckets). FSDP (zero_stage 3) gathers nothing here: the
    // optimizer steps the sharded parameters, which stay sharded until the next forward's
    // pre-forward unshard (FSDPParamGroup.pre_forward, _fsdp_param_group.py), that is the
    // forward's own gathers (StageBuilder::gather_params).
    if (dp_group > 1 && p.zero_stage >= 1 && p.zero_stage <= 2 && !p.overlap_param_gather)
      add_param_allgather(x.g, x.topo, members, opt, stage_params * (x.sc.training.fp8 ? 1.0 : model::kBf16Bytes),
                          "dp_allgather_params");
  }
}

}  // namespace cpsim::schedule
