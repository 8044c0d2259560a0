#pragma once
/// Internal to the collective builders (collectives.cpp, nccl_algos.cpp): route facts of one
/// transfer, NCCL's per-hop latency, and the lanes a multi-channel collective runs on.
#include <vector>

#include "schedule/collectives.hpp"

namespace cpsim::schedule::detail {

/// What one transfer of the algorithm needs: its endpoints and route facts.
struct Hop {
  int src = 0, dst = 0;
  model::LinkClass cls = model::LinkClass::NVLink;
  double latency_s = 0;
  double bw_Bps = 0;
};
Hop make_hop(const model::Topology& topo, int src, int dst);

/// NCCL's per-hop latency for the path class (NVLink / PCIe / network), protocol index p.
double hop_latency_s(const scenario::NcclSpec& nc, model::LinkClass c, int p);

/// A lane: channels whose transfers take the same links, merged into one set of transfers
/// (max-min sharing gives a merged flow the same rate as its channels together). On one node
/// every channel crosses the same NVLink ports, so one lane; across nodes one lane per rail.
struct Lane {
  std::vector<int> order;  ///< group indices (into req.ranks) in ring order
  double share = 1;        ///< fraction of the data this lane's channels carry
};

/// Ring orders, one per lane. One lane in request order when `lanes` is 1. Otherwise each
/// node's members are rotated so lane l starts at the member on rail l, and every other node is
/// walked backwards: the ring then leaves node m and enters node m+1 on the same rail, as
/// NCCL's graph search (with PXN) keeps each channel on its NIC rail.
std::vector<Lane> ring_lanes(const model::Topology& topo, const std::vector<int>& ranks,
                             int lanes, int channels);

/// Concurrent transfers of one collective: they run outside stream order (Op::unordered), and
/// zero-time ops on each rank's send and receive streams hold those streams from the start
/// (after the rank's dependency) to the end of the rank's part, as NCCL's one kernel does.
struct Fence {
  std::vector<OpId> begin;                ///< per group index: the rank may start
  std::vector<std::vector<OpId>> sends, recvs;  ///< per group index: its transfers
};
Fence open_fence(TaskGraph& g, const CollectiveRequest& req, const OpLabel& label);
/// Adds a fenced transfer between group indices (after both ranks' begin and `after`).
OpId fenced_transfer(TaskGraph& g, Fence& f, const CollectiveRequest& req, int from, int to,
                     double wire_bytes, const OpLabel& label, double extra_s, OpId after = kNoOp);
/// The end ops; returns done per group index. Sets each fenced transfer's `sharers`: its
/// route's bottleneck bandwidth over min_l(bw_l / transfers of the same step on l) (label.step;
/// all of them when pipelined).
std::vector<OpId> close_fence(TaskGraph& g, const model::Topology& topo, Fence& f,
                              const CollectiveRequest& req, const OpLabel& label);

/// Tree / NVLS / NVLS-Tree all-reduce, built pipelined (every transfer streams once all ranks
/// joined) with the tuner's latency as software latency. nccl_algos.cpp.
CollectiveResult build_tree(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                            const TunerChoice& c, const OpLabel& label);
CollectiveResult build_nvls(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                            const TunerChoice& c, const OpLabel& label);

}  // namespace cpsim::schedule::detail
