// Scenario `perturb:` keys -> PerturbSpec: slow GPUs and nodes, degraded links, rails down, each
// checked against the platform it perturbs.
#include <algorithm>
#include <map>

#include "scenario/builders.hpp"
#include "scenario/enum_names.hpp"
#include "scenario/load.hpp"

namespace cpsim::scenario::detail {

namespace {

std::string perturb_str(int64_t v) { return std::to_string(v); }

/// A mapping of integer keys (GPU ranks, node indices) to slowdown factors > 0.
std::map<int, double> read_factor_map(const Node& m, const char* what, const char* example,
                                      std::vector<const Node*>* keys) {
  std::map<int, double> out;
  if (!m.is_map() && !m.is_null())
    fail_at(m, std::string("expected a mapping of ") + what + " to slowdown factor such as " + example +
                   ", got " + m.describe());
  for (const auto& c : m.children) {
    Node key;
    key.kind = Node::Kind::Scalar;
    key.scalar = c.key;
    key.at = c.key_at;
    key.path = c.path;
    const int k = static_cast<int>(as_int(key, 0, kMaxGpus - 1));
    const double f = as_number(c);
    check_min(c, f, 0, false);
    if (out.count(k)) fail_key(c, std::string(what) + " " + std::to_string(k) + " is given twice");
    out[k] = f;
    if (keys) keys->push_back(&c);
  }
  return out;
}

/// perturb.links: [{gpu, link, direction, bw_factor, add_latency}], checked against the
/// platform's links (a GPU has NVLink or PCIe, a NIC only where there is a network).
LinkPerturb read_link_perturb(const Node& n, const PlatformSpec& plat) {
  if (!n.is_map())
    fail_at(n, "expected a mapping such as {gpu: 3, link: nvlink, bw_factor: 0.5}, got " + n.describe());
  MapReader r(n, {"gpu", "link", "direction", "bw_factor", "add_latency"});
  LinkPerturb l;
  const Node& gpu = r.require("gpu");
  l.gpu = static_cast<int>(as_int(gpu, 0, kMaxGpus - 1));
  if (l.gpu >= plat.total_gpus())
    fail_at(gpu, "GPU " + gpu.scalar + " is outside platform '" + plat.name + "' with " +
                     perturb_str(plat.total_gpus()) + " GPUs");
  const Node& link = r.require("link");
  l.link = static_cast<PerturbLink>(as_choice(link, choices(kPerturbLinkNames)));
  const bool nvswitch = plat.intra == IntraFabric::NVSwitch;
  if (l.link == PerturbLink::NVLink && !nvswitch)
    fail_at(link, "platform '" + plat.name + "' has no NVLink (its intra-node fabric is pcie); use link: pcie");
  if (l.link == PerturbLink::PCIe && nvswitch)
    fail_at(link, "platform '" + plat.name + "' joins its GPUs by NVSwitch, not PCIe; use link: nvlink");
  if (l.link == PerturbLink::Nic && (plat.nodes < 2 || plat.nics_per_node < 1))
    fail_at(link, "platform '" + plat.name + "' has no network links (nodes " + perturb_str(plat.nodes) +
                      ", nics_per_node " + perturb_str(plat.nics_per_node) + ")");
  if (const Node* v = r.get("direction"))
    l.direction = static_cast<LinkDirection>(as_choice(*v, choices(kLinkDirectionNames)));
  if (const Node* v = r.get("bw_factor")) {
    l.bw_factor = as_number(*v);
    check_min(*v, l.bw_factor, 0, false);
  }
  if (const Node* v = r.get("add_latency")) {
    l.add_latency_s = as_time(*v);
    check_min(*v, l.add_latency_s, 0, true);
  }
  return l;
}

}  // namespace

PerturbSpec read_perturb(const Node& n, const PlatformSpec& plat, std::vector<const Node*>& rank_keys) {
  MapReader r(n, {"slow_gpus", "slow_nodes", "jitter_cv", "jitter_dist", "gpu_variation_cv", "interference",
                  "links", "rails_down"});
  PerturbSpec s;
  if (const Node* sg = r.get("slow_gpus"))
    s.gpu_slowdown = read_factor_map(*sg, "GPU rank", "{3: 1.2}", &rank_keys);
  if (const Node* sn = r.get("slow_nodes")) {
    std::vector<const Node*> keys;
    s.node_slowdown = read_factor_map(*sn, "node", "{1: 1.1}", &keys);
    for (const Node* k : keys)
      if (std::stoi(k->key) >= plat.nodes)
        fail_key(*k, "node " + k->key + " is outside platform '" + plat.name + "' with " + perturb_str(plat.nodes) +
                         (plat.nodes == 1 ? " node" : " nodes"));
  }
  if (const Node* v = r.get("jitter_cv")) {
    s.jitter_cv = as_number(*v);
    check_min(*v, s.jitter_cv, 0, true);
  }
  if (const Node* v = r.get("jitter_dist"))
    s.jitter_dist = static_cast<JitterDist>(as_choice(*v, choices(kJitterDistNames)));
  if (const Node* v = r.get("gpu_variation_cv")) {
    s.gpu_variation_cv = as_number(*v);
    check_min(*v, s.gpu_variation_cv, 0, true);
  }
  if (const Node* v = r.get("interference")) {
    s.interference = as_number(*v);
    check_min(*v, s.interference, 0, true);
    check_max(*v, s.interference, 1, true);
  }
  if (const Node* ls = r.get("links")) {
    if (!ls->is_seq() && !ls->is_null())
      fail_at(*ls, "expected a list of links such as [{gpu: 3, link: nvlink, bw_factor: 0.5}], got " +
                       ls->describe());
    for (const auto& c : ls->children) s.links.push_back(read_link_perturb(c, plat));
  }
  if (const Node* rd = r.get("rails_down")) {
    if (!rd->is_seq() && !rd->is_null())
      fail_at(*rd, "expected a list of rail (NIC) indices such as [3], got " + rd->describe());
    for (const auto& c : rd->children) {
      if (plat.nics_per_node < 1)
        fail_at(c, "platform '" + plat.name + "' has no rails (network.nics_per_node is 0)");
      const int rail = static_cast<int>(as_int(c, 0, kMaxGpus));
      if (rail >= plat.nics_per_node)
        fail_at(c, "rail " + c.scalar + " is outside platform '" + plat.name + "' with " +
                       perturb_str(plat.nics_per_node) + " NICs per node (rails 0.." + perturb_str(plat.nics_per_node - 1) + ")");
      if (std::find(s.rails_down.begin(), s.rails_down.end(), rail) != s.rails_down.end())
        fail_at(c, "rail " + perturb_str(rail) + " is given twice");
      s.rails_down.push_back(rail);
    }
    std::sort(s.rails_down.begin(), s.rails_down.end());
    // Every rail a GPU uses is down while the GPUs need the network (model::Topology's rule):
    // refused here, with the position, so `cpsim check` says what `run` would.
    const int used = std::min(plat.nics_per_node, plat.gpus_per_node);
    const bool needs_network = plat.intra == IntraFabric::PCIe
                                   ? plat.nodes > 1
                                   : plat.total_gpus() > std::max(plat.nvlink_domain_gpus, plat.gpus_per_node);
    const auto down = std::count_if(s.rails_down.begin(), s.rails_down.end(), [&](int r) { return r < used; });
    if (needs_network && used > 0 && down == used)
      fail_at(*rd, "every rail GPUs use (" + perturb_str(used) + " of " + perturb_str(plat.nics_per_node) +
                       " NICs per node) is down, so the " + perturb_str(plat.nodes) +
                       " nodes cannot reach each other: the run is impossible");
  }
  return s;
}

}  // namespace cpsim::scenario::detail
