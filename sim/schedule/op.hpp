#pragma once
/// What a task graph holds: compute and transfer ops placed on (rank, stream), their labels
/// and streams, and the lockstep pipelines they may form (task_graph.hpp stores them).
#include <cstdint>
#include <stdexcept>

#include "model/cost_model.hpp"

namespace cpsim::schedule {

using OpId = uint32_t;
inline constexpr OpId kNoOp = UINT32_MAX;

enum class OpKind : uint8_t { Compute, Transfer };
enum class Phase : uint8_t { None, Forward, Backward, Optimizer };

/// Well-known streams. Builders may use others; engines treat every id alike.
namespace stream {
inline constexpr uint16_t kCompute = 0;
inline constexpr uint16_t kCpSend = 1;   ///< context-parallel p2p / collectives, send side
inline constexpr uint16_t kCpRecv = 2;   ///< context-parallel receive side
inline constexpr uint16_t kTpSend = 3;
inline constexpr uint16_t kTpRecv = 4;
inline constexpr uint16_t kDpSend = 5;
inline constexpr uint16_t kDpRecv = 6;
inline constexpr uint16_t kPpSend = 7;
inline constexpr uint16_t kPpRecv = 8;
inline constexpr uint16_t kPpGradSend = 9;   ///< pipeline backward (gradients flow upstream)
inline constexpr uint16_t kPpGradRecv = 10;
inline constexpr uint16_t kCpGradSend = 11;  ///< ring backward dK,dV partial sums
inline constexpr uint16_t kCpGradRecv = 12;
inline constexpr uint16_t kCpOuterSend = 13;      ///< double ring: K,V over the outer ring
inline constexpr uint16_t kCpOuterRecv = 14;
inline constexpr uint16_t kCpOuterGradSend = 15;  ///< double ring: dK,dV over the outer ring
inline constexpr uint16_t kCpOuterGradRecv = 16;
inline constexpr uint16_t kEpSend = 17;  ///< MoE token dispatch / combine all-to-all (scheme "ep")
inline constexpr uint16_t kEpRecv = 18;
/// Host thread of a rank: framework overhead ops (category "overhead") that launch kernels.
inline constexpr uint16_t kHost = 19;
/// Copies between a GPU and its host's memory (activation CPU offloading), beside the compute.
inline constexpr uint16_t kOffload = 20;
/// HSDP's all-reduce of each reduced gradient shard across the replicas: its replicate group is
/// a communicator of its own, and PyTorch's ProcessGroupNCCL runs each communicator's
/// collectives on its own stream, so it queues apart from the shard group's gathers and
/// reduce-scatters (scheme "dp").
inline constexpr uint16_t kDpReplicateSend = 21;
inline constexpr uint16_t kDpReplicateRecv = 22;
/// Streams whose transfers are context-parallel attention traffic.
inline bool is_cp(uint16_t s) {
  return s == kCpSend || s == kCpRecv || (s >= kCpGradSend && s <= kCpOuterGradRecv);
}
const char* name(uint16_t s);
}  // namespace stream

/// The attention kernel call a compute op runs (for profiles and traces): the very call the
/// cost model priced.
using KernelShape = model::AttentionCall;

/// What a user reads in a trace. Strings are interned in the graph to keep ops small.
struct OpLabel {
  uint32_t name = 0;       ///< interned: "attn_fwd", "kv_p2p", "merge", "allgather_kv", ...
  uint32_t scheme = 0;     ///< interned: "ring-zigzag", "ulysses", "tp", "dp", ... (0 = "")
  uint32_t category = 0;   ///< interned: "attention", "gemm", "memory", "p2p", "collective"
  int32_t layer = -1;
  int32_t micro = -1;      ///< micro-batch
  int32_t step = -1;       ///< ring step or collective algorithm step
  int32_t chunk_q = -1, chunk_kv = -1;  ///< ring transfers: chunk_kv = the block carried
  Phase phase = Phase::None;
  int32_t shape = -1;      ///< index into shapes(), -1 if not an attention kernel
};

struct Op {
  OpKind kind = OpKind::Compute;
  uint16_t stream = 0;        ///< compute: its stream; transfer: sender's stream
  uint16_t peer_stream = 0;   ///< transfer: receiver's stream
  /// Outside stream order: one of a collective's concurrent transfers (NCCL channels run in one
  /// kernel); the collective fences its streams with zero-time ops instead (collectives.cpp).
  bool unordered = false;
  /// Transfer: the compute it overlaps is already priced slower for it (TE userbuffers' SM
  /// margin, tp_overlap.hpp), so the engines add no generic interference while it runs.
  bool interference_priced = false;
  /// Compute: priced by the cost model (schedule::Pricer), so the replay multiplies duration_s
  /// (the nominal time) by the graph's ComputeNoise for this op, and compute interference slows
  /// it while its GPU has a transfer in flight. Fences, launches and framework overheads are
  /// not: host work or latencies (NCCL's and the kernels' launches, the framework's ops, a ring
  /// step's event wait) that SM contention does not lengthen.
  bool noisy = false;
  /// Unordered transfers only: the route's lone bottleneck bandwidth over this transfer's fair
  /// share of the collective's concurrent load, min over its links of bw / transfers (>= 1).
  /// The analytic engine (no contention model) divides the bandwidth by it; SimGrid shares the
  /// links itself and ignores it. A fat link carrying many flows is not the bottleneck: an NDR
  /// leaf-spine link of 32 nodes x 50 GB/s / 8 spines carries 4 flows at 50 GB/s each.
  float sharers = 1;
  int32_t rank = 0;           ///< compute: its GPU; transfer: sender
  int32_t peer = -1;          ///< transfer: receiver
  double duration_s = 0;      ///< compute: time on an idle, nominal GPU (noise applies at replay)
  double flops = 0;           ///< compute: model FLOPs (for TFLOP/s), informational
  double bytes = 0;           ///< transfer: bytes on the wire
  double max_rate_Bps = 0;    ///< transfer: cap of the software path (0 = none)
  double extra_latency_s = 0; ///< transfer: software latency added before data moves
  OpLabel label;
};

/// The graph grew past the op limit its builder was given (TaskGraph::set_op_limit): it would
/// need more memory than the run may use. Thrown while building, before the memory is spent.
class OpLimitExceeded : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// Transfers that move in lockstep, ops [first, first + count): one NCCL channel's pipelined
/// ring or tree, or one node's NVLS reduction. NCCL's kernel forwards each chunk as it arrives
/// through a few buffer slots per connection (NCCL_STEPS = 8), so every connection of the
/// pipeline carries data at the pace of its slowest one: the engines start the members together
/// once all joined and end them together, at one rate for all (SimGrid: one flow whose route is
/// every member's links, a link counted once per member crossing it).
struct Pipeline {
  OpId first;
  uint32_t count;
};

}  // namespace cpsim::schedule
