#pragma once
/// NCCL's choice of algorithm, protocol and channel count for one collective, as NCCL 2.2x makes
/// it: a topology search gives each algorithm's graph (channels x per-channel bandwidth,
/// src/graph/search.cc), the tuning model turns it into a bus bandwidth and a latency per
/// algorithm and protocol (src/graph/tuning.cc, ncclTopoTuneModel), the fastest estimate wins
/// (ncclTopoGetAlgoTime), and the channel count shrinks for small sizes (src/enqueue.cc).
/// Every constant below cites that file of github.com/NVIDIA/nccl (master, June 2026).
#include <string>
#include <vector>

#include "model/topology.hpp"

namespace cpsim::schedule {

enum class CollOp { AllGather, ReduceScatter, AllReduce, AllToAll, Broadcast, Reduce };
enum class Protocol { Auto, LL, LL128, Simple };
/// CollNet (in-network SHARP reduction) is not modelled: it needs switch support NCCL enables
/// only with NCCL_COLLNET_ENABLE, and the bundled platforms do not describe it.
enum class Algorithm { Auto, Ring, Tree, NVLS, NVLSTree };
const char* coll_op_name(CollOp op);
const char* protocol_name(Protocol p);
const char* algorithm_name(Algorithm a);

/// How a rank group lies on the platform: NCCL's nNodes counts NVLink domains (a multi-node
/// NVLink domain such as NVL72 is one "node" to NCCL's MNNVL support), ppn its ranks per node.
struct GroupShape {
  int n = 0;
  int nodes = 1;
  int ppn = 1;     ///< the largest number of group members in one node
  int rails = 1;   ///< distinct NIC rails the members of one node reach (1 on one node)
};
GroupShape group_shape(const model::Topology& topo, const std::vector<int>& ranks);

/// One algorithm's graph: channels x per-channel bandwidth (GB/s), as search.cc finds it.
struct NcclGraph {
  int channels = 0;
  double bw_intra = 0, bw_inter = 0;
};
NcclGraph ring_graph(const scenario::PlatformSpec& spec, const GroupShape& g);
NcclGraph nvls_graph(const scenario::PlatformSpec& spec, const GroupShape& g);

struct TunerChoice {
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::Simple;
  int channels = 1;          ///< channels this size runs on
  double predicted_s = 0;    ///< NCCL's own estimate: latency + bytes / bandwidth
  double latency_s = 0;      ///< the model's latency term (launch + hops)
  double bus_GBps = 0;       ///< the model's bus bandwidth for the choice
};

/// NCCL's tuner for `op` of `bytes` on the group. `algo`/`proto` Auto = free choice; a forced
/// choice NCCL cannot run (NVLS with LL, NVLS on a platform without it, Tree for all-gather)
/// throws std::invalid_argument. `channels` > 0 overrides the channel count.
TunerChoice nccl_tune(const model::Topology& topo, CollOp op, const GroupShape& g, double bytes,
                      Algorithm algo = Algorithm::Auto, Protocol proto = Protocol::Auto,
                      int channels = 0);

/// NCCL's p2p channels per peer pair (paths.cc: p2pnChannelsPerPeer; NCCL_NCHANNELS_PER_NET_PEER
/// defaults to 2 across the network); within a node the p2p channels of the ring graph.
int p2p_channels(const model::Topology& topo, int src, int dst);

}  // namespace cpsim::schedule
