// NCCL's channel search, reduced to what cpsim's platforms describe. Sources
// (github.com/NVIDIA/nccl): search.cc speedArray*, ncclTopoDupChannels -> ring_graph / nvls_graph;
// connect.cc ncclTopoPostset and paths.cc ncclTopoComputeP2pChannels -> nccl_p2p_channels.
#include "model/nccl_channels.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace cpsim::model {
namespace {

// search.cc: per-channel speeds (GB/s) the graph search tries, fastest first.
const std::vector<double> kNcclIntra = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
const std::vector<double> kNcclInter = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2};
const std::vector<double> kNcclIntra90 = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
const std::vector<double> kNcclInter90 = {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2};
const std::vector<double> kNcclIntra100 = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
const std::vector<double> kNcclInter100 = {96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22,
                                           20, 17.5, 15, 12, 6, 3, 2.4, 1.2};
constexpr int kNcclSearchChannels = 16;  // the ring search's channel ceiling before duplication
constexpr int kNcclMaxNvlsArity = 32;    // NCCL_MAX_NVLS_ARITY (device.h)

const std::vector<double>& search_speeds(int arch, bool inter) {
  if (arch >= 3) return inter ? kNcclInter100 : kNcclIntra100;
  if (arch == 2) return inter ? kNcclInter90 : kNcclIntra90;
  return inter ? kNcclInter : kNcclIntra;
}

}  // namespace

double nccl_intra_GBps(const scenario::PlatformSpec& s) {
  const auto& l = s.intra == scenario::IntraFabric::NVSwitch ? s.nvlink : s.pcie;
  return l.bw_Bps * l.efficiency / 1e9;
}

GroupShape group_shape(const Topology& topo, const std::vector<int>& ranks) {
  const auto& s = topo.spec();
  const int domain = s.intra == scenario::IntraFabric::NVSwitch
                         ? std::max(s.nvlink_domain_gpus, s.gpus_per_node) : s.gpus_per_node;
  std::map<int, int> per_node;
  std::map<int, std::set<int>> rails;
  for (int r : ranks) {
    ++per_node[r / domain];
    if (s.nics_per_node > 0) rails[r / domain].insert((r % s.gpus_per_node) % s.nics_per_node);
  }
  GroupShape g;
  g.n = static_cast<int>(ranks.size());
  g.nodes = std::max<int>(1, static_cast<int>(per_node.size()));
  for (const auto& [node, count] : per_node) g.ppn = std::max(g.ppn, count);
  if (g.nodes > 1)
    for (const auto& [node, set] : rails) g.rails = std::max(g.rails, static_cast<int>(set.size()));
  return g;
}

NcclGraph ring_graph(const scenario::PlatformSpec& spec, const GroupShape& g) {
  const int arch = spec.nccl.arch;
  const double intra = nccl_intra_GBps(spec);
  NcclGraph gr;
  if (g.nodes == 1) {
    // One channel per `speed` of the GPU's intra-node bandwidth, at the fastest speed that fits.
    const auto& sp = search_speeds(arch, false);
    size_t i = 0;
    while (i + 1 < sp.size() && sp[i] > intra) ++i;
    gr.bw_intra = sp[i];
    gr.channels = std::clamp(static_cast<int>(intra / sp[i]), 1, kNcclSearchChannels);
  } else {
    // One channel per rail at the fastest speed a NIC carries and the NVLink ring can feed.
    const auto& sp = search_speeds(arch, true);
    const double nic = spec.nic.bw_Bps / 1e9;
    const int rails = std::max(1, g.rails);
    size_t i = 0;
    while (i + 1 < sp.size() && (sp[i] > nic || (g.ppn > 1 && sp[i] * rails > intra))) ++i;
    gr.bw_intra = sp[i];
    gr.channels = std::clamp(rails * std::max(1, static_cast<int>(nic / sp[i])), 1, kNcclSearchChannels);
  }
  // ncclTopoDupChannels: fast channels are doubled at half the speed each.
  if (gr.bw_intra >= 25.0 && !(arch >= 2 && gr.bw_intra < 50.0 && gr.channels > 4)) {
    const int dup = std::min(2 * gr.channels, kNcclMaxChannels);
    gr.bw_intra /= (dup + gr.channels - 1) / gr.channels;
    gr.channels = dup;
  }
  gr.bw_inter = gr.bw_intra;
  return gr;
}

NcclGraph nvls_graph(const scenario::PlatformSpec& spec, const GroupShape& g) {
  NcclGraph gr;
  if (!spec.nccl.nvls || spec.intra != scenario::IntraFabric::NVSwitch || g.ppn < 2) return gr;
  // NVLS pulls evenly from every GPU: channels = min(arity, GPUs), and the search may count the
  // GPU bandwidth x n/(n-1) because NVLS need not return to its start (search.cc).
  gr.channels = std::min(kNcclMaxNvlsArity, g.ppn);
  const double total = nccl_intra_GBps(spec) * g.ppn / (g.ppn - 1);
  const auto& sp = search_speeds(spec.nccl.arch, false);
  size_t i = 0;
  while (i + 1 < sp.size() && sp[i] * gr.channels > total) ++i;
  gr.bw_intra = sp[i];
  gr.bw_inter = g.nodes > 1 ? ring_graph(spec, g).bw_inter : sp[i];
  return gr;
}

int nccl_p2p_channels(const scenario::PlatformSpec& spec, const GroupShape& g) {
  // An HGX H800 logs 16 coll channels and 16 p2p channels per peer for its 8 searched
  // (NVIDIA/nccl#892), 2 H20 nodes of 2 GPUs 8 coll channels and 2 per peer (NVIDIA/nccl#1189):
  // "execution channels are typically 2x the search channels" (NVIDIA/nccl#1041).
  const int coll = std::clamp(2 * ring_graph(spec, g).channels, 1, kNcclMaxChannels);
  int p = 1;
  while (p < coll) p *= 2;
  return p;
}

}  // namespace cpsim::model
