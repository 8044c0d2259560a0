#pragma once
/// SimGrid-free view of a platform: GPUs, directed links and the static route between any two
/// GPUs. Both engines use these same links and routes (SimGrid builds them into a NetZone; the
/// analytic engine reads latency and bottleneck bandwidth from them), so their answers can only
/// differ by contention.
#include <cstdint>
#include <string>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::model {

enum class LinkClass : uint8_t { NVLink, PCIe, CpuLink, Nic, Spine };
const char* link_class_name(LinkClass c);

/// One direction of one physical link.
struct Link {
  std::string name;          ///< "n0.gpu3.nvlink.up"
  LinkClass cls = LinkClass::NVLink;
  double nominal_bw_Bps = 0; ///< the spec sheet figure
  double bw_Bps = 0;         ///< nominal x efficiency: what transfers can reach
  double latency_s = 0;
};

class Topology {
 public:
  /// The platform's links, with `perturb`'s degraded links (bandwidth factor, added latency)
  /// and rails out of service applied. Throws std::invalid_argument when the platform cannot
  /// be built or a perturbation cannot apply (a link the platform lacks, every rail down while
  /// GPUs need the network).
  explicit Topology(const scenario::PlatformSpec& spec, const scenario::PerturbSpec& perturb = {});

  int gpus() const { return gpus_; }
  int gpus_per_node() const { return spec_.gpus_per_node; }
  int node_of(int gpu) const { return gpu / spec_.gpus_per_node; }
  bool same_nvlink_domain(int a, int b) const;
  const std::vector<Link>& links() const { return links_; }
  const scenario::PlatformSpec& spec() const { return spec_; }

  /// Link indices from src to dst (empty if src == dst). Computed on the fly, deterministic.
  /// Inter-node traffic of a GPU whose rail is down takes a proxy hop inside its node (NCCL's
  /// PXN) to the GPU on the next healthy rail (r+1, r+2, ... cyclically), and traffic for a GPU
  /// whose rail is down arrives on the next healthy rail of its node and hops to it there.
  std::vector<uint32_t> route(int src, int dst) const;
  /// Whether rail (NIC index) r is in service.
  bool rail_up(int r) const { return r < 0 || r >= static_cast<int>(rail_down_.size()) || !rail_down_[r]; }
  /// The links a GPU's perturbation names: its NVLink / PCIe link or its rail's NIC, per
  /// direction (up first). Throws std::invalid_argument if the platform has no such link.
  std::vector<uint32_t> gpu_links(int gpu, scenario::PerturbLink kind, scenario::LinkDirection dir) const;
  double route_latency_s(int src, int dst) const;
  /// Bottleneck effective bandwidth along the route.
  double route_bw_Bps(int src, int dst) const;
  /// The slowest link class on the route (decides NCCL's per-hop latency class).
  LinkClass route_class(int src, int dst) const;

 private:
  std::vector<uint32_t> intra_route(int src, int dst) const;
  int rail_of(int gpu) const { return (gpu % spec_.gpus_per_node) % spec_.nics_per_node; }
  /// The GPU of `node` on rail r, nearest to local index `near` (same block of nics GPUs).
  int gpu_on_rail(int node, int r, int near) const;

  scenario::PlatformSpec spec_;
  int gpus_ = 0;
  std::vector<char> rail_down_;                      // per NIC index
  std::vector<Link> links_;
  // index bases for link families, filled by the constructor
  std::vector<uint32_t> gpu_up_, gpu_down_;          // NVLink or PCIe GPU links
  std::vector<uint32_t> sw_up_, sw_down_;            // PCIe switch uplinks
  std::vector<uint32_t> cpu_link_;                   // per node: cpu0->cpu1, cpu1->cpu0 ...
  std::vector<uint32_t> nic_up_, nic_down_;          // per (node, nic)
  std::vector<uint32_t> leaf_up_, leaf_down_;        // per (leaf, spine)
};

}  // namespace cpsim::model
