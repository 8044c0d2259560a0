#pragma once
/// NCCL's channels as its topology search finds them (github.com/NVIDIA/nccl, src/graph/search.cc,
/// src/graph/connect.cc, src/graph/paths.cc): how many channels a communicator's rings and NVLS
/// get, at what per-channel bandwidth, and how many p2p channels it opens. The tuner
/// (schedule/nccl_tuner) prices collectives and send/recv from them; the memory model
/// (model/allocator) counts the connection buffers they hold.
#include <vector>

#include "model/topology.hpp"

namespace cpsim::model {

/// MAXCHANNELS (device.h): the most channels a communicator opens.
inline constexpr int kNcclMaxChannels = 32;

/// How a rank group lies on the platform: NCCL's nNodes counts NVLink domains (a multi-node
/// NVLink domain such as NVL72 is one "node" to NCCL's MNNVL support), ppn its ranks per node.
struct GroupShape {
  int n = 0;
  int nodes = 1;
  int ppn = 1;     ///< the largest number of group members in one node
  int rails = 1;   ///< distinct NIC rails the members of one node reach (1 on one node)
};
GroupShape group_shape(const Topology& topo, const std::vector<int>& ranks);

/// One algorithm's graph: channels x per-channel bandwidth (GB/s), as search.cc finds it.
struct NcclGraph {
  int channels = 0;
  double bw_intra = 0, bw_inter = 0;
};
NcclGraph ring_graph(const scenario::PlatformSpec& spec, const GroupShape& g);
NcclGraph nvls_graph(const scenario::PlatformSpec& spec, const GroupShape& g);

/// NCCL's bandwidth per GPU through the intra-node fabric, GB/s: NVLink count x NCCL's per-link
/// figure, which the presets encode as nvlink.bw x efficiency (e.g. 18 x 20.6 = 370.8 on H100).
double nccl_intra_GBps(const scenario::PlatformSpec& spec);

/// paths.cc ncclTopoComputeP2pChannels: the communicator's p2p channels, its collective channels
/// (the ring search's doubled, connect.cc ncclTopoPostset) rounded up to a power of two, between
/// 1 (MIN_P2P_NCHANNELS) and 32 (MAX_P2P_NCHANNELS): 32 on H100 for the ring's 12.
int nccl_p2p_channels(const scenario::PlatformSpec& spec, const GroupShape& g);

}  // namespace cpsim::model
