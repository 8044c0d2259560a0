#include "model/topology.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace cpsim::model {

const char* link_class_name(LinkClass c) {
  switch (c) {
    case LinkClass::NVLink:
      return "nvlink";
    case LinkClass::PCIe:
      return "pcie";
    case LinkClass::CpuLink:
      return "cpu";
    case LinkClass::Nic:
      return "nic";
    case LinkClass::Spine:
      return "spine";
  }
  return "?";
}

namespace {

/// "n3.sw1", "rail0.leaf2": a link name built by appending. GCC 12 at -O3 (setup.sh's Release
/// build) warns falsely on "literal" + std::string&& (-Wrestrict, GCC bug 105651).
std::string part_name(const char* a, int i, const char* b, int j) {
  std::string s = a;
  s += std::to_string(i);
  s += b;
  s += std::to_string(j);
  return s;
}

constexpr uint32_t kNone = UINT32_MAX;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

// Link latencies fold in the switch traversals a hop ends in (leaf or spine), so a route's
// latency is simply the sum over its links: SimGrid computes exactly that, and so do we.
Topology::Topology(const scenario::PlatformSpec& spec, const scenario::PerturbSpec& perturb)
    : spec_(spec) {
  const auto& s = spec_;
  if (s.nodes < 1 || s.gpus_per_node < 1)
    throw std::invalid_argument("platform " + s.name + ": nodes and gpus_per_node must be >= 1");
  gpus_ = s.total_gpus();
  const int gpn = s.gpus_per_node;
  // A domain smaller than a node makes no sense; treat it as the node.
  spec_.nvlink_domain_gpus = std::max(s.nvlink_domain_gpus, gpn);

  auto add = [&](std::string name, LinkClass cls, double nominal_bw, double efficiency,
                 double latency_s) -> uint32_t {
    if (!(nominal_bw > 0) || !(efficiency > 0))
      throw std::invalid_argument("platform " + s.name + ": link " + name +
                                  " needs a positive bandwidth and efficiency");
    Link l;
    l.name = std::move(name);
    l.cls = cls;
    l.nominal_bw_Bps = nominal_bw;
    l.bw_Bps = nominal_bw * efficiency;
    l.latency_s = latency_s;
    links_.push_back(std::move(l));
    return static_cast<uint32_t>(links_.size() - 1);
  };
  auto gpu_name = [&](int g) {
    return part_name("n", g / gpn, ".gpu", g % gpn);
  };

  gpu_up_.resize(gpus_);
  gpu_down_.resize(gpus_);
  if (s.intra == scenario::IntraFabric::NVSwitch) {
    for (int g = 0; g < gpus_; ++g) {
      gpu_up_[g] = add(gpu_name(g) + ".nvlink.up", LinkClass::NVLink, s.nvlink.bw_Bps,
                       s.nvlink.efficiency, s.nvlink.latency_s);
      gpu_down_[g] = add(gpu_name(g) + ".nvlink.down", LinkClass::NVLink, s.nvlink.bw_Bps,
                         s.nvlink.efficiency, s.nvlink.latency_s);
    }
  } else {
    if (s.gpus_per_pcie_switch < 1 || s.pcie_switches_per_cpu < 1)
      throw std::invalid_argument("platform " + s.name +
                                  ": gpus_per_pcie_switch and pcie_switches_per_cpu must be >= 1");
    const int sw_per_node = ceil_div(gpn, s.gpus_per_pcie_switch);
    const int cpus = ceil_div(sw_per_node, s.pcie_switches_per_cpu);
    for (int g = 0; g < gpus_; ++g) {
      gpu_up_[g] = add(gpu_name(g) + ".pcie.up", LinkClass::PCIe, s.pcie.bw_Bps, s.pcie.efficiency,
                       s.pcie.latency_s);
      gpu_down_[g] = add(gpu_name(g) + ".pcie.down", LinkClass::PCIe, s.pcie.bw_Bps,
                         s.pcie.efficiency, s.pcie.latency_s);
    }
    for (int n = 0; n < s.nodes; ++n) {
      for (int w = 0; w < sw_per_node; ++w) {
        std::string base = part_name("n", n, ".sw", w);
        sw_up_.push_back(add(base + ".uplink.up", LinkClass::PCIe, s.pcie_uplink.bw_Bps,
                             s.pcie_uplink.efficiency, s.pcie_uplink.latency_s));
        sw_down_.push_back(add(base + ".uplink.down", LinkClass::PCIe, s.pcie_uplink.bw_Bps,
                               s.pcie_uplink.efficiency, s.pcie_uplink.latency_s));
      }
      for (int a = 0; a < cpus; ++a)
        for (int b = 0; b < cpus; ++b)
          cpu_link_.push_back(a == b ? kNone
                                     : add(part_name("n", n, ".cpu", a) + "-cpu" + std::to_string(b),
                                           LinkClass::CpuLink, s.cpu_link.bw_Bps,
                                           s.cpu_link.efficiency, s.cpu_link.latency_s));
    }
  }

  const bool needs_network =
      s.intra == scenario::IntraFabric::PCIe ? s.nodes > 1 : gpus_ > spec_.nvlink_domain_gpus;
  if (needs_network && s.nics_per_node < 1)
    throw std::invalid_argument("platform " + s.name + ": " + std::to_string(s.nodes) +
                                " nodes need nics_per_node >= 1");
  if (s.nodes > 1 && s.nics_per_node >= 1) {
    if (s.nodes_per_leaf < 1 || s.spines < 1 || !(s.oversubscription > 0))
      throw std::invalid_argument("platform " + s.name +
                                  ": nodes_per_leaf, spines and oversubscription must be positive");
    const int nics = s.nics_per_node;
    for (int n = 0; n < s.nodes; ++n)
      for (int k = 0; k < nics; ++k) {
        std::string base = part_name("n", n, ".nic", k);
        // Into the leaf: this hop ends in a switch traversal.
        nic_up_.push_back(add(base + ".up", LinkClass::Nic, s.nic.bw_Bps, s.nic.efficiency,
                              s.nic.latency_s + s.switch_latency_s));
        nic_down_.push_back(
            add(base + ".down", LinkClass::Nic, s.nic.bw_Bps, s.nic.efficiency, s.nic.latency_s));
      }
    const int leaves_per_rail = ceil_div(s.nodes, s.nodes_per_leaf);
    const double uplink_bw = s.nodes_per_leaf * s.nic.bw_Bps / (s.oversubscription * s.spines);
    for (int r = 0; r < nics; ++r)
      for (int l = 0; l < leaves_per_rail; ++l)
        for (int sp = 0; sp < s.spines; ++sp) {
          std::string base = part_name("rail", r, ".leaf", l) + ".spine" +
                             std::to_string(sp);
          // Up ends in the spine, down ends in the destination leaf.
          leaf_up_.push_back(add(base + ".up", LinkClass::Spine, uplink_bw, s.nic.efficiency,
                                 s.nic.latency_s + s.switch_latency_s));
          leaf_down_.push_back(add(base + ".down", LinkClass::Spine, uplink_bw, s.nic.efficiency,
                                   s.nic.latency_s + s.switch_latency_s));
        }
  }

  // Perturbations. A rail with no GPU on it (nics_per_node > gpus_per_node) carries nothing.
  if (!perturb.rails_down.empty()) {
    rail_down_.assign(static_cast<size_t>(std::max(0, s.nics_per_node)), 0);
    for (int r : perturb.rails_down) {
      if (r < 0 || r >= s.nics_per_node)
        throw std::invalid_argument("perturb.rails_down: rail " + std::to_string(r) + " is outside platform " +
                                    s.name + "'s " + std::to_string(s.nics_per_node) + " NICs per node");
      rail_down_[static_cast<size_t>(r)] = 1;
    }
    const int used = std::min(s.nics_per_node, gpn);
    int healthy = 0;
    for (int r = 0; r < used; ++r) healthy += rail_up(r);
    if (needs_network && healthy == 0)
      throw std::invalid_argument("perturb.rails_down: every rail of platform " + s.name + " (" +
                                  std::to_string(used) + " used of " + std::to_string(s.nics_per_node) +
                                  " NICs per node) is down, so its " + std::to_string(s.nodes) +
                                  " nodes cannot reach each other: the run is impossible");
  }
  for (const auto& lp : perturb.links)
    for (uint32_t l : gpu_links(lp.gpu, lp.link, lp.direction)) {
      links_[l].nominal_bw_Bps *= lp.bw_factor;
      links_[l].bw_Bps *= lp.bw_factor;
      links_[l].latency_s += lp.add_latency_s;
    }
}

std::vector<uint32_t> Topology::gpu_links(int gpu, scenario::PerturbLink kind,
                                          scenario::LinkDirection dir) const {
  const std::string what = "perturb.links: GPU " + std::to_string(gpu);
  if (gpu < 0 || gpu >= gpus_)
    throw std::invalid_argument(what + " is outside platform " + spec_.name + "'s " + std::to_string(gpus_) +
                                " GPUs");
  const bool nvswitch = spec_.intra == scenario::IntraFabric::NVSwitch;
  uint32_t up = kNone, down = kNone;
  switch (kind) {
    case scenario::PerturbLink::NVLink:
    case scenario::PerturbLink::PCIe:
      if (nvswitch != (kind == scenario::PerturbLink::NVLink))
        throw std::invalid_argument(what + ": platform " + spec_.name + " has no " +
                                    (nvswitch ? "PCIe" : "NVLink") + " GPU links");
      up = gpu_up_[gpu];
      down = gpu_down_[gpu];
      break;
    case scenario::PerturbLink::Nic:
      if (nic_up_.empty())
        throw std::invalid_argument(what + ": platform " + spec_.name + " has no network links");
      up = nic_up_[node_of(gpu) * spec_.nics_per_node + rail_of(gpu)];
      down = nic_down_[node_of(gpu) * spec_.nics_per_node + rail_of(gpu)];
      break;
  }
  if (dir == scenario::LinkDirection::Up) return {up};
  if (dir == scenario::LinkDirection::Down) return {down};
  return {up, down};
}

int Topology::gpu_on_rail(int node, int r, int near) const {
  const int gpn = spec_.gpus_per_node, nics = spec_.nics_per_node;
  int local = (near / nics) * nics + r;
  if (local >= gpn) local = r;  // the last block of GPUs is short: use the first block's
  return node * gpn + local;
}

bool Topology::same_nvlink_domain(int a, int b) const {
  if (spec_.intra != scenario::IntraFabric::NVSwitch) return node_of(a) == node_of(b);
  return a / spec_.nvlink_domain_gpus == b / spec_.nvlink_domain_gpus;
}

std::vector<uint32_t> Topology::route(int src, int dst) const {
  if (src < 0 || dst < 0 || src >= gpus_ || dst >= gpus_)
    throw std::out_of_range("route " + std::to_string(src) + "->" + std::to_string(dst) +
                            " outside the platform's " + std::to_string(gpus_) + " GPUs");
  if (src == dst) return {};
  if (same_nvlink_domain(src, dst)) return intra_route(src, dst);
  const auto& s = spec_;
  const int gpn = s.gpus_per_node;
  const bool pcie = s.intra == scenario::IntraFabric::PCIe;

  // Rail-optimised network. On PCIe nodes the NIC hangs off the GPU's PCIe switch.
  const int nics = s.nics_per_node;
  const int a = node_of(src), b = node_of(dst);
  const int ra = rail_of(src), rb = rail_of(dst);
  // A rail that is down hands its traffic to the next healthy rail of the node (NCCL's PXN: an
  // intra-node hop to the GPU on that rail), on either end.
  auto healthy_from = [&](int rail) {
    const int used = std::min(nics, gpn);
    for (int k = 0; k < used; ++k)
      if (rail_up((rail + k) % used)) return (rail + k) % used;
    throw std::logic_error("route: no healthy rail (the constructor checks this)");
  };
  const int rd = healthy_from(rb);
  int rs = healthy_from(ra);
  // PXN (paths.cc ncclTopoGetNetDev, P2P_PXN_LEVEL 2): NCCL picks the NIC local to the peer's
  // local index and, where that NIC's GPU reaches the sender over NVLink, hands it the data so
  // the transfer stays on the receiver's rail: an NVLink hop instead of a spine crossing.
  if (s.nccl.pxn && !pcie) rs = rd;
  const int proxy_a = rs == ra ? src : gpu_on_rail(a, rs, src % gpn);
  const int proxy_b = rd == rb ? dst : gpu_on_rail(b, rd, dst % gpn);
  const int la = a / s.nodes_per_leaf, lb = b / s.nodes_per_leaf;
  const int leaves_per_rail = ceil_div(s.nodes, s.nodes_per_leaf);
  std::vector<uint32_t> r;
  if (proxy_a != src) {
    // NVSwitch: an NVLink hop into the proxy GPU. PCIe: up to the proxy's switch, where its
    // NIC hangs, without entering the proxy.
    r = intra_route(src, proxy_a);
    if (pcie) r.pop_back();
  } else if (pcie) {
    r.push_back(gpu_up_[src]);
  }
  r.push_back(nic_up_[a * nics + rs]);
  if (rs != rd || la != lb) {
    // The spine by destination node (D-mod-k), as InfiniBand's subnet manager routes a fat tree:
    // OpenSM's fat-tree engine fills each leaf's forwarding table by destination, spread evenly
    // over the up-ports, so a shift pattern (rank i to i + d) meets no contention
    // (doc/current-routing.txt). A hash of (src, dst) instead met by chance: harmless for many
    // small flows, but a pipelined all-to-all's 8 flows per GPU over 128 nodes put up to 44
    // where 32 fit on a leaf-spine link (busbw 35 GB/s where NCCL's rule and the pairs give 47).
    const int spine = b % s.spines;
    r.push_back(leaf_up_[(rs * leaves_per_rail + la) * s.spines + spine]);
    r.push_back(leaf_down_[(rd * leaves_per_rail + lb) * s.spines + spine]);
  }
  r.push_back(nic_down_[b * nics + rd]);
  if (proxy_b != dst) {
    const std::vector<uint32_t> hop = intra_route(proxy_b, dst);
    r.insert(r.end(), hop.begin() + (pcie ? 1 : 0), hop.end());
  } else if (pcie) {
    r.push_back(gpu_down_[dst]);
  }
  return r;
}

/// Within one NVLink domain (NVSwitch) or one node (PCIe tree).
std::vector<uint32_t> Topology::intra_route(int src, int dst) const {
  const auto& s = spec_;
  if (s.intra != scenario::IntraFabric::PCIe) return {gpu_up_[src], gpu_down_[dst]};
  // PCIe tree: climb to the lowest common ancestor, then descend.
  const int gpn = s.gpus_per_node;
  const int node = node_of(src);
  const int sw_per_node = ceil_div(gpn, s.gpus_per_pcie_switch);
  const int cpus = ceil_div(sw_per_node, s.pcie_switches_per_cpu);
  const int sa = (src % gpn) / s.gpus_per_pcie_switch, sb = (dst % gpn) / s.gpus_per_pcie_switch;
  std::vector<uint32_t> r{gpu_up_[src]};
  if (sa != sb) {
    const int ca = sa / s.pcie_switches_per_cpu, cb = sb / s.pcie_switches_per_cpu;
    r.push_back(sw_up_[node * sw_per_node + sa]);
    if (ca != cb) r.push_back(cpu_link_[(node * cpus + ca) * cpus + cb]);
    r.push_back(sw_down_[node * sw_per_node + sb]);
  }
  r.push_back(gpu_down_[dst]);
  return r;
}

double Topology::route_latency_s(int src, int dst) const {
  double lat = 0;
  for (uint32_t l : route(src, dst)) lat += links_[l].latency_s;
  return lat;
}

double Topology::route_bw_Bps(int src, int dst) const {
  double bw = std::numeric_limits<double>::infinity();
  for (uint32_t l : route(src, dst)) bw = std::min(bw, links_[l].bw_Bps);
  return bw;
}

// "Slowest" in NCCL's path-type sense (NVL < PIX/PXB < SYS < NET): the class farthest from the
// GPU, which is the enum order.
LinkClass Topology::route_class(int src, int dst) const {
  LinkClass c = LinkClass::NVLink;
  for (uint32_t l : route(src, dst)) c = std::max(c, links_[l].cls);
  return c;
}

}  // namespace cpsim::model
