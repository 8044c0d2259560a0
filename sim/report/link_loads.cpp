// The report's link family: bytes and busy time per link, and bytes per link class.
#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "report/metric_parts.hpp"

namespace cpsim::report::detail {

using schedule::OpId;
using schedule::OpKind;
using schedule::TaskGraph;

/// Bytes and busy time of every link the graph's transfers cross, the `top` busiest first
/// (ties by name), and the bytes per link class (each transfer counted once per link of
/// the class its route crosses: its load), summed in op order.
void link_loads(const TaskGraph& g, const model::Topology& topo, size_t top, Result& r) {
  constexpr int kClasses = 5;  // model::LinkClass values
  struct Route {
    std::vector<uint32_t> links;
    uint8_t of_class[kClasses] = {};
  };
  std::vector<double> bytes(topo.links().size(), 0.0);
  double by_class[kClasses] = {};
  std::unordered_map<uint64_t, Route> routes;
  g.for_each_op([&](OpId, const schedule::Op& op) {
    if (op.kind != OpKind::Transfer || op.bytes <= 0 || op.rank == op.peer) return;
    const uint64_t key = (static_cast<uint64_t>(op.rank) << 32) | static_cast<uint32_t>(op.peer);
    auto it = routes.find(key);
    if (it == routes.end()) {
      Route rt;
      rt.links = topo.route(op.rank, op.peer);
      for (uint32_t l : rt.links) rt.of_class[static_cast<int>(topo.links()[l].cls)]++;
      it = routes.emplace(key, std::move(rt)).first;
    }
    for (uint32_t l : it->second.links) bytes[l] += op.bytes;
    for (int c = 0; c < kClasses; ++c) by_class[c] += op.bytes * it->second.of_class[c];
  });
  for (int c = 0; c < kClasses; ++c)
    if (by_class[c] > 0)
      r.bytes_per_link_class.emplace_back(model::link_class_name(static_cast<model::LinkClass>(c)),
                                          by_class[c]);
  std::vector<LinkLoad> out;
  for (size_t l = 0; l < bytes.size(); ++l) {
    if (bytes[l] <= 0) continue;
    const auto& link = topo.links()[l];
    LinkLoad ll;
    ll.name = link.name;
    ll.cls = model::link_class_name(link.cls);
    ll.bytes = bytes[l];
    ll.bw_Bps = link.bw_Bps;
    ll.busy_s = bytes[l] / link.bw_Bps;  // (utilisation: once the step time is known)
    out.push_back(std::move(ll));
  }
  std::sort(out.begin(), out.end(), [](const LinkLoad& a, const LinkLoad& b) {
    return a.busy_s != b.busy_s ? a.busy_s > b.busy_s : a.name < b.name;
  });
  if (out.size() > top) out.resize(top);
  r.links = std::move(out);
}

}  // namespace cpsim::report::detail
