#pragma once
/// Gradient reduction in buckets as the backward produces them (PyTorch DDP and Megatron's
/// distributed-optimizer buckets): a stage's layers are walked in backward order and a bucket is
/// reduced once it holds `bucket_bytes`, or at the stage's first layer. Serves both the dense
/// DP x CP gradients (step.cpp) and the expert-DP gradients of MoE layers (moe_layer.cpp).
#include <functional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "model/topology.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

struct GradBuckets {
  std::vector<int> members;                ///< the reducing group, ring order
  std::vector<int> layers;                 ///< the stage's layers, forward order
  std::function<double(int layer)> bytes;  ///< gradient bytes of `layer` per member
  /// The op after which member i's gradients of `layer` are complete.
  std::function<OpId(size_t member, int layer)> ready;
  /// When each micro-batch's gradients are reduced (QueuedGradBuckets): the op after which
  /// member i's gradients of `layer` from micro-batch `mb` are complete; unset otherwise.
  std::function<OpId(size_t member, int layer, int mb)> ready_micro;
  int micro = -1;                          ///< the micro-batch the collectives reduce (labels)
  double bucket_bytes = 0;
  /// Layers at which a bucket closes whatever it holds (a model chunk's first layer: Megatron
  /// wraps each chunk in its own DDP); may be empty.
  std::function<bool(int layer)> closes;
  bool reduce_scatter = false;             ///< ZeRO >= 1: reduce-scatter, else all-reduce
  const char* name = "";                   ///< the collectives' op name
  /// HSDP (FSDP2 on a (replicate, shard) mesh): members are `replicate` consecutive shard
  /// groups; each reduce-scatters within its group, then each shard is all-reduced across the
  /// groups (members i, i + n, i + 2n, ... for group size n), FSDP2's foreach_reduce with its
  /// all_reduce_group. Needs reduce_scatter.
  int replicate = 1;
  const char* replicate_name = "";         ///< the cross-replica all-reduces' op name
};

/// The buckets b's layers fill: in reduction order (the backward's), each bucket's layers in
/// backward order; layers whose gradients are empty join the next bucket.
std::vector<std::vector<int>> form_buckets(const GradBuckets& b);

/// Adds one collective per bucket on the DP streams (layers whose gradients are empty add
/// nothing); returns, per member, the op after which its last bucket is reduced (kNoOp when
/// nothing was reduced).
std::vector<OpId> add_grad_buckets(TaskGraph& g, const model::Topology& topo, const GradBuckets& b);

/// Adds the collective(s) of one of form_buckets(b)'s buckets on the DP streams, after each
/// member's b.ready(i, bucket.back()); sets done[i] (b.members.size() entries) to the op after
/// which member i's share of it is reduced. (add_grad_buckets is this for every bucket in turn.)
void add_grad_bucket(TaskGraph& g, const model::Topology& topo, const GradBuckets& b,
                     const std::vector<int>& bucket, std::vector<OpId>& done);

/// Gradient buckets queued on the DP streams in the order the backward issues them, between
/// the parameter all-gathers the backward queues there (ZeRO-3 / FSDP), instead of after the
/// whole backward. A DP stream is one NCCL communicator's queue: its collectives run in the
/// order they were issued, so a reduce-scatter queued behind the backward's last gather could
/// not start before the backward's end however early its gradients were ready.
///
/// FSDP2 issues block l's reduce-scatter in its post-backward hook, once its gradients exist
/// (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py, FSDPParamGroup.post_backward:
/// foreach_reduce on comm_ctx.reduce_scatter_stream), after the pre-backward hook of block l
/// issued the prefetch of block l - 1's all-gather (pre_backward -> _backward_prefetch ->
/// _prefetch_unshard) and before block l - 1's pre-backward issues block l - 2's: on the
/// communicator, ... AG(l - 1), RS(l), AG(l - 2), RS(l - 1) ... A MoE block's experts are
/// sharded over the expert data-parallel group (torchtitan's apply_fsdp,
/// torchtitan/models/llama4/infra/parallelize.py, wraps transformer_block.moe.experts in a
/// fully_shard of its own on the dp_mod_ep mesh, inside the block's): the same backward issues
/// their reduce-scatter, at the same block, on the same reduce-scatter stream. The step builder
/// calls grads_ready once a layer's backward is built (of the last micro-batch, or of each
/// where every micro-batch is reduced: reduces_every_micro_batch) and queue() once the next
/// layer's gather is (and at the end of each backward pass).
class QueuedGradBuckets {
 public:
  /// groups[s]: the reducing groups of stage s (the DP x CP group of each TP index, then the
  /// expert-DP groups), each with its members, layers, bytes, bucket size; its `ready(i, layer)`
  /// (or `ready_micro(i, layer, mb)` where set) returns kNoOp while member i's data-parallel
  /// replica is not built yet.
  QueuedGradBuckets(TaskGraph& g, const model::Topology& topo, std::vector<std::vector<GradBuckets>> groups);
  /// Stage s's backward of micro-batch `mb` has reached `layer`: the buckets it closes are
  /// ready to queue (once per micro-batch: a replica built later finds them queued).
  void grads_ready(int s, int layer, int mb);
  /// Queues stage s's ready buckets behind what its DP streams hold so far.
  void queue(int s);
  /// Once every replica is built: a member whose replica was built after its bucket was queued
  /// joined it through a zero-time gate, which now waits for that member's gradients.
  void wire();
  /// Per member of groups[s][k]: the op after which its last bucket is reduced.
  const std::vector<OpId>& done(int s, int k) const { return done_.at(static_cast<size_t>(s)).at(static_cast<size_t>(k)); }

 private:
  struct Gate {
    OpId op;
    int s, k, layer, mb;
    size_t member;
  };
  TaskGraph& g_;
  const model::Topology& topo_;
  std::vector<std::vector<GradBuckets>> groups_;
  std::vector<std::vector<std::vector<std::vector<int>>>> buckets_;  ///< per stage, group: form_buckets
  std::set<std::tuple<int, size_t, size_t, int>> queued_;        ///< (stage, group, bucket, micro-batch)
  std::vector<std::vector<std::tuple<size_t, size_t, int>>> pending_;  ///< per stage: ready, not queued
  std::vector<std::vector<std::vector<OpId>>> done_;                ///< per stage, group, member
  std::vector<Gate> gates_;
};

/// ZeRO >= 1 (distributed optimizer): the all-gather of the updated weights, `bytes` in total
/// over `members`, each after its deps (its optimizer step), on the DP streams.
void add_param_allgather(TaskGraph& g, const model::Topology& topo, const std::vector<int>& members,
                         const std::vector<OpId>& deps, double bytes, const char* name);

}  // namespace cpsim::schedule
