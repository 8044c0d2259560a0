#pragma once
/// Gradient reduction in buckets as the backward produces them (PyTorch DDP and Megatron's
/// distributed-optimizer buckets): a stage's layers are walked in backward order and a bucket is
/// reduced once it holds `bucket_bytes`, or at the stage's first layer. Serves both the dense
/// DP x CP gradients (step.cpp) and the expert-DP gradients of MoE layers (moe_layer.cpp).
#include <functional>
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

/// ZeRO >= 1 (distributed optimizer): the all-gather of the updated weights, `bytes` in total
/// over `members`, each after its deps (its optimizer step), on the DP streams.
void add_param_allgather(TaskGraph& g, const model::Topology& topo, const std::vector<int>& members,
                         const std::vector<OpId>& deps, double bytes, const char* name);

}  // namespace cpsim::schedule
