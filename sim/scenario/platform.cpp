// Platform files -> PlatformSpec.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "scenario/builders.hpp"
#include "scenario/enum_names.hpp"
#include "scenario/load.hpp"

namespace cpsim::scenario {
namespace detail {
namespace {

/// Links model::Topology may build (a 1,000,000-GPU rail-optimised cluster needs about 8 M).
constexpr double kMaxLinks = 16'000'000;

GpuSpec read_gpu_fields(const Node& n, const std::string& default_name) {
  MapReader r(n, {"name", "description", "peak_flops", "gemm_flops", "hbm_bw", "memory", "sm_count", "arch",
                  "fp8_peak_flops", "fp8_gemm_flops"});
  GpuSpec g;
  g.name = r.get("name") ? as_string(*r.get("name")) : default_name;
  if (r.get("description")) as_string(*r.get("description"));
  const Node& peak = r.require("peak_flops");
  g.peak_flops = as_flops(peak);
  check_min(peak, g.peak_flops, 0, false);
  g.gemm_flops = g.peak_flops;
  if (const Node* gemm = r.get("gemm_flops")) {
    g.gemm_flops = as_flops(*gemm);
    check_min(*gemm, g.gemm_flops, 0, false);
    if (g.gemm_flops > g.peak_flops)
      fail_at(*gemm, "gemm_flops exceeds peak_flops (" + peak.scalar + ")");
  }
  const Node& bw = r.require("hbm_bw");
  g.hbm_Bps = as_bandwidth(bw);
  check_min(bw, g.hbm_Bps, 0, false);
  const Node& mem = r.require("memory");
  g.memory_bytes = as_bytes(mem);
  check_min(mem, g.memory_bytes, 0, false);
  if (const Node* sms = r.get("sm_count")) {
    g.sm_count = static_cast<int>(as_int(*sms, 1, 100000));
  }
  if (const Node* a = r.get("arch")) {
    const auto arch = parse_enum<GpuArch>(as_string(*a), kGpuArchNames);
    if (!arch) fail_at(*a, "expected " + enum_choices(kGpuArchNames) + ", got " + a->describe());
    g.arch = *arch;
  }
  // FP8 tensor cores (Hopper and later); 0 / absent = none, and training.precision fp8 is refused.
  if (const Node* v = r.get("fp8_peak_flops")) {
    g.fp8_peak_flops = as_flops(*v);
    check_min(*v, g.fp8_peak_flops, 0, true);
  }
  if (const Node* v = r.get("fp8_gemm_flops")) {
    g.fp8_gemm_flops = as_flops(*v);
    check_min(*v, g.fp8_gemm_flops, 0, true);
    if (g.fp8_gemm_flops > g.fp8_peak_flops)
      fail_at(*v, "fp8_gemm_flops exceeds fp8_peak_flops (give fp8_peak_flops too)");
  }
  return g;
}

/// `gpu:` is a name from platforms/gpus.yaml, {preset: NAME, ...overrides}, or a full mapping.
GpuSpec read_gpu(const Node& n) {
  const Node* name_node = n.is_scalar() ? &n : (n.is_map() ? n.find("preset") : nullptr);
  if (name_node == nullptr) {
    if (!n.is_map())
      fail_at(n, "expected a GPU name from platforms/gpus.yaml or a mapping, got " + n.describe());
    return read_gpu_fields(n, "custom");
  }
  const std::string name = as_string(*name_node);
  const std::string list = join_path(join_path(data_dir(), "platforms"), "gpus.yaml");
  const Node gpus = parse_file(list, name_node, "GPU list");
  if (!gpus.is_map()) fail_at(gpus, "expected a mapping of GPU names, got " + gpus.describe());
  const Node* entry = gpus.find(name);
  if (entry == nullptr) {
    std::vector<std::string> known;
    for (const auto& c : gpus.children) known.push_back(c.key);
    std::string msg = "unknown GPU '" + name + "'";
    if (auto s = did_you_mean(name, known)) msg += " (did you mean '" + *s + "'?)";
    fail_at(*name_node, msg + "; known: " + join(known) + " (from " + list + ")");
  }
  Node merged = *entry;
  if (n.is_map()) {
    Node over = n;
    std::erase_if(over.children, [](const Node& c) { return c.key == "preset"; });
    merge_into(merged, over);
  }
  return read_gpu_fields(merged, name);
}

LinkSpec read_link(const Node& n) {
  MapReader r(n, {"bw", "latency", "efficiency"});
  if (n.is_null()) fail_at(n, "expected a mapping {bw, latency, efficiency}, got nothing");
  LinkSpec l;
  const Node& bw = r.require("bw");
  l.bw_Bps = as_bandwidth(bw);
  check_min(bw, l.bw_Bps, 0, false);
  if (const Node* lat = r.get("latency")) l.latency_s = as_time(*lat);
  if (const Node* eff = r.get("efficiency")) {
    l.efficiency = as_number(*eff);
    check_min(*eff, l.efficiency, 0, false);
    check_max(*eff, l.efficiency, 1, true);
  }
  return l;
}

void read_protocols(const Node& n, double (&out)[3], bool is_time) {
  MapReader r(n, {"ll", "ll128", "simple"});
  const char* names[3] = {"ll", "ll128", "simple"};
  for (int i = 0; i < 3; ++i)
    if (const Node* v = r.get(names[i])) {
      if (is_time) {
        out[i] = as_time(*v);
      } else {
        out[i] = as_number(*v);
        check_min(*v, out[i], 0, false);
        check_max(*v, out[i], 1, true);
      }
    }
}

/// `runtime:` absent: the public defaults; `off`: no overheads; a mapping: the defaults with
/// the keys it gives replaced.
RuntimeSpec read_runtime(const Node* n) {
  RuntimeSpec rt = kRuntimeDefaults;
  if (n == nullptr || n->is_null()) return rt;
  if (n->is_scalar()) {
    if (n->scalar == "off") return RuntimeSpec{};
    if (n->scalar == "default") return rt;
    fail_at(*n, "expected off, default or a mapping of runtime costs, got " + n->describe());
  }
  MapReader r(*n, {"kernel_launch", "host_op", "ops_per_attention", "graphs", "ring_step_sync",
                   "nccl_launch"});
  auto time = [&](const char* key, double& out) {
    if (const Node* v = r.get(key)) {
      out = as_time(*v);
      check_min(*v, out, 0, true);
    }
  };
  time("kernel_launch", rt.kernel_launch_s);
  time("host_op", rt.host_op_s);
  time("ring_step_sync", rt.ring_step_sync_s);
  time("nccl_launch", rt.nccl_launch_s);
  if (const Node* v = r.get("ops_per_attention")) rt.ops_per_attention = static_cast<int>(as_int(*v, 0, 1000));
  if (const Node* v = r.get("graphs")) rt.graphs = as_bool(*v);
  return rt;
}

NcclSpec read_nccl(const Node& n) {
  MapReader r(n, {"p2p_max_bw", "p2p_latency", "base_latency", "hop_latency", "protocol_efficiency",
                  "arch", "nvls", "pxn"});
  NcclSpec s;
  if (const Node* v = r.get("arch")) s.arch = static_cast<int>(as_choice(*v, choices(kNcclArchNames)));
  if (const Node* v = r.get("nvls")) s.nvls = as_bool(*v);
  if (const Node* v = r.get("pxn")) s.pxn = as_bool(*v);
  if (const Node* v = r.get("p2p_max_bw")) s.p2p_max_Bps = as_bandwidth(*v);
  if (const Node* v = r.get("p2p_latency")) s.p2p_latency_s = as_time(*v);
  if (const Node* v = r.get("base_latency")) read_protocols(*v, s.base_latency_s, true);
  if (const Node* v = r.get("hop_latency")) {
    MapReader h(*v, {"nvlink", "pcie", "network"});
    if (const Node* x = h.get("nvlink")) read_protocols(*x, s.hop_nvlink_s, true);
    if (const Node* x = h.get("pcie")) read_protocols(*x, s.hop_pcie_s, true);
    if (const Node* x = h.get("network")) read_protocols(*x, s.hop_net_s, true);
  }
  if (const Node* v = r.get("protocol_efficiency")) read_protocols(*v, s.protocol_efficiency, false);
  return s;
}

int as_count(const Node& n, int64_t min, int64_t max) { return static_cast<int>(as_int(n, min, max)); }

}  // namespace

PlatformSpec build_platform(const Node& tree, const std::string& file, const std::string& default_name) {
  MapReader r(tree, {"name", "description", "gpu", "nodes", "gpus_per_node", "intra", "network", "nccl",
                     "compute_interference", "runtime"});
  if (tree.is_null()) fail_at(tree, "expected a platform mapping, got nothing");
  PlatformSpec p;
  p.file = file;
  p.name = r.get("name") ? as_string(*r.get("name")) : default_name;
  if (r.get("description")) as_string(*r.get("description"));
  p.gpu = read_gpu(r.require("gpu"));
  if (const Node* v = r.get("compute_interference")) {
    p.compute_interference = as_number(*v);
    check_min(*v, p.compute_interference, 0, true);
    check_max(*v, p.compute_interference, 1, true);
  }

  const Node* nodes = r.get("nodes");
  const Node* gpn = r.get("gpus_per_node");
  if (nodes) p.nodes = as_count(*nodes, 1, kMaxGpus);
  if (gpn) p.gpus_per_node = as_count(*gpn, 1, kMaxGpus);
  if (static_cast<int64_t>(p.nodes) * p.gpus_per_node > kMaxGpus)
    fail_at(nodes ? *nodes : *gpn, "nodes x gpus_per_node = " + std::to_string(p.nodes) + " x " +
                                       std::to_string(p.gpus_per_node) + " = " +
                                       std::to_string(static_cast<int64_t>(p.nodes) * p.gpus_per_node) +
                                       " GPUs exceeds the limit of 1000000");

  // Intra-node fabric.
  const Node* intra = r.get("intra");
  static const Node kEmpty;
  const Node& intra_n = intra ? *intra : kEmpty;
  MapReader in(intra_n, {"fabric", "nvlink", "nvlink_domain_gpus", "pcie", "pcie_uplink", "cpu_link",
                         "gpus_per_pcie_switch", "pcie_switches_per_cpu"});
  if (const Node* f = in.get("fabric"))
    p.intra = static_cast<IntraFabric>(as_choice(*f, choices(kFabricNames)));
  const Node* domain = in.get("nvlink_domain_gpus");
  p.nvlink_domain_gpus = domain ? as_count(*domain, 1, kMaxGpus) : p.gpus_per_node;
  if (const Node* v = in.get("gpus_per_pcie_switch")) p.gpus_per_pcie_switch = as_count(*v, 1, 1024);
  if (const Node* v = in.get("pcie_switches_per_cpu")) p.pcie_switches_per_cpu = as_count(*v, 1, 1024);
  if (const Node* v = in.get("nvlink")) p.nvlink = read_link(*v);
  if (const Node* v = in.get("pcie")) p.pcie = read_link(*v);
  if (const Node* v = in.get("pcie_uplink")) p.pcie_uplink = read_link(*v);
  if (const Node* v = in.get("cpu_link")) p.cpu_link = read_link(*v);

  const bool multi_gpu = p.gpus_per_node > 1 || p.nvlink_domain_gpus > p.gpus_per_node;
  if (p.intra == IntraFabric::NVSwitch) {
    if (domain && p.nvlink_domain_gpus % p.gpus_per_node != 0)
      fail_at(*domain, "must be a multiple of gpus_per_node (" + std::to_string(p.gpus_per_node) +
                           "), got " + domain->scalar);
    if (multi_gpu && !in.get("nvlink")) {
      if (!intra) r.require("intra");
      fail(intra->key_at.src ? intra->key_at : intra->at, intra->path,
           "missing required key 'nvlink' (fabric nvswitch)");
    }
  } else {
    if (domain && p.nvlink_domain_gpus != p.gpus_per_node)
      fail_at(*domain, "NVLink domains need fabric nvswitch");
    p.nvlink_domain_gpus = p.gpus_per_node;
    const int per_cpu = p.gpus_per_pcie_switch * p.pcie_switches_per_cpu;
    if (p.gpus_per_node % per_cpu != 0)
      fail_at(gpn ? *gpn : tree, "gpus_per_node " + std::to_string(p.gpus_per_node) +
                                     " is not a multiple of gpus_per_pcie_switch x pcie_switches_per_cpu = " +
                                     std::to_string(p.gpus_per_pcie_switch) + " x " +
                                     std::to_string(p.pcie_switches_per_cpu) + " = " + std::to_string(per_cpu));
    if (multi_gpu) {
      in.require("pcie");
      if (p.gpus_per_node > p.gpus_per_pcie_switch) in.require("pcie_uplink");
      if (p.gpus_per_node > per_cpu) in.require("cpu_link");
    }
  }

  // Inter-node network.
  const Node* net = r.get("network");
  MapReader nr(net ? *net : kEmpty, {"nics_per_node", "nic", "nodes_per_leaf", "spines", "oversubscription",
                                     "switch_latency"});
  const Node* nics = nr.get("nics_per_node");
  if (nics) p.nics_per_node = as_count(*nics, 0, 1024);
  if (const Node* v = nr.get("nic")) p.nic = read_link(*v);
  if (const Node* v = nr.get("nodes_per_leaf")) p.nodes_per_leaf = as_count(*v, 1, kMaxGpus);
  const Node* spines = nr.get("spines");
  if (spines) p.spines = as_count(*spines, 1, 1'000'000);
  if (const Node* v = nr.get("oversubscription")) {
    p.oversubscription = as_number(*v);
    check_min(*v, p.oversubscription, 0, false);
  }
  if (const Node* v = nr.get("switch_latency")) p.switch_latency_s = as_time(*v);
  const bool needs_network = p.intra == IntraFabric::NVSwitch ? p.total_gpus() > p.nvlink_domain_gpus
                                                             : p.nodes > 1;
  if (needs_network) {
    const std::string why = std::to_string(p.nodes) + " nodes need an inter-node network";
    if (!net) fail_at(nodes ? *nodes : tree, why + ": add network: {nics_per_node, nic: {bw, latency}}");
    if (p.nics_per_node < 1)
      fail_at(nics ? *nics : *net, why + ": nics_per_node must be >= 1");
    if (!nr.get("nic")) fail(net->key_at.src ? net->key_at : net->at, net->path,
                             "missing required key 'nic' (" + why + ")");
  }

  // model::Topology builds every link up front (two per GPU, per PCIe switch uplink, per NIC
  // and per leaf-spine pair, one per ordered CPU pair): bounded here, so that `spines: 1000000`
  // is an error and not memory exhaustion.
  const double switches = std::ceil(double(p.gpus_per_node) / p.gpus_per_pcie_switch);
  const double cpus = std::ceil(switches / p.pcie_switches_per_cpu);
  const double pcie_links = p.intra == IntraFabric::PCIe ? p.nodes * (2 * switches + cpus * (cpus - 1)) : 0;
  const bool network = p.nodes > 1 && p.nics_per_node >= 1;
  const double nic_links = network ? 2.0 * p.nodes * p.nics_per_node : 0;
  const double spine_links =
      network ? 2.0 * p.nics_per_node * std::ceil(double(p.nodes) / p.nodes_per_leaf) * p.spines : 0;
  const double links = 2.0 * p.total_gpus() + pcie_links + nic_links + spine_links;
  if (links > kMaxLinks) {
    const Node* at = spine_links >= std::max(pcie_links, nic_links) ? spines
                     : nic_links >= pcie_links                       ? nics
                                                                     : gpn;
    if (at == nullptr) at = nodes ? nodes : &tree;
    auto num = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f", v);
      return std::string(buf);
    };
    fail_at(*at, "the platform would have " + num(links) + " links (GPU " + num(2.0 * p.total_gpus()) +
                     ", PCIe " + num(pcie_links) + ", NIC " + num(nic_links) + ", leaf-spine " +
                     num(spine_links) + "), more than the limit of " + num(kMaxLinks));
  }

  if (const Node* v = r.get("nccl")) p.nccl = read_nccl(*v);
  p.runtime = read_runtime(r.get("runtime"));
  return p;
}

}  // namespace detail

PlatformSpec load_platform(const std::string& name_or_path, const std::vector<std::string>& params) {
  using namespace detail;
  const Node ref = name_node(name_or_path, "<platform>");
  std::string file;
  const Resolved res = resolve_preset(name_or_path, "", platform_ref().subdir, platform_ref().kind,
                                      &ref, platform_ref().excluded);
  Node tree = parse_file(res.path, &ref, "platform");
  file = res.path;
  for (const auto& p : params) apply_override(tree, p, "<param>", platform_preset_paths());
  tree = resolve_ref(tree, platform_ref(), &file);
  return build_platform(tree, file, file_stem(file));
}

}  // namespace cpsim::scenario
