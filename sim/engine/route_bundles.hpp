#pragma once
/// Transfers the SimGrid engine runs as timers instead of Comms: those that have their
/// route's links to themselves, alone or with transfers of the very same route. Internal to the
/// engine stage; no SimGrid here, so its arithmetic is tested on its own.
///
/// Why same-route groups: k flows that cross the same links and meet no other flow share them by
/// max-min as k variables on one constraint, the narrowest link, each under its own cap (a
/// capped transfer leaves through a FATPIPE that bounds it alone): water-filling, k = 1 being
/// the route's lone rate. SimGrid's solve gives the same. Measured on Llama-3 70B, 1,024 GPUs, full replay: of 1.56 M transfers that met
/// another flow, 1.49 M met exactly one other on exactly their route (a ring step's K,V and
/// dK,dV going to the same neighbour) and nothing else, and each such meeting made two SimGrid
/// Comms, whose ends in 3.32 each scan the list of every detached Comm in flight
/// (CommImpl::finish, std::list::remove: 22 % of that run's samples).
/// A group is dissolved into Comms, each with its bytes left, as soon as any other flow reaches
/// one of its links; from then on SimGrid shares those links exactly as before.
///
/// Inline: join, finish and dissolve take the engine's callbacks as templates, and current()
/// is asked once per queued transfer end, a per-event hot path of the SimGrid replay.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "support/flat_map.hpp"
#include "engine/replay_common.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::engine::detail {

class RouteBundles {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  explicit RouteBundles(size_t links) : link_(links, kNone) {}

  /// The group whose links include Topology link l, or kNone.
  uint32_t on_link(uint32_t l) const { return link_[l]; }
  /// Whether a transfer src -> dst has group b's route.
  bool same(uint32_t b, int src, int dst) const { return b_[b].src == src && b_[b].dst == dst; }
  /// A new group on the route [lb, le) (links nothing else is on) of narrowest link bw_Bps.
  uint32_t open(int src, int dst, double bw_Bps, const uint32_t* lb, const uint32_t* le) {
    uint32_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = static_cast<uint32_t>(b_.size());
      b_.emplace_back();
    }
    Bundle& x = b_[b];
    x.src = src;
    x.dst = dst;
    x.bw = bw_Bps;
    x.links.assign(lb, le);
    x.m.clear();
    for (const uint32_t l : x.links) link_[l] = b;
    return b;
  }
  /// Transfer `id` with `bytes` to move under `cap` (0: none) joins group b at `now`;
  /// at(id, end) for each member, whose end moved (the others now share with one more).
  template <class At>
  void join(uint32_t b, schedule::OpId id, double bytes, double cap, double now, At&& at) {
    Bundle& x = b_[b];
    advance(x, now);
    x.m.push_back({id, bytes, cap > 0 ? cap : kUncapped, 0, 0.0});
    of_.set(id, b);
    retime(x, now, at);
  }
  /// Whether `t` is member id's current end (a queued end at another time is stale; two at
  /// the same time are the same end: the first taken ends it).
  bool current(schedule::OpId id, double t) const {
    const uint32_t* b = of_.find(id);
    if (b == nullptr) return false;
    for (const Member& m : b_[*b].m)
      if (m.id == id) return same_time(t, m.end);
    return false;
  }
  /// Member id's bytes are through at `now`: it leaves, the others speed up (at as in join).
  template <class At>
  void finish(schedule::OpId id, double now, At&& at) {
    const uint32_t b = *of_.find(id);
    of_.erase(id);
    Bundle& x = b_[b];
    advance(x, now);
    for (size_t i = 0; i < x.m.size(); ++i)
      if (x.m[i].id == id) {
        x.m[i] = x.m.back();
        x.m.pop_back();
        break;
      }
    if (x.m.empty())
      close(b);
    else
      retime(x, now, at);
  }
  /// Another flow reached group b's links at `now`: every member leaves it, out(id, bytes left),
  /// for SimGrid to carry; their queued ends are stale.
  template <class Out>
  void dissolve(uint32_t b, double now, Out&& out) {
    Bundle& x = b_[b];
    advance(x, now);
    for (const Member& m : x.m) {
      of_.erase(m.id);
      out(m.id, m.left);
    }
    x.m.clear();
    close(b);
  }

 private:
  static constexpr double kUncapped = std::numeric_limits<double>::infinity();
  struct Member {
    schedule::OpId id;
    double left;  ///< bytes left as of the group's `t`
    double cap;   ///< its own bound, kUncapped if none
    double rate;  ///< since `t`
    double end;   ///< the end queued last
  };
  struct Bundle {
    int src = 0, dst = 0;
    double bw = 0;
    double t = 0;  ///< members' bytes left are as of t
    std::vector<Member> m;
    std::vector<uint32_t> links;
  };
  /// Brings every member's bytes left to `now`. (A lone member's arithmetic is the former solo
  /// timer's, bytes - (now - start) x rate, so those times did not move.)
  static void advance(Bundle& x, double now) {
    for (Member& m : x.m) m.left -= (now - x.t) * m.rate;
    x.t = now;
  }
  /// Water-filling on the narrowest link: members by cap, smallest first, each takes its cap or
  /// an equal share of what is left, whichever is less.
  template <class At>
  void retime(Bundle& x, double now, At& at) {
    std::sort(x.m.begin(), x.m.end(), [](const Member& a, const Member& b) {
      return a.cap < b.cap || (a.cap == b.cap && a.id < b.id);
    });
    double left_bw = x.bw;
    for (size_t i = 0; i < x.m.size(); ++i) {
      Member& m = x.m[i];
      const double share = left_bw / static_cast<double>(x.m.size() - i);
      m.rate = m.cap < share ? m.cap : share;
      left_bw -= m.rate;
      m.end = now + (m.left > 0 ? m.left : 0.0) / m.rate;
      at(m.id, m.end);
    }
  }
  void close(uint32_t b) {
    for (const uint32_t l : b_[b].links) link_[l] = kNone;
    free_.push_back(b);
  }

  std::vector<Bundle> b_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> link_;  ///< per Topology link: its group, or kNone
  support::FlatMap<schedule::OpId> of_;  ///< member -> group
};

}  // namespace cpsim::engine::detail
