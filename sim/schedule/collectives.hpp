#pragma once
/// NCCL-like collectives as their algorithm's steps on the TaskGraph: ring all-gather,
/// reduce-scatter, all-reduce (2(n-1) steps), pairwise all-to-all, p2p. Protocol (LL / LL128 /
/// Simple) chosen like NCCL's tuner, from base + per-hop latency and protocol efficiency.
#include <vector>

#include "model/topology.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

enum class CollOp { AllGather, ReduceScatter, AllReduce, AllToAll, Broadcast };
enum class Protocol { Auto, LL, LL128, Simple };
const char* coll_op_name(CollOp op);
const char* protocol_name(Protocol p);

struct CollectiveRequest {
  CollOp op = CollOp::AllReduce;
  std::vector<int> ranks;       ///< group members in ring order
  /// nccl-tests convention: all-reduce = buffer bytes; all-gather / reduce-scatter = total
  /// (per-rank count x n); all-to-all = bytes each rank sends in total (incl. to itself).
  double bytes = 0;
  Protocol protocol = Protocol::Auto;
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
  double predicted_s = 0;       ///< the tuner's contention-free estimate
};

CollectiveResult add_collective(TaskGraph& g, const model::Topology& topo,
                                const CollectiveRequest& req);

/// One NCCL send/recv (p2p) from src to dst, after `dep` (kNoOp = none); returns the op.
OpId add_p2p(TaskGraph& g, const model::Topology& topo, int src, int dst, double bytes,
             const OpLabel& label, OpId dep, uint16_t send_stream = stream::kCpSend,
             uint16_t recv_stream = stream::kCpRecv);

}  // namespace cpsim::schedule
