#pragma once
/// One layer pass of one pipeline-stage replica as real ops: norms, TP-split projections and
/// MLP (with or without sequence parallelism), attention per its scheme, the MoE block, ZeRO-3
/// parameter gathers; plus the embedding and the LM head with its loss. step.cpp composes these
/// passes into the pipeline schedule.
#include <map>
#include <tuple>
#include <vector>

#include "model/stack_kernels.hpp"
#include "model/cost_model.hpp"
#include "model/host_ops.hpp"
#include "model/topology.hpp"
#include "scenario/specs.hpp"
#include "schedule/attention.hpp"
#include "schedule/moe_layer.hpp"
#include "schedule/nccl_tuner.hpp"
#include "schedule/step.hpp"
#include "schedule/task_graph.hpp"
#include "schedule/tp_overlap.hpp"

namespace cpsim::schedule {

/// ZeRO-3 parameter all-gathers, shared by the replicas of a stage: (layer, micro-batch, pass,
/// tp index) -> global rank -> op after which that rank holds the layer's full weights.
using GatherMap = std::map<std::tuple<int, int, int, int>, std::map<int, OpId>>;

/// Bytes a ZeRO-3 parameter all-gather of `layer` moves (nccl-tests convention: the gathered
/// total per TP rank; FP8 training gathers 1 B per parameter).
double zero3_gather_bytes(const scenario::Scenario& sc, int layer);

/// Ops of one all-gather of layer 0's weights (zero3_gather_bytes) over the DP x CP group of TP
/// index 0 in the first stage, as `sc`'s mesh builds it, in a graph of its own: how `cpsim
/// plan` scales the DP collectives of its one-replica layer probe, which span CP only, to the
/// mesh's (ZeRO-3 gathers, gradient reduce-scatters and parameter gathers span DP x CP). With
/// sc.simulation.lean_collectives, as a lean build of replica 0 has it (lean_lanes.cpp);
/// otherwise `symmetric`: as a full build of replica 0 alone, the others' GPUs bystanders.
size_t dp_group_gather_ops(const scenario::Scenario& sc, const model::Topology& topo, bool symmetric = false);

/// One bucket of Megatron's overlapped parameter gather (--overlap-param-gather): layers in
/// forward order and the bytes its all-gather moves per TP rank.
struct ParamBucket {
  std::vector<int> layers;
  double bytes = 0;
};

/// Builds layers for one pipeline-stage replica: the TP x CP grid of GPUs with fixed (pp, dp).
class StageBuilder {
 public:
  using Ops = std::vector<OpId>;
  StageBuilder(const scenario::Scenario& sc, const model::Topology& topo, Pricer& pricer,
               TaskGraph& g, const Mesh& mesh, const Documents& docs, int pp_i, int dp_i,
               GatherMap& gathers, MoeA2aMap& a2a);
  /// The grid's global ranks, index cp_i * tp + tp_i.
  const std::vector<int>& ranks() const { return ranks_; }
  int index(int cp_i, int tp_i) const { return cp_i * tp_ + tp_i; }

  Ops embedding(int mb, const Ops& entry);
  Ops lm_head(int mb, bool backward, const Ops& entry);
  Ops layer_forward(int layer, int mb, const Ops& entry);
  /// The layer's backward, preceded by its forward recomputation under full recompute.
  Ops layer_backward(int layer, int mb, const Ops& entry);

  /// The stage's overlapped parameter gathers, in forward order (empty: none).
  void set_param_buckets(std::vector<ParamBucket> b) { param_buckets_ = std::move(b); }

  int full_layers_built = 0;

 private:
  /// Per-TP-rank widths of a layer's projections and MLP.
  struct Widths {
    double in = 0, mix = 0, ffn = 0;
  };
  OpLabel label(const char* name, int mb, int layer, Phase ph, const char* cat);
  /// A GEMM's price and, in FP8, that of the quantisation kernels it needs first.
  struct GemmPrice {
    model::Cost gemm, quantize;
  };
  GemmPrice gemm_price(const char* name, double m, double n, double k, Phase ph, int mb) const;
  /// One GEMM on grid rank i (after its quantisation kernels), `mult` times the FLOPs of c,
  /// `slow` times its time.
  OpId gemm_op(size_t i, const char* name, const GemmPrice& c, double mult, double slow, int mb,
               int layer, Phase ph, OpId dep);
  /// A linear layer's GEMM X[m x k] W^T on every rank: forward fprop, backward dgrad + wgrad.
  Ops gemm_all(const char* name, double m, double n, double k, int mb, int layer, Phase ph,
               const Ops& deps);
  TpOverlapCtx overlap_ctx(int mb, int layer, Phase ph);
  enum TpSide { kGatherIn, kScatterOut };
  Ops tp_gemm(bool backward, TpSide side, const char* name, double m, double n, double k, int mb,
              int layer, const Ops& deps);
  Ops memory_all(const char* name, double bytes, model::MemClass cls, int mb, int layer, Phase ph,
                 const Ops& deps);
  Ops memory_cost_all(const char* name, const model::Cost& c, int mb, int layer, Phase ph, const Ops& deps);
  Ops stack_region(const char* name, model::LayerRegion region, bool backward, int layer, int mb, const Ops& deps);
  Ops tp_coll(CollOp op, const char* name, int mb, int layer, Phase ph, const Ops& deps);
  Ops tp_enter(bool backward, int mb, int layer, Phase ph, const Ops& deps);
  Ops tp_exit(bool backward, int mb, int layer, Phase ph, const Ops& deps);
  Ops sequence_mixing(int layer, int mb, bool backward, const Ops& deps);
  /// The framework's host ops of a region built from op `first` on (schedule/host_lane.hpp).
  void region_host(const char* name, const model::HostLoad& load, int mb, int layer, Phase ph, OpId first);
  /// ZeRO-3 / FSDP's gather of `layer`'s weights before pass `pass` (param_gather.cpp).
  void gather_params(int layer, int mb, int pass);
  /// Activation CPU offloading: the copy of `layer`'s activations to host memory after its
  /// forward, and back before its backward (model/offload.hpp).
  Ops host_copy(bool to_host, int layer, int mb, const Ops& deps);
  /// Megatron's overlapped gather of the updated weights, bucket by bucket (param_gather.cpp).
  void overlapped_param_gather(int layer, int mb, int pass, const Ops& entry);
  Ops moe(int layer, int mb, bool backward, const Ops& entry);
  Widths widths(int layer) const;
  Ops layer_pass(int layer, int mb, bool backward, const Ops& entry, bool recompute = false);
  Ops forward_pass(int layer, int mb, const Ops& entry);
  // The recomputation passes (recompute.cpp).
  /// torchtitan's op policy: the part of the forward its backward reruns.
  Ops op_sac_recompute(int layer, int mb, const Ops& entry);
  /// Megatron's selective recomputation: the core attention's forward again, in the backward.
  Ops core_attention_recompute(int layer, int mb, const Ops& entry);
  Ops backward_pass(int layer, int mb, const Ops& entry);

  const scenario::Scenario& sc_;
  const scenario::ModelSpec& m_;
  const model::Topology& topo_;
  Pricer& pricer_;
  TaskGraph& g_;
  const Documents& docs_;
  const Mesh& mesh_;
  GatherMap& gathers_;
  MoeA2aMap& a2a_;
  int pp_i_ = 0, dp_i_ = 0;
  Ops param_ready_;
  Ops offload_wait_;  ///< what the layer being built waits for besides its input (host copies)
  std::map<std::pair<int, int>, Ops> to_host_, from_host_;  ///< (layer, micro-batch) -> copies
  std::vector<ParamBucket> param_buckets_;
  Ops prev_entry_;
  std::vector<int> ranks_;
  /// Per grid index: a TP rank mirrored by TP index 0 of its CP index (replicas.hpp tp_mirror),
  /// whose ops are not built: its Ops entries are its twin's.
  std::vector<char> mirrored_;
  size_t twin(size_t i) const { return i - i % static_cast<size_t>(tp_); }
  int tp_ = 1, cp_ = 1;
  double tokens_ = 0;
  bool sp_ = false;
  bool overlap_ = false;         ///< parallel.tp_comm_overlap (with SP)
  bool recompute_ = false;
};

}  // namespace cpsim::schedule
