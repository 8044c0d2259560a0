#pragma once
/// A mixture-of-experts MLP block as ops: router, token dispatch all-to-all over the
/// expert-parallel group, grouped expert GEMMs priced by the tokens each rank's experts receive,
/// combine all-to-all, shared experts as a TP-split dense MLP; the backward mirrors it (two
/// all-to-alls again). Expert gradients are reduced over the expert data-parallel group.
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "model/topology.hpp"
#include "scenario/specs.hpp"
#include "schedule/attention.hpp"
#include "schedule/grad_buckets.hpp"
#include "schedule/mesh.hpp"
#include "schedule/step.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

/// All-to-alls shared by the data-parallel replicas an EP group spans (an EP group is carved out
/// of DP x CP): (stage, EP group, tp index, layer, micro-batch, pass x 2 + which) -> rank -> op
/// after which that rank holds its tokens. The first replica to reach one builds it for all.
using MoeA2aMap = std::map<std::tuple<int, int, int, int, int, int>, std::map<int, OpId>>;

/// What the step builder lends the MoE block for one layer pass of one stage replica.
struct MoeCtx {
  TaskGraph& g;
  const model::Topology& topo;
  Pricer& pricer;
  const scenario::Scenario& sc;
  const Mesh& mesh;
  MoeA2aMap& a2a;
  const std::vector<int>& ranks;   ///< the replica's TP x CP grid, index cp_i * tp + tp_i
  int pp_i = 0, dp_i = 0, layer = 0, mb = 0;
  bool backward = false;
  bool recompute = false;          ///< the forward recomputed in the backward
  double tokens = 0;               ///< tokens per CP rank in this micro-batch (seq / cp x micro_batch)
  using Ops = std::vector<OpId>;
  /// The step builder's own ops on every grid rank (so labels, ZeRO-3 waits and recompute
  /// names stay the same as for dense layers).
  std::function<Ops(const char*, double m, double n, double k, const Ops&)> gemm;
  /// Memory-bound kernels (stack_kernels.hpp) as one op on every grid rank.
  std::function<Ops(const char*, const std::vector<model::MemKernel>&, const Ops&)> memory;
  /// The sequence-parallel TP collectives before / after a TP-split block in this direction.
  std::function<Ops(const Ops&)> tp_enter, tp_exit;
};

/// The MoE MLP of one layer, forward (or its recomputation) or backward, from the normed input
/// (SP-sharded when tp > 1) to the block output, per grid rank.
std::vector<OpId> moe_block(MoeCtx& ctx, const std::vector<OpId>& entry);

/// Bytes one rank sends in one dispatch (or combine) all-to-all of layer `layer`, micro-batch
/// `mb` (including its own share, nccl-tests' convention): tokens routed to the most loaded EP
/// rank's experts x hidden x 2 B (uniform routing: tokens per rank x top_k x hidden x 2 B).
double moe_a2a_bytes(const scenario::Scenario& sc, double tokens_per_cp_rank, int layer, int mb);

/// Expert parameters held per rank on a stage owning `owned_layers` (0 without experts).
double stage_expert_params(const scenario::Scenario& sc, const std::vector<int>& owned_layers);

/// The stage's expert gradient buckets, one GradBuckets per expert data-parallel group (the
/// ranks holding the same experts): reduce-scatter (ZeRO >= 1) or all-reduce (ZeRO 0) of each
/// layer's expert gradients as the backward produces them; their `ready` unset. Empty when the
/// stage holds no experts or the expert-DP group is one rank.
std::vector<GradBuckets> expert_grad_buckets(const scenario::Scenario& sc, const Mesh& mesh, int stage,
                                             const std::vector<int>& owned_layers);

}  // namespace cpsim::schedule
