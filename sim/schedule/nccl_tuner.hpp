#pragma once
/// NCCL's choice of algorithm, protocol and channel count for one collective, as NCCL 2.2x makes
/// it: a topology search gives each algorithm's graph (channels x per-channel bandwidth,
/// src/graph/search.cc), the tuning model turns it into a bus bandwidth and a latency per
/// algorithm and protocol (src/graph/tuning.cc, ncclTopoTuneModel), the fastest estimate wins
/// (ncclTopoGetAlgoTime), and the channel count shrinks for small sizes (src/enqueue.cc).
/// Every constant below cites that file of github.com/NVIDIA/nccl (master, June 2026).
#include <string>
#include <vector>

#include "model/nccl_channels.hpp"
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

/// The channel search is a model of NCCL (model/nccl_channels): the tuner reads it.
using model::GroupShape;
using model::group_shape;
using model::NcclGraph;
using model::ring_graph;
using model::nvls_graph;

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

/// How NCCL runs one send/recv (p2p) between two ranks of a communicator.
///  - channels: paths.cc ncclTopoComputeP2pChannels. The communicator's p2p channels are its
///    collective channels (twice the ring search's, connect.cc; MIN_P2P_NCHANNELS 1,
///    MAX_P2P_NCHANNELS 32) rounded up to a power of two; every peer pair gets the smallest count any peer needs, rounded up to a power of
///    two: an NVLink peer 2 x its links, a network peer NCCL_NCHANNELS_PER_NET_PEER (auto: 2,
///    halved while 2 x nRanks > 4 x p2p channels, at least one per NIC the GPU drives).
///  - protocol: enqueue.cc, LL when a channel's share is at most NCCL_P2P_LL_THRESHOLD (16 KiB),
///    Simple otherwise (LL128 is never used for p2p).
///  - latency: within an NVLink domain the platform's p2p latency (nccl.p2p_latency); across
///    the network that plus NCCL's network step latency for the protocol (tuning.cc hwLat NET:
///    the proxy thread posting the RDMA write, the receiver's proxy polling it, the flag to the
///    GPU; Simple 14 us, LL 2.7 us). The engine adds the route's wire latency.
///  - rate: within a domain the platform's pair cap (nccl.p2p_max_bw). Across the network a
///    channel keeps NCCL_STEPS (8) chunks of NCCL_P2P_NET_CHUNKSIZE (128 KiB, init.cc) in
///    flight, and a slot is reused only once its chunk has been written (one Simple network
///    step plus the chunk's time on the NIC) and the receiver has handed it back (a small
///    write: one LL network step), so channels x 8 x 128 KiB per that round trip.
struct P2pPlan {
  Protocol protocol = Protocol::Simple;
  int channels = 1;        ///< p2p channels the pair's bytes are spread over
  bool network = false;    ///< through the network transport (net.cc), not NVLink/PCIe p2p
  double latency_s = 0;    ///< software latency of one message (the engine adds the wire's)
  double max_Bps = 0;      ///< the pair's rate cap, bytes/s; 0 = none
};
/// `comm` is the communicator the send runs in (group_shape of its ranks): its size and spread
/// set the channels per peer.
/// `proto` other than Auto is a protocol the caller forces (NCCL_PROTO): it sets the latency.
P2pPlan p2p_plan(const model::Topology& topo, const GroupShape& comm, int src, int dst, double bytes,
                 Protocol proto = Protocol::Auto);

}  // namespace cpsim::schedule
