#pragma once
/// What both engines share, so they can only differ by contention: readiness (explicit
/// predecessors plus stream order), contention-free transfer time.
/// Internal to the engine stage. Its bodies are inline: they run per op or per event of a
/// replay (24.3 M ops and ~40 M events on the 70B full replay), and the engines call them
/// through templates.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "support/flat_map.hpp"
#include "model/topology.hpp"
#include "schedule/lone_transfer.hpp"
#include "schedule/task_graph.hpp"
#include "support/threads.hpp"
#include "schedule/trace.hpp"

namespace cpsim::engine::detail {

/// Throws std::invalid_argument / std::logic_error when the graph cannot be replayed on topo.
inline void check_replayable(const schedule::TaskGraph& g, const model::Topology& topo) {
  if (!g.finalized()) throw std::logic_error("replay: TaskGraph::finalize() was not called");
  if (g.num_ranks() > topo.gpus())
    throw std::invalid_argument("replay: the graph uses " + std::to_string(g.num_ranks()) +
                                " ranks but platform " + topo.spec().name + " has " +
                                std::to_string(topo.gpus()) + " GPUs");
}

/// The order of both engines' event queues (event_queue.hpp; as a std::priority_queue comparator
/// its top is the earliest):
/// by time, then by op, so that events at one instant run in an order set by the graph alone,
/// not by when or how they were queued.
struct Later {
  template <class E>
  bool operator()(const E& a, const E& b) const {
    return a.t > b.t || (a.t == b.t && a.op > b.op);
  }
};

/// Whether a queued end at `t` is an op's current end `end` (NaN, which the report then
/// refuses with its op named, counts as itself).
inline bool same_time(double t, double end) { return t == end || (t != t && end != end); }

/// A GPU's compute ops in flight that interference slows, in both engines: a few at a time,
/// not state per op of the graph (24 B per op were 2.3 GB on the 94.8 M-op 405B full replay).
/// Each holds its work left at full speed as of `since`, the speed since then, and its end.
///
/// Ends are queued lazily: a move queues a kernel's new end only when it is earlier than the
/// earliest end queued for it (`queued`, never later than its end); when that one comes due and
/// the kernel has moved later since, the engine queues its end now instead (take). So a
/// kernel slowed while a transfer runs and sped up again after queues one end more, not two.
/// (On the 70B full replay 7.5 M of the 24.4 M kernel ends queued were moves.) A queued end is
/// told from the others by its time alone, so an engine's queued events need no version: two
/// queued at the same time are the same end, the first taken ends the kernel. The kernel still
/// ends at its exact end, and events at one instant run in (time, op) order as before.
class GpuKernels {
 public:
  /// Kernel `id` of `work_s` at full speed starts at `now` at speed `rate`: its end, to queue.
  double start(schedule::OpId id, double work_s, double now, double rate) {
    const double end = now + work_s / rate;
    ks_.push_back({id, end, end, work_s, now, rate});
    return end;
  }
  /// The GPU's speed became `rate` at `now`: f(id, end) for each kernel whose end is now
  /// earlier than any queued for it (to queue).
  template <class F>
  void move(double now, double rate, F&& f) {
    for (Kernel& k : ks_) {
      k.work_s = std::max(0.0, k.work_s - (now - k.since) * k.rate);
      k.since = now;
      k.rate = rate;
      k.end = now + k.work_s / rate;
      if (k.end < k.queued) {
        k.queued = k.end;
        f(k.id, k.end);
      }
    }
  }
  /// Whether a queued end at `t` ends kernel `id` (else it is stale, or the kernel moved later).
  bool ends(schedule::OpId id, double t) const {
    const size_t i = find(id);
    return i != ks_.size() && same_time(t, ks_[i].queued) && same_time(t, ks_[i].end);
  }
  /// A queued end at `t` of kernel `id` came due: true if the kernel ends (it is removed);
  /// f(id, end) if it moved later since (its end to queue); nothing if the end was stale.
  template <class F>
  bool take(schedule::OpId id, double t, F&& f) {
    const size_t i = find(id);
    if (i == ks_.size() || !same_time(t, ks_[i].queued)) return false;
    if (same_time(t, ks_[i].end)) {
      ks_[i] = ks_.back();
      ks_.pop_back();
      return true;
    }
    ks_[i].queued = ks_[i].end;
    f(id, ks_[i].end);
    return false;
  }

 private:
  struct Kernel {
    schedule::OpId id;
    double end, queued, work_s, since, rate;
  };
  size_t find(schedule::OpId id) const {
    for (size_t i = 0; i < ks_.size(); ++i)
      if (ks_[i].id == id) return i;
    return ks_.size();
  }
  std::vector<Kernel> ks_;
};

/// What each op still waits for: explicit predecessors plus its predecessor in each queue it
/// occupies, counted with multiplicity (as for_each_successor notifies). Two bytes per op, the
/// rare op that waits for 65,535 or more (a collective's join over a huge group) counted on
/// the side: 48 MB less on the 24 M-op 70B full replay.
class Waits {
 public:
  /// Counted on the machine's cores (support/threads.hpp), each a slice of the ids: a copied
  /// op's count walks back to its original, and on the 70B full replay (24.3 M ops, 21 M of
  /// them copies) one thread took 0.63-0.68 s.
  explicit Waits(const schedule::TaskGraph& g) {
    const size_t n = g.size();
    w_.assign(n, 0);
    const unsigned threads = support::threads_for(0, n);
    std::vector<std::vector<std::pair<schedule::OpId, uint32_t>>> big(threads);
    support::on_threads(threads, [&](unsigned w) {
      const size_t lo = n * w / threads, hi = n * (w + 1) / threads;
      for (size_t i = lo; i < hi; ++i) {
        const auto id = static_cast<schedule::OpId>(i);
        const uint32_t c = g.waits_on(id);
        if (c >= kBig) big[w].emplace_back(id, c);
        w_[id] = static_cast<uint16_t>(std::min<uint32_t>(c, kBig));
      }
    });
    for (const auto& part : big)
      for (const auto& [id, c] : part) big_[id] = c;
  }
  bool ready(schedule::OpId id) const { return w_[id] == 0; }
  /// Starts fetching id's count into the cache.
  void prefetch(schedule::OpId id) const { __builtin_prefetch(&w_[id], 1); }
  /// One of the ops `id` waits for is done: true when that was the last.
  bool release(schedule::OpId id) {
    if (w_[id] != kBig) return --w_[id] == 0;
    auto it = big_.find(id);
    if (--it->second > 0) return false;
    big_.erase(it);
    w_[id] = 0;
    return true;
  }

 private:
  static constexpr uint16_t kBig = UINT16_MAX;
  std::vector<uint16_t> w_;
  std::unordered_map<schedule::OpId, uint32_t> big_;
};

/// Op id is done: start(s) for each successor s that waits for nothing more, in the graph's
/// order. The successors are gathered first and their counts fetched together: a rank's ops
/// lie ~1,000 ids apart, so each is a cache miss, and fetched one after another they were the
/// replay's stalls (70B full replay, five runs of
/// each alternating: replay median 5.34 -> 5.08 s).
template <class F>
void release_successors(const schedule::TaskGraph& g, Waits& waits, schedule::OpId id, F&& start) {
  constexpr size_t kGathered = 16;
  schedule::OpId succ[kGathered];
  size_t n = 0;
  g.for_each_successor(id, [&](schedule::OpId s) {
    if (n < kGathered) {
      waits.prefetch(s);
      succ[n] = s;
    }
    ++n;
  });
  if (n > kGathered) {  // (rare: a fence of a wide collective) one at a time
    g.for_each_successor(id, [&](schedule::OpId s) {
      if (waits.release(s)) start(s);
    });
    return;
  }
  for (size_t i = 0; i < n; ++i)
    if (waits.release(succ[i])) start(succ[i]);
}

/// Compute time of op `id` (on GPU `rank`) on an idle GPU: its nominal time, times the fleet noise if the cost
/// model priced it (TaskGraph::add_priced).
inline double compute_time_s(const schedule::Op& op, schedule::OpId id, const schedule::ComputeNoise& noise,
                             int rank) {
  return op.noisy ? op.duration_s * noise.scale(id, rank) : op.duration_s;
}
inline double compute_time_s(const schedule::Op& op, schedule::OpId id, const schedule::ComputeNoise& noise) {
  return compute_time_s(op, id, noise, op.rank);
}

/// The makespan as op ends come in (an engine keeps it whether or not it keeps per-op times).
/// Once NaN it stays NaN (std::max would drop it), so that app's check_finite sees it.
inline void extend_makespan(schedule::Trace& tr, double end_s) {
  if (!std::isnan(tr.makespan_s) && !(end_s <= tr.makespan_s)) tr.makespan_s = end_s;
}

inline constexpr int kLinkClasses = 5;

struct RouteInfo {
  double latency_s = 0;
  double bw_Bps = std::numeric_limits<double>::infinity();
  uint8_t links_of_class[kLinkClasses] = {};  ///< how many links of each class the route crosses
  uint32_t links_begin = 0, links_count = 0;  ///< the route's links, in RouteCache::links()
};

/// Route latency, bottleneck bandwidth and link classes per (src, dst) pair the graph uses.
/// Looked up ~3 times per transfer (its latency, its links at launch and at its end), in a
/// FlatMap (flat_map.hpp) of (src, dst) to the infos.
class RouteCache {
 public:
  explicit RouteCache(const model::Topology& topo) : topo_(topo) {}
  /// (References stay valid: the infos never move.)
  const RouteInfo& get(int src, int dst) {
    const uint64_t key = (static_cast<uint64_t>(src) << 32) | static_cast<uint32_t>(dst);  // (src >= 0)
    if (const uint32_t* i = index_.find(key)) return infos_[*i];
    return add(key, src, dst);
  }
  /// The Topology link ids a route crosses, in order.
  std::pair<const uint32_t*, const uint32_t*> links(const RouteInfo& ri) const {
    const uint32_t* b = pool_.data() + ri.links_begin;
    return {b, b + ri.links_count};
  }

 private:
  const RouteInfo& add(uint64_t key, int src, int dst) {
    RouteInfo ri;
    const std::vector<uint32_t> route = topo_.route(src, dst);
    ri.links_begin = static_cast<uint32_t>(pool_.size());
    ri.links_count = static_cast<uint32_t>(route.size());
    pool_.insert(pool_.end(), route.begin(), route.end());
    for (uint32_t l : route) {
      const auto& link = topo_.links()[l];
      ri.latency_s += link.latency_s;
      ri.bw_Bps = std::min(ri.bw_Bps, link.bw_Bps);
      ri.links_of_class[static_cast<int>(link.cls)]++;
    }
    infos_.push_back(ri);
    index_.set(key, static_cast<uint32_t>(infos_.size() - 1));
    return infos_.back();
  }

  const model::Topology& topo_;
  support::FlatMap<uint64_t> index_;
  std::deque<RouteInfo> infos_;
  std::vector<uint32_t> pool_;  ///< every cached route's links, back to back
};

/// Contention-free timing of a transfer: software latency, wire latency, serialisation.
inline schedule::LoneTransfer lone_transfer(const schedule::Op& op, const RouteInfo& ri) {
  return schedule::lone_transfer(op.extra_latency_s, ri.latency_s, ri.bw_Bps, op.max_rate_Bps, op.sharers, op.bytes);
}

}  // namespace cpsim::engine::detail
