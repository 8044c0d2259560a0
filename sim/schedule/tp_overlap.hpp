#pragma once
/// Tensor-parallel communication overlapped with the GEMMs it feeds (Megatron
/// `--tp-comm-overlap`, TransformerEngine userbuffers), with sequence parallelism:
///  - all-gather before a column-parallel GEMM (forward qkv / fc1) and before a row-parallel
///    GEMM's data gradient (backward proj / fc2): TE's `ring_exchange`: tp - 1 p2p steps of one
///    sequence shard each; the GEMM runs in tp chunks, chunk i on the shard that has arrived
///    while shard i + 1 travels;
///  - reduce-scatter after a row-parallel GEMM (forward proj / fc2): TE's `pipeline`: the GEMM
///    in 4 chunks, each chunk's reduce-scatter overlapping the next chunk's GEMM;
///  - reduce-scatter of a column-parallel GEMM's data gradient (backward qkv / fc1): TE's
///    `bulk`: the whole reduce-scatter overlaps the weight-gradient GEMM.
/// The communication kernels take SMs from the GEMMs they overlap: TE's default userbuffers
/// configuration (transformer_engine/pytorch/module/base.py, initialize_ub ->
/// get_default_config) gives `ring_exchange` 1 SM and copy-engine transfers, `pipeline` and
/// `bulk` 16 SMs with set_sm_margin (the GEMM runs on sm_count - 16 SMs), 4 splits for
/// `pipeline`. A GEMM overlapped by a kernel of s SMs is priced sm_count / (sm_count - s)
/// times slower. TP bytes are those of the serial collectives.
#include <functional>
#include <vector>

#include "model/topology.hpp"
#include "scenario/specs.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

/// What the stage builder lends the strategy for one TP-split GEMM of one layer pass.
struct TpOverlapCtx {
  TaskGraph& g;
  const model::Topology& topo;
  const scenario::Scenario& sc;
  const std::vector<int>& ranks;  ///< the replica's TP x CP grid, index cp_i * tp + tp_i
  int mb = 0, layer = 0;
  Phase phase = Phase::Forward;
  double bytes = 0;               ///< the gathered activation per CP rank (tokens x hidden x 2 B)
  /// One GEMM of m x n x k on grid rank i, `mult` times its FLOPs, `slow` times its time,
  /// after `dep` (and the layer's ZeRO-3 gather): the stage builder's pricing and labels.
  std::function<OpId(size_t i, const char* name, double m, double n, double k, double mult,
                     double slow, OpId dep)>
      gemm;
};

/// SMs TE's default userbuffers configuration gives each method's communication kernel.
inline constexpr int kUbRingExchangeSms = 1;
inline constexpr int kUbPipelineSms = 16;
inline constexpr int kUbBulkSms = 16;
/// TE's default number of chunks of the `pipeline` method.
inline constexpr int kUbPipelineSplits = 4;

/// Time factor of a GEMM while a communication kernel holds `sms` of the GPU's SMs.
double ub_slowdown(const scenario::Scenario& sc, int sms);

/// Forward: all-gather (ring exchange) overlapped with the column-parallel GEMM m x n x k
/// (m = the gathered tokens). Backward: the same for the row-parallel data gradient, followed
/// by the weight gradient (`name`_dgrad, `name`_wgrad).
std::vector<OpId> ag_gemm_overlap(TpOverlapCtx& c, const char* name, double m, double n, double k,
                                  const std::vector<OpId>& deps);

/// Forward: the row-parallel GEMM pipelined with its reduce-scatter. Backward: the
/// column-parallel data gradient, then its reduce-scatter overlapped with the weight gradient.
std::vector<OpId> gemm_rs_overlap(TpOverlapCtx& c, const char* name, double m, double n, double k,
                                  const std::vector<OpId>& deps);

}  // namespace cpsim::schedule
