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
  explicit Topology(const scenario::PlatformSpec& spec);

  int gpus() const { return gpus_; }
  int gpus_per_node() const { return spec_.gpus_per_node; }
  int node_of(int gpu) const { return gpu / spec_.gpus_per_node; }
  bool same_nvlink_domain(int a, int b) const;
  const std::vector<Link>& links() const { return links_; }
  const scenario::PlatformSpec& spec() const { return spec_; }

  /// Link indices from src to dst (empty if src == dst). Computed on the fly, deterministic.
  std::vector<uint32_t> route(int src, int dst) const;
  double route_latency_s(int src, int dst) const;
  /// Bottleneck effective bandwidth along the route.
  double route_bw_Bps(int src, int dst) const;
  /// The slowest link class on the route (decides NCCL's per-hop latency class).
  LinkClass route_class(int src, int dst) const;

 private:
  scenario::PlatformSpec spec_;
  int gpus_ = 0;
  std::vector<Link> links_;
  // index bases for link families, filled by the constructor
  std::vector<uint32_t> gpu_up_, gpu_down_;          // NVLink or PCIe GPU links
  std::vector<uint32_t> sw_up_, sw_down_;            // PCIe switch uplinks
  std::vector<uint32_t> cpu_link_;                   // per node: cpu0->cpu1, cpu1->cpu0 ...
  std::vector<uint32_t> nic_up_, nic_down_;          // per (node, nic)
  std::vector<uint32_t> leaf_up_, leaf_down_;        // per (leaf, spine)
};

}  // namespace cpsim::model
