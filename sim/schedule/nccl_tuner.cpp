// NCCL's tuner, reduced to what cpsim's platforms describe. Sources (github.com/NVIDIA/nccl):
//   search.cc  the channel search: model/nccl_channels (ring_graph / nvls_graph)
//   tuning.cc  ncclTunerConstantsDefaults, nvlsEfficiency, ncclTopoTuneModel,
//              treeCorrectionFactor, ncclTopoGetAlgoTime -> bandwidth / latency / time
//   enqueue.cc channel tuning (nc shrinks while nBytes < nc * nThreads * threadThreshold)
//   comm.h / device.h: NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD 8/8/64, max threads 512/640/512
#include "schedule/nccl_tuner.hpp"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "log/log.hpp"

namespace cpsim::schedule {
namespace {

/// One line per distinct choice: a step makes the same one for every layer and micro-batch.
void log_choice(CollOp op, const GroupShape& g, double bytes, Algorithm algo, Protocol proto, const TunerChoice& c) {
  const double mb = bytes / 1e6;
  char size[32];
  std::snprintf(size, sizeof size, mb >= 1000 ? "%.4g GB" : mb >= 1 ? "%.4g MB" : "%.4g kB",
                mb >= 1000 ? mb / 1000 : mb >= 1 ? mb : mb * 1000);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "nccl: %s of %s on %d ranks (%d node(s) x %d): %s/%s, %d channel(s), NCCL's estimate %.4g %s "
                "(%.4g GB/s bus)%s%s%s",
                coll_op_name(op), size, g.n, g.nodes, g.ppn, algorithm_name(c.algorithm),
                protocol_name(c.protocol), c.channels, c.predicted_s >= 1e-3 ? c.predicted_s * 1e3 : c.predicted_s * 1e6,
                c.predicted_s >= 1e-3 ? "ms" : "us", c.bus_GBps,
                algo != Algorithm::Auto || proto != Protocol::Auto ? "; asked for " : "",
                algo != Algorithm::Auto ? algorithm_name(algo) : "",
                proto != Protocol::Auto ? (std::string(" ") + protocol_name(proto)).c_str() : "");
  log::once(log::Level::Info, buf, buf);
}

}  // namespace

const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::AllGather: return "allgather";
    case CollOp::ReduceScatter: return "reducescatter";
    case CollOp::AllReduce: return "allreduce";
    case CollOp::AllToAll: return "alltoall";
    case CollOp::Broadcast: return "broadcast";
    case CollOp::Reduce: return "reduce";
  }
  return "?";
}

const char* protocol_name(Protocol p) {
  switch (p) {
    case Protocol::Auto: return "auto";
    case Protocol::LL: return "LL";
    case Protocol::LL128: return "LL128";
    case Protocol::Simple: return "Simple";
  }
  return "?";
}

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Auto: return "auto";
    case Algorithm::Ring: return "Ring";
    case Algorithm::Tree: return "Tree";
    case Algorithm::NVLS: return "NVLS";
    case Algorithm::NVLSTree: return "NVLSTree";
  }
  return "?";
}

namespace {

constexpr int kMaxChannels = model::kNcclMaxChannels;
constexpr int kNvlsChannels = 16;      // NCCL_NVLS_NCHANNELS default on Hopper/Blackwell

// tuning.cc ncclTunerConstantsDefaults, indexed [algo][proto], algo Tree, Ring, NVLS, NVLSTree.
enum { kTree, kRing, kNvls, kNvlsTree };
constexpr double kBaseLat[4][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}};
constexpr double kHwNvlink[4][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 25}, {0, 0, 25}};
constexpr double kHwPci[4][3] = {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}, {0, 0, 0}};
constexpr double kHwNet[4][3] = {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 18}, {0, 0, 20.9}};
// [arch][index2 = nodes 1, 2, >2]; llMaxBws' multi-node rows use the CPU vendor (Intel: row 0).
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0},
                                   {282.0, 90.0, 70.0}};
constexpr double kPerChRingLL128[4] = {20.0, 20.0, 36.7, 40.0};
constexpr double kPerChTreeLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0},
                                          {55.6, 31.67, 20.0}};
constexpr double kPerChTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0},
                                     {70.0, 42.8, 24.0}};
constexpr double kPerChNvlsTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0, 57.7, 45.5},
                                         {0, 96.0, 80.0}};
constexpr double kNvlsEfficiency[4] = {0, 0, 0.85, 0.74};
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
// comm.h thread thresholds and device.h thread counts, [proto].
constexpr double kThreadThreshold[3] = {8, 8, 64};
constexpr double kThreads[3] = {512, 640, 512};

int log2i(double x) { return x < 1 ? -1 : static_cast<int>(std::floor(std::log2(x))); }

}  // namespace

TunerChoice nccl_tune(const model::Topology& topo, CollOp op, const GroupShape& g, double bytes,
                      Algorithm algo, Protocol proto, int channels) {
  const auto& spec = topo.spec();
  const auto& nc = spec.nccl;
  const int arch = std::clamp(nc.arch, 0, 3);
  const int n = std::max(1, g.n), nodes = std::max(1, g.nodes);
  const int index2 = nodes <= 2 ? nodes - 1 : 2;
  const double ppn = static_cast<double>(n) / nodes;
  const bool nvlink = spec.intra == scenario::IntraFabric::NVSwitch;
  const NcclGraph ring = ring_graph(spec, g), nvls = nvls_graph(spec, g);
  const double ll_max = nodes == 1 ? kLlMaxBw[arch][0] : kLlMaxBw[0][index2];
  const int nsteps = op == CollOp::AllReduce ? 2 * (n - 1)
                     : (op == CollOp::AllGather || op == CollOp::ReduceScatter) ? n - 1 : n;

  TunerChoice best;
  best.predicted_s = std::numeric_limits<double>::infinity();
  const Algorithm algos[4] = {Algorithm::Tree, Algorithm::Ring, Algorithm::NVLS, Algorithm::NVLSTree};
  const Protocol protos[3] = {Protocol::LL, Protocol::LL128, Protocol::Simple};
  bool forced_possible = false;
  for (int a = 0; a < 4; ++a) {
    if (algo != Algorithm::Auto && algo != algos[a]) continue;
    // tuning.cc: broadcast / reduce run Ring only; all-gather / reduce-scatter Ring or NVLS
    // (NVLS for them is left out here: its multicast is not a set of GPU-to-GPU transfers).
    if (op != CollOp::AllReduce && a != kRing) continue;
    if (a == kNvls && (nvls.channels < 2 || nodes > 1)) continue;  // NVLS multi-node needs CollNet
    if (a == kNvlsTree && (nvls.channels < 2 || nodes == 1)) continue;
    for (int p = 0; p < 3; ++p) {
      if (proto != Protocol::Auto && proto != protos[p]) continue;
      if ((a == kNvls || a == kNvlsTree) && p != 2) continue;  // NVLS is Simple only
      if (p == 1 && !nvlink) continue;  // LL128 only over NVLink paths (typeIntra <= NVB)
      const NcclGraph& gr = (a == kNvls || a == kNvlsTree) ? nvls : ring;
      double bw = nodes <= 2 ? gr.bw_intra : gr.bw_inter;
      if (a == kNvls || a == kNvlsTree) {
        double intra_bw = gr.bw_intra * kNvlsEfficiency[arch] * (gr.channels - 1) / gr.channels;
        intra_bw *= op == CollOp::AllReduce ? 2.0 : (ppn - 1) / ppn;
        const double inter_bw = gr.bw_inter * ((nodes <= 2 && a == kNvlsTree) ? 2 : 1);
        bw = std::min({intra_bw, inter_bw,
                       a == kNvlsTree ? kPerChNvlsTree[arch][index2]
                                      : std::numeric_limits<double>::max()});
      }
      double bus = gr.channels * bw;
      if (a == kRing && p == 0) bus = std::min(ll_max, bus * 0.5);
      if (a == kRing && p == 1) bus = std::min(bus * 0.92, gr.channels * kPerChRingLL128[arch]);
      if (a == kTree) bus = std::min(bus * 0.92, gr.channels * kPerChTree[arch][index2]);
      if (a == kTree && p == 0) bus = std::min(bus / 3.8, ll_max);
      if (a == kTree && p == 1)
        bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                       gr.channels * kPerChTreeLL128[arch][index2]);
      // bus bandwidth -> algorithm bandwidth
      const double algbw = bus * ((a == kTree) ? 0.5 : static_cast<double>(n) / nsteps);
      // latency, microseconds
      const double intra_hw = (nvlink ? kHwNvlink : kHwPci)[a][p];
      double inter_lat = (ppn == 1 ? kHwNet[kTree][p] : kHwNet[a][p]);
      double lat = kBaseLat[a][p];
      if (a == kRing) {
        // The platform may override NCCL's Ring latencies (nccl.base_latency / hop_latency).
        lat = nc.base_latency_s[p] * 1e6;
        double hop = (nvlink ? nc.hop_nvlink_s[p] : nc.hop_pcie_s[p]) * 1e6;
        inter_lat = (ppn == 1 ? kHwNet[kTree][p] : nc.hop_net_s[p] * 1e6);
        if (op == CollOp::Broadcast || op == CollOp::Reduce) {
          lat += (nodes == 1 ? hop : nc.hop_net_s[p] * 1e6);
        } else {
          if (nodes > 1) hop = std::max(hop, p == 2 ? 3.0 : 1.0);  // getNetOverhead (Intel x86)
          const int inter_steps = nodes == 1 ? 0 : op == CollOp::AllReduce ? 2 * (nodes - 1) : nodes - 1;
          lat += (nsteps - inter_steps) * hop + inter_steps * inter_lat;
        }
      } else if (a == kTree) {
        lat += 2 * ((ppn - 1) * intra_hw + log2i(nodes) * inter_lat);
      } else if (a == kNvls) {
        lat = intra_hw;
      } else {
        lat += intra_hw + 2 * log2i(nodes) * inter_lat;
      }
      // ncclTopoGetAlgoTime
      const int log_size = log2i(bytes / 64);
      double eff_bw = algbw;
      if (a == kTree && log_size >= 0 && log_size < 23) eff_bw *= kTreeCorrection[p][log_size];
      if (a == kRing && p == 2 && nodes > 1 && op == CollOp::AllReduce &&
          bytes / (gr.channels * n) >= 64)
        lat *= arch < 1 ? 1.9 : 1.4;  // "plateau effect of ring"
      if (!(eff_bw > 0)) continue;
      forced_possible = true;
      const double t_us = lat + bytes / (1000.0 * eff_bw);
      if (t_us * 1e-6 < best.predicted_s) {
        best.algorithm = algos[a];
        best.protocol = protos[p];
        best.predicted_s = t_us * 1e-6;
        best.latency_s = lat * 1e-6;
        best.bus_GBps = bus;
        // enqueue.cc: Ring/Tree drop channels while each would get under nThreads x threshold
        // bytes; NVLS runs its own channel count.
        int c = gr.channels;
        if (a == kNvls || a == kNvlsTree) {
          c = std::min(kNvlsChannels, gr.channels);
        } else {
          const double thr = kThreadThreshold[p] * ((a == kRing && p == 0) ? n : 1);
          while (c >= 2 && bytes < c * kThreads[p] * thr) --c;
        }
        best.channels = c;
      }
    }
  }
  if (!forced_possible)
    throw std::invalid_argument(std::string("NCCL cannot run ") + coll_op_name(op) + " with algorithm " +
                                algorithm_name(algo) + " and protocol " + protocol_name(proto) +
                                " on this group (" + std::to_string(n) + " ranks, " +
                                std::to_string(nodes) + " node(s)" +
                                (nc.nvls ? "" : ", platform without NVLS") + ")");
  if (channels > 0) best.channels = channels;
  if (log::enabled(log::Level::Info)) log_choice(op, g, bytes, algo, proto, best);
  return best;
}

namespace {

constexpr double kP2pLLThreshold = 16384;     // enqueue.cc NCCL_P2P_LL_THRESHOLD
constexpr double kP2pNetChunk = 128.0 * 1024;  // init.cc NCCL_P2P_NET_CHUNKSIZE (1 << 17)
constexpr int kSteps = 8;                      // device.h NCCL_STEPS: slots per channel
// paths.cc NCCL_P2P_PER_CHANNEL_NET_BW (default 14 GB/s, NCCL 2.29.2 on): what NCCL counts one
// p2p channel to carry through the network; it gives a network peer as many channels as the
// GPU's NICs need at that rate. One channel reaching no more is what sendrecv rings measure where
// NCCL gives a peer a single channel: 14.5-14.7 GB/s on B200 + CX-7 NDR from 16 to 64 nodes
// (together-nccl-tests B200 sendrecv-p2p-scaling) and 18.3 GB/s on GH200 + Slingshot at 8 nodes,
// back to the NIC's 24.2 with NCCL_NCHANNELS_PER_NET_PEER=4 (NCCL issue #1272).
constexpr double kP2pChannelNetBps = 14e9;
// device.h NCCL_MAX_DEV_WORK_P2P_PER_BATCH: p2p operations one channel takes per round.
constexpr int kP2pPerBatch = 8;

/// topo.h ncclTopoNVLinkBw: NCCL's bandwidth per NVLink, GB/s, by the tuner's arch index
/// (SM70 20, SM80 20, SM90 20.6, SM100 40.1).
double nvlink_link_GBps(int arch) { return arch >= 3 ? 40.1 : arch == 2 ? 20.6 : 20.0; }

int pow2_up(int x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

}  // namespace

P2pPlan p2p_plan(const model::Topology& topo, const GroupShape& comm, int src, int dst, double bytes,
                 Protocol proto) {
  const auto& spec = topo.spec();
  const auto& nc = spec.nccl;
  P2pPlan plan;
  plan.network = !topo.same_nvlink_domain(src, dst) && spec.nics_per_node > 0;
  // paths.cc ncclTopoComputeP2pChannels: the communicator's p2p channels, and the fewest any
  // peer of it needs (a network peer when it spans NVLink domains, an NVLink or PCIe peer else).
  // (model/nccl_channels: the search's doubled, rounded up to a power of two).
  const int p2pn = model::nccl_p2p_channels(spec, comm);
  int per_peer = kMaxChannels;
  if (comm.nodes > 1) {
    // paths.cc ncclTopoGetNchannels (NCCL 2.29): a network peer gets a channel per local NIC
    // (one here), or more to reach the NIC's bandwidth at kP2pChannelNetBps each:
    // max(1, divUp((int)netBw, 14)) = 4 for a 400 Gb/s NIC, 2 for 200 Gb/s.
    const int nic_GBps = static_cast<int>(spec.nic.bw_Bps / 1e9);
    const int channel_GBps = static_cast<int>(kP2pChannelNetBps / 1e9);
    per_peer = std::max(1, (nic_GBps + channel_GBps - 1) / channel_GBps);
  }
  if (spec.intra == scenario::IntraFabric::NVSwitch && comm.ppn > 1)
    per_peer = std::min(per_peer, 2 * std::max(1, static_cast<int>(model::nccl_intra_GBps(spec) / nvlink_link_GBps(nc.arch))));
  else if (comm.ppn > 1)
    per_peer = std::min(per_peer, 2);  // a PCIe peer
  per_peer = pow2_up(std::min(per_peer, kMaxChannels));
  if (comm.nodes > 1) {
    // paths.cc ncclTopoComputeP2pChannels: across nodes the network is the bottleneck, so the
    // channels per peer halve until every peer fits one round of the communicator's p2p channels
    // (kP2pPerBatch operations per channel): 4 per peer up to 32 ranks on 16 p2p channels,
    // 2 at 64, 1 from 128.
    while (per_peer * ((comm.n + kP2pPerBatch - 1) / kP2pPerBatch) > p2pn && per_peer > 1) per_peer /= 2;
  } else {
    per_peer = std::min(per_peer, p2pn);
  }
  // enqueue.cc scheduleP2pTasksToPlan / addP2pToPlan: an operation starts on nChannelsMin (the
  // per-peer channels halved until every rank fits the p2p channels once) or fewer, one per
  // half step (64 KiB across nodes, 16 KiB in one), and doubles while a part is over a step
  // (128 KiB across nodes, 32 steps in one), up to the channels per peer.
  int ch_min = per_peer;
  while (ch_min * comm.n > p2pn && ch_min > 1) ch_min /= 2;
  const double min_part = comm.nodes > 1 ? kP2pNetChunk / 2 : kP2pNetChunk / 8;
  const double max_part = comm.nodes > 1 ? kP2pNetChunk : kP2pNetChunk * 32;
  int ch = std::max(1, std::min(ch_min, static_cast<int>(std::ceil(bytes / min_part))));
  while (std::max(min_part, bytes / ch) > max_part && ch <= per_peer / 2) ch *= 2;
  plan.channels = ch;
  plan.protocol = proto != Protocol::Auto ? proto
                  : bytes / plan.channels <= kP2pLLThreshold ? Protocol::LL : Protocol::Simple;
  const int p = plan.protocol == Protocol::LL ? 0 : plan.protocol == Protocol::LL128 ? 1 : 2;
  plan.latency_s = nc.p2p_latency_s;
  plan.max_Bps = nc.p2p_max_Bps;
  if (plan.network) {
    plan.latency_s += nc.hop_net_s[p];
    const double nic_Bps = spec.nic.bw_Bps * spec.nic.efficiency;
    const double round_trip_s = nc.hop_net_s[2] + kP2pNetChunk / nic_Bps + nc.hop_net_s[0];
    const double window_Bps = plan.channels * kSteps * kP2pNetChunk / round_trip_s;
    const double channel_Bps = std::min(window_Bps, plan.channels * kP2pChannelNetBps);
    plan.max_Bps = plan.max_Bps > 0 ? std::min(plan.max_Bps, channel_Bps) : channel_Bps;
  }
  return plan;
}

}  // namespace cpsim::schedule
