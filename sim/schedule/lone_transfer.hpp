#pragma once
/// A transfer alone on its route, as the analytic engine times it (engine/analytic.cpp): written
/// once here so that a lean build (lean_lanes.cpp), which keeps the members that set a
/// pipeline's pace, picks them by the very numbers the engine will compute.
#include <algorithm>

namespace cpsim::schedule {

struct LoneTransfer {
  double latency_s = 0;   ///< software latency + the route's latency
  double duration_s = 0;  ///< latency + serialisation
  /// What the engine's pipeline join takes as this member's serialisation.
  double serialisation_s() const { return duration_s - latency_s; }
};

/// `bytes` at the route's bottleneck `route_bw_Bps`, capped by the software path (`cap_Bps`,
/// 0 = none) and by the fair share of the busiest link (route bw / `sharers`), after the
/// software latency `extra_s` and the route's latency.
inline LoneTransfer lone_transfer(double extra_s, double route_latency_s, double route_bw_Bps, double cap_Bps,
                                  float sharers, double bytes) {
  double bw = route_bw_Bps;
  if (cap_Bps > 0 && cap_Bps < bw) bw = cap_Bps;
  bw = std::min(bw, route_bw_Bps / std::max<double>(1.0, sharers));
  const double ser = bytes > 0 ? bytes / bw : 0.0;  // bw is inf for a GPU to itself
  return {extra_s + route_latency_s, extra_s + route_latency_s + ser};
}

}  // namespace cpsim::schedule
