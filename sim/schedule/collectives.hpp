#pragma once
/// NCCL collectives on the TaskGraph, as NCCL runs them: algorithm (Ring, Tree, NVLS,
/// NVLS-Tree), protocol (LL / LL128 / Simple) and channel count chosen by NCCL's tuner
/// (nccl_tuner.hpp); rings on multi-node groups run one lane per NIC rail, each carrying its
/// channels' share of the data, so a collective reaches the sum of the rails. Ring steps are
/// transfers (or one pipelined transfer per rank and lane); Tree and NVLS are built pipelined
/// (nccl_algos.cpp). `algorithm = Ring, channels = 1` is the single rank-order ring.
#include <vector>

#include "model/topology.hpp"
#include "schedule/nccl_tuner.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

struct CollectiveRequest {
  CollOp op = CollOp::AllReduce;
  std::vector<int> ranks;       ///< group members in ring order
  /// nccl-tests convention: all-reduce = buffer bytes; all-gather / reduce-scatter = total
  /// (per-rank count x n); all-to-all = bytes each rank sends in total (incl. to itself).
  double bytes = 0;
  Protocol protocol = Protocol::Auto;
  Algorithm algorithm = Algorithm::Auto;
  int channels = 0;             ///< 0 = NCCL's count for this size; 1 + Ring = one rank-order ring
  uint16_t send_stream = stream::kCpSend;
  uint16_t recv_stream = stream::kCpRecv;
  OpLabel label;                ///< name/scheme/layer/phase copied to every op; step is set
  /// deps[i]: rank ranks[i] may start only after this op (kNoOp = at once). Empty = none.
  std::vector<OpId> deps;
};

struct CollectiveResult {
  /// done[i]: an op after which the collective is complete on ranks[i].
  std::vector<OpId> done;
  Protocol protocol = Protocol::Simple;
  Algorithm algorithm = Algorithm::Ring;
  int channels = 1;
  double predicted_s = 0;       ///< NCCL's own model estimate (tuning.cc), not the simulation
};

/// Above this many pairs at once an all-to-all is built pipelined whatever the graph's setting:
/// in SimGrid they share the NICs and spines in one max-min system, re-solved as each ends
/// (1 GiB stepwise: 8 nodes 0.12 s, 16 nodes 1.4 s, 32 nodes over 300 s; pipelined the same
/// times to 5 digits at 2 and 16 nodes, in 0.07 s).
inline constexpr double kMaxAllToAllPairs = 128.0 * 127;
CollectiveResult add_collective(TaskGraph& g, const model::Topology& topo,
                                const CollectiveRequest& req);

/// One NCCL send/recv (p2p) from src to dst, after `dep` (kNoOp = none); returns the op.
/// Priced as NCCL runs it (p2p_plan): `comm` is the communicator's shape (group_shape of its
/// ranks), which sets the channels per peer; nullptr = a communicator of the pair alone.
OpId add_p2p(TaskGraph& g, const model::Topology& topo, int src, int dst, double bytes,
             const OpLabel& label, OpId dep, uint16_t send_stream = stream::kCpSend,
             uint16_t recv_stream = stream::kCpRecv, const GroupShape* comm = nullptr);

}  // namespace cpsim::schedule
