#include "scenario/perturb_items.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scenario/enum_names.hpp"

namespace cpsim::scenario {

namespace {

std::string num(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string link_label(const LinkPerturb& l) {
  static const char* const names[] = {"NVLink", "PCIe link", "NIC"};
  std::string s = std::string(names[static_cast<int>(l.link)]) + " of GPU " + std::to_string(l.gpu);
  if (l.direction != LinkDirection::Both) s += " (" + std::string(name_of(l.direction, kLinkDirectionNames)) + ")";
  if (l.bw_factor != 1) s += num(" at %gx bandwidth", l.bw_factor);
  if (l.add_latency_s != 0) s += (l.bw_factor != 1 ? "," : "") + num(" +%g us latency", l.add_latency_s * 1e6);
  return s;
}

}  // namespace

std::vector<PerturbItem> perturb_items(const PerturbSpec& p) {
  // One list per kind, in the round robin's order.
  std::vector<std::vector<PerturbItem>> kinds(6);
  for (int r : p.rails_down) {
    PerturbItem it{"rail_down", "rail " + std::to_string(r) + " down on every node", 1, true, p};
    it.without.rails_down.erase(std::find(it.without.rails_down.begin(), it.without.rails_down.end(), r));
    kinds[0].push_back(std::move(it));
  }
  for (size_t i = 0; i < p.links.size(); ++i) {
    const LinkPerturb& l = p.links[i];
    if (l.bw_factor == 1 && l.add_latency_s == 0) continue;
    // A bandwidth cut first (1 / factor - 1: the transfer's extra time), latency breaking ties.
    PerturbItem it{"link", link_label(l), std::abs(1 / l.bw_factor - 1) + l.add_latency_s, true, p};
    it.without.links.erase(it.without.links.begin() + static_cast<std::ptrdiff_t>(i));
    kinds[1].push_back(std::move(it));
  }
  for (const auto& [node, f] : p.node_slowdown) {
    if (f == 1) continue;
    PerturbItem it{"slow_node", "node " + std::to_string(node) + num(" slowed x%g", f), std::abs(f - 1), false, p};
    it.without.node_slowdown.erase(node);
    kinds[2].push_back(std::move(it));
  }
  for (const auto& [gpu, f] : p.gpu_slowdown) {
    if (f == 1) continue;
    PerturbItem it{"slow_gpu", "GPU " + std::to_string(gpu) + num(" slowed x%g", f), std::abs(f - 1), false, p};
    it.without.gpu_slowdown.erase(gpu);
    kinds[3].push_back(std::move(it));
  }
  if (p.gpu_variation_cv > 0) {
    PerturbItem it{"gpu_variation", num("GPU speed variation (cv %g)", p.gpu_variation_cv), p.gpu_variation_cv,
                   false, p};
    it.without.gpu_variation_cv = 0;
    kinds[4].push_back(std::move(it));
  }
  if (p.jitter_cv > 0) {
    PerturbItem it{"jitter",
                   num("kernel jitter (cv %g, ", p.jitter_cv) + std::string(name_of(p.jitter_dist, kJitterDistNames)) + ")",
                   p.jitter_cv, false, p};
    it.without.jitter_cv = 0;
    kinds[5].push_back(std::move(it));
  }
  for (auto& k : kinds)
    std::stable_sort(k.begin(), k.end(), [](const PerturbItem& a, const PerturbItem& b) { return a.severity > b.severity; });
  std::vector<PerturbItem> out;
  for (size_t round = 0;; ++round) {
    bool any = false;
    for (auto& k : kinds)
      if (round < k.size()) {
        out.push_back(std::move(k[round]));
        any = true;
      }
    if (!any) return out;
  }
}

PerturbSpec without_all(const PerturbSpec& p) {
  PerturbSpec s;
  s.interference = p.interference;
  s.jitter_dist = p.jitter_dist;
  s.neutral_rank = p.neutral_rank;
  return s;
}

}  // namespace cpsim::scenario
