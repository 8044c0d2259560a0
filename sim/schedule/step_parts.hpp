#pragma once
/// What the pieces of the step composition share: step.cpp builds the replicas' pipelines,
/// dp_reduce.cpp the data-parallel gradient reduction, the optimizer step and (Megatron's
/// distributed optimizer) the gathers of the updated weights. Internal to sim/schedule.
#include <cstdint>
#include <utility>
#include <vector>

#include "model/topology.hpp"
#include "scenario/specs.hpp"
#include "schedule/attention.hpp"
#include "schedule/grad_buckets.hpp"
#include "schedule/mesh.hpp"
#include "schedule/replicas.hpp"
#include "schedule/stage_builder.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

/// The run's fixed inputs, lent to every piece of the step composition.
struct StepCtx {
  const scenario::Scenario& sc;
  const model::Topology& topo;
  Pricer& pricer;
  TaskGraph& g;
  const Mesh& mesh;
  const Documents& docs;
};

/// The model chunks of the pipeline: pp x virtual_stages chunks of consecutive layers; chunk c
/// runs on stage c % pp.
struct ChunkLayout {
  int layers = 0, pp = 1, vs = 1, chunks = 1, mbs = 1;
  std::pair<int, int> layers_of(int c) const {
    return {static_cast<int>(static_cast<int64_t>(c) * layers / chunks),
            static_cast<int>(static_cast<int64_t>(c + 1) * layers / chunks)};
  }
  /// The layers stage s owns, in forward order.
  std::vector<int> stage_layers(int s) const {
    std::vector<int> ls;
    for (int k = 0; k < vs; ++k) {
      const auto [l0, l1] = layers_of(k * pp + s);
      for (int l = l0; l < l1; ++l) ls.push_back(l);
    }
    return ls;
  }
};


/// [replica][layer]: each layer's backward of the last micro-batch, per grid rank.
using GradsReady = std::vector<std::vector<std::vector<OpId>>>;

/// Whether FSDP reduce-scatters the gradients of every micro-batch's backward, not only the
/// last one's: ZeRO-3 without pipeline parallelism, gradient accumulation.
bool reduces_every_micro_batch(const scenario::Scenario& sc);

/// Stage s's overlapped parameter gathers (Megatron --overlap-param-gather), in forward order.
std::vector<ParamBucket> param_buckets(const scenario::Scenario& sc, const ChunkLayout& cl, int s);

/// The TP indices whose gradients are reduced as built (1 when the others mirror index 0).
int reduced_tp(const StepCtx& x, const ReplicaPlan& rp);

/// The gradient buckets of stage s for TP index t over its data-parallel x context-parallel
/// group (members d-major, then c; their `ready` unset).
GradBuckets dp_grad_buckets(const StepCtx& x, const ChunkLayout& cl, int s, int t);

/// The op after which member i of dp_grad_buckets(s, t)'s group holds its gradients of layer
/// l; kNoOp while its replica (or the one it mirrors) is not built.
OpId member_grads(const scenario::ParallelSpec& p, const GradsReady& grads, const ReplicaPlan& rp, int t,
                  size_t i, int l);

/// Stage s's gradient reduction groups with their `ready` set (kNoOp while a member's replica
/// is not built): the DP x CP group of each reduced TP index (reduced_tp), then the stage's
/// expert-DP groups (expert_grad_buckets). `micro` ([micro-batch] -> each layer's backward of
/// that micro-batch), where every micro-batch is reduced: sets their `ready_micro` too.
std::vector<GradBuckets> stage_grad_groups(const StepCtx& x, const ChunkLayout& cl, int s, const GradsReady& grads,
                                           const ReplicaPlan& rp, const std::vector<GradsReady>* micro = nullptr);

/// Whether the backward queues parameter gathers on the DP streams (StageBuilder::gather_params),
/// so that the gradient buckets must be queued between them (QueuedGradBuckets).
bool gathers_in_backward(const scenario::Scenario& sc);

/// Stage s's gradient reduction, optimizer step and gathers of the updated weights, after every
/// replica is built; `queued`: its buckets already queued during the backward (or null).
void reduce_stage(const StepCtx& x, const ChunkLayout& cl, int s, const GradsReady& grads,
                  const ReplicaPlan& rp, const QueuedGradBuckets* queued);

}  // namespace cpsim::schedule
