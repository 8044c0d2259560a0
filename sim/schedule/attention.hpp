#pragma once
/// Attention schedule builders: one per context-parallel scheme, sharing the partition and the
/// work accounting. Each appends one layer's forward or backward for one CP group to the graph.
#include <map>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/stack_kernels.hpp"
#include "model/topology.hpp"
#include "scenario/specs.hpp"
#include "schedule/partition.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

/// Prices compute ops: the cost model's time on an idle, nominal GPU. The fleet noise (slow
/// GPUs, static variation, jitter) is not priced in: the replay applies the graph's
/// ComputeNoise to the ops added with TaskGraph::add_priced. Records which source priced each
/// op kind so results can say so.
class Pricer {
 public:
  explicit Pricer(const model::CostModel& cost) : cost_(cost) {}
  const model::CostModel& cost() const { return cost_; }
  /// Nominal time of `c`, recorded under `kind` ("attention", "gemm", ...).
  double time(const model::Cost& c, const std::string& kind);
  /// kind -> source name -> op count, plus kinds that were extrapolated.
  using Sources = std::map<std::string, std::map<std::string, long>>;
  /// kind -> source name -> nominal seconds it priced (summed over the ops counted in Sources).
  using Times = std::map<std::string, std::map<std::string, double>>;
  const Sources& sources() const { return sources_; }
  const Times& times() const { return times_; }
  long extrapolated() const { return extrapolated_; }
  /// What had been priced at some point: count_again's reference.
  struct Snapshot {
    Sources sources;
    Times times;
    long extrapolated = 0;
  };
  Snapshot snapshot() const { return {sources_, times_, extrapolated_}; }
  /// Counts what was priced since `since` `times` more times: the ops of a copied replica,
  /// priced once.
  void count_again(const Snapshot& since, int times);

 private:
  const model::CostModel& cost_;
  Sources sources_;
  Times times_;
  long extrapolated_ = 0;
};

/// Per-rank attention geometry after the TP split.
struct AttnGeometry {
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;
  int batch = 1;
};

struct AttentionCtx {
  TaskGraph& g;
  const model::Topology& topo;
  Pricer& pricer;
  const scenario::Scenario& sc;
  std::vector<int> group;       ///< CP group, global GPU ids in ring order
  int layer = 0;
  int micro = 0;
  AttnGeometry geo;
  Documents docs;
};

/// How the sequence is split over `ranks` CP ranks: the layout's partition, or, for zig-zag
/// with packed documents and per-document sharding, each document in 2 x ranks chunks.
Partition cp_partition(const scenario::Scenario& sc, const Documents& docs, int ranks);

/// The mask of softmax layer `layer`: its pattern entry's sliding window, else the model's.
Documents layer_documents(const scenario::ModelSpec& m, const Documents& docs, int layer);

/// Per-rank entry deps in (kNoOp = none), per-rank exit ops out (attention output ready /
/// gradients of Q, K, V at their owners). Throws std::invalid_argument for impossible layouts.
std::vector<OpId> attention_forward(AttentionCtx& ctx, const std::vector<OpId>& entry);
std::vector<OpId> attention_backward(AttentionCtx& ctx, const std::vector<OpId>& entry);

/// Chunk size of the chunkwise delta-rule kernels (flash-linear-attention's default), for both
/// linear-attention CP schemes.
constexpr int kLinearChunk = 64;

/// The same for a linear-attention (Gated DeltaNet) layer's sequence mixing.
std::vector<OpId> linear_attention_forward(AttentionCtx& ctx, const std::vector<OpId>& entry);
std::vector<OpId> linear_attention_backward(AttentionCtx& ctx, const std::vector<OpId>& entry);

/// Linear attention by head split over the CP group (linear_attention_a2a.cpp): bytes each
/// rank sends in each all-to-all. Throws std::invalid_argument when the heads per TP rank do
/// not divide by cp.
struct LinearA2aBytes {
  double inputs = 0;  ///< q, k, v and the beta and decay gates (forward; their gradients backward)
  double output = 0;  ///< the output (forward; its gradient backward)
};
LinearA2aBytes linear_a2a_bytes(const scenario::ModelSpec& m, int tp, int cp, int64_t local_tokens,
                                int batch);
std::vector<OpId> linear_a2a_pass(AttentionCtx& ctx, bool backward, const std::vector<OpId>& entry);

// Scheme builders (attention_*.cpp); `part` splits the sequence over ctx.group.
std::vector<OpId> ring_pass(AttentionCtx& ctx, const Partition& part, bool backward,
                            const std::vector<OpId>& entry, const std::string& scheme);
/// The double ring (LoongTrain): inner rings of double_ring_inner(ctx) consecutive members,
/// linked member-wise by outer rings; the same chunk pairs as ring_pass, in another order.
std::vector<OpId> double_ring_pass(AttentionCtx& ctx, const Partition& part, bool backward,
                                   const std::vector<OpId>& entry, const std::string& scheme);
/// Inner ring size: parallel.attention.inner_ring, or (0) the CP ranks that share the first
/// member's node, rounded down to a divisor of the group size. Throws std::invalid_argument if
/// inner_ring does not divide the group size.
int double_ring_inner(const AttentionCtx& ctx);
std::vector<OpId> allgather_pass(AttentionCtx& ctx, const Partition& part, bool backward,
                                 const std::vector<OpId>& entry);
std::vector<OpId> ulysses_pass(AttentionCtx& ctx, bool backward, const std::vector<OpId>& entry);
std::vector<OpId> usp_pass(AttentionCtx& ctx, bool backward, const std::vector<OpId>& entry);

/// The kernel a rank runs for queries `q` against keys `kv` (chunks with no unmasked pair are
/// dropped from the shape). pairs == 0 means the block is fully masked and skipped.
struct BlockWork {
  int64_t pairs = 0;
  int64_t q_len = 0;
  int64_t kv_len = 0;
  scenario::Mask mask = scenario::Mask::Full;
};
BlockWork block_work(const std::vector<TokenRun>& q, const std::vector<TokenRun>& kv,
                     const Documents& docs);

/// Label helpers.
OpLabel make_label(TaskGraph& g, const AttentionCtx& ctx, const char* name, const std::string& scheme,
                   Phase phase, int step = -1);
std::string scheme_name(const scenario::AttentionSpec& a);

/// Adds a priced attention kernel on `rank`; returns the op (or kNoOp when w.pairs == 0).
OpId add_attention_kernel(AttentionCtx& ctx, int rank, const BlockWork& w, const AttnGeometry& geo,
                          bool backward, OpLabel label);
/// Adds a priced memory-bound op (merge, accumulate, conv) of `bytes` and kernel class `cls`
/// on `rank`.
OpId add_memory_op(AttentionCtx& ctx, int rank, double bytes, model::MemClass cls, OpLabel label);

}  // namespace cpsim::schedule
