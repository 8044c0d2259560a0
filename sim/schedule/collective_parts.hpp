#pragma once
/// Internal to the collective builders (collectives.cpp, nccl_algos.cpp): route facts of one
/// transfer, NCCL's per-hop latency, and the lanes a multi-channel collective runs on.
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "schedule/collectives.hpp"
#include "schedule/nccl_tuner.hpp"

namespace cpsim::schedule::detail {

/// What one transfer of the algorithm needs: its endpoints and route facts.
struct Hop {
  int src = 0, dst = 0;
  model::LinkClass cls = model::LinkClass::NVLink;
  double latency_s = 0;
  double bw_Bps = 0;
};
Hop make_hop(const model::Topology& topo, int src, int dst);
/// The same for a route already known (topo.route(src, dst)).
Hop hop_on_route(const model::Topology& topo, int src, int dst, const std::vector<uint32_t>& route);

/// NCCL's per-hop latency for the path class (NVLink / PCIe / network), protocol index p.
double hop_latency_s(const scenario::NcclSpec& nc, model::LinkClass c, int p);

/// A ring lane's latency per algorithm step: the mean over its hops of NCCL's hop latency plus
/// the wire latency. A ring's step s crosses hop k - s, so `steps` steps cross each hop about
/// steps / n times: tuning.cc's ring latency, base + (nsteps - nInterSteps) x intra +
/// nInterSteps x inter, as the stepwise replay accumulates it.
double lane_step_latency_s(const scenario::NcclSpec& nc, const std::vector<Hop>& hops, int p);
/// A pipelined ring transfer's software latency: as its lane's `steps` algorithm steps would pay
/// it, base + steps x lane_step_s, less the wire latency of its own hop, which the engine adds.
double pipelined_latency_s(const scenario::NcclSpec& nc, const Hop& h, int p, int steps, double lane_step_s);

/// A fenced transfer's Op::sharers on `route`: its bottleneck bandwidth over the worst fair
/// share min over links of bw / transfers_on(link) (>= 1).
float fair_sharers(const model::Topology& topo, const std::vector<uint32_t>& route,
                   const std::function<uint32_t(uint32_t)>& transfers_on);

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
  bool sharers_set = false;  ///< lean_lanes set each transfer's sharers (close_fence leaves them)
};
Fence open_fence(TaskGraph& g, const CollectiveRequest& req, const OpLabel& label);
/// Adds a fenced transfer between group indices (after both ranks' begin and `after`), at most
/// `max_Bps` (0: the links decide).
OpId fenced_transfer(TaskGraph& g, Fence& f, const CollectiveRequest& req, int from, int to,
                     double wire_bytes, const OpLabel& label, double extra_s, OpId after = kNoOp,
                     double max_Bps = 0);
/// The end ops; returns done per group index. Sets each fenced transfer's `sharers`: its
/// route's bottleneck bandwidth over min_l(bw_l / transfers of the same step on l) (label.step;
/// all of them when pipelined, or when not `by_step`: every transfer runs at once).
std::vector<OpId> close_fence(TaskGraph& g, const model::Topology& topo, Fence& f,
                              const CollectiveRequest& req, const OpLabel& label, bool by_step = true);

/// Group indices per node, nodes in order of first appearance, members in group order.
std::vector<std::vector<int>> nodes_of(const model::Topology& topo, const std::vector<int>& ranks);

/// Group indices per NVLink domain (NCCL's "node": a multi-node NVLink domain such as NVL72 is
/// one, MNNVL), domains in order of first appearance, members in group order.
std::vector<std::vector<int>> domains_of(const model::Topology& topo, const std::vector<int>& ranks);

/// What a pipelined ring lane's transfer costs: the algorithm's steps, the protocol (index)
/// and its efficiency.
struct LaneCost {
  int steps = 0;
  int protocol = 0;
  double efficiency = 1;
};
/// A lean build's collective facts by group (TaskGraph::collective_memo): its shape, its
/// lanes (by lanes x channels) and the kinds of a single lane's hops (equal latency,
/// bandwidth and class). Only lean builds keep them: the same groups gather every layer's
/// weights, where a full build's groups are as many as its collectives' ranks differ.
struct CollectiveMemo {
  std::unordered_map<std::string, GroupShape> shapes;
  std::unordered_map<std::string, std::vector<Lane>> lanes;
  std::unordered_map<std::string, std::vector<uint32_t>> hops;
  /// lane_step_latency_s of each lane, by group, lanes and protocol
  std::unordered_map<std::string, std::vector<double>> lane_steps;
};
/// The memo of a lean build (created on first use), or nullptr.
CollectiveMemo* memo_of(TaskGraph& g);
std::string ranks_key(const std::vector<int>& ranks);

/// True where a lean build (TaskGraph::has_phantoms) may leave out some of this group's
/// transfers: some member is a phantom rank.
bool lean_group(const TaskGraph& g, const CollectiveRequest& req);
/// A collective that builds every member's ops: its phantom members are kept from now on
/// (Phantoms::kKept). Throws LeanRefused if one was left out of an earlier one.
void keep_phantoms(TaskGraph& g, const CollectiveRequest& req);
/// A pipelined single-lane ring (every member's transfers after the join, each at its own
/// hop's pace): the group indices whose launch and transfers are built. Phantoms that are
/// alike (the same history, dependency, and send and receive hops) time the same, so one of
/// them stands for the others: the join waits for the same latest launch, and a built GPU's
/// transfers are all built. Throws LeanRefused where no phantom alike was built so far.
std::vector<char> lean_ring_members(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                                    const Lane& lane);
/// The pipelined lanes of a multi-rail ring collective whose group has phantom members
/// (lean_group): each lane is still one Pipeline, of the transfers that touch a built GPU and
/// of those that set its pace (the latest launch, the longest serialisation), each with the
/// sharers close_fence would have given it among all of them. The phantom members' fence ops
/// stay and end when every lane has. lean_lanes.cpp.
void lean_lanes(TaskGraph& g, const model::Topology& topo, Fence& f, const CollectiveRequest& req,
                const std::vector<Lane>& lanes, const OpLabel& label, OpId join, const LaneCost& cost);

/// NCCL's protocol for an all-to-all of `bytes` per rank over n ranks (its peers' sends').
Protocol all_to_all_protocol(double bytes, int n);
/// All-to-all as NCCL's grouped send/recv, every transfer at once (stepwise: one per pair;
/// pipelined: a few per rank carrying its node's and the network's shares); `comm` is the
/// group's shape, which sets NCCL's p2p channels across nodes. all_to_all.cpp.
std::vector<OpId> build_all_to_all(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                                   const GroupShape& comm, const OpLabel& label, int protocol, double efficiency);

/// Tree / NVLS / NVLS-Tree all-reduce, built pipelined (every transfer streams once all ranks
/// joined) with the tuner's latency as software latency. nccl_algos.cpp.
CollectiveResult build_tree(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                            const TunerChoice& c, const OpLabel& label);
CollectiveResult build_nvls(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                            const TunerChoice& c, const OpLabel& label);

}  // namespace cpsim::schedule::detail
