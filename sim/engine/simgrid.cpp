// The SimGrid engine (with simgrid_platform.cpp, the only code that includes SimGrid).
//
// Platform: one host per GPU in a custom NetZone whose routes come from model::Topology on the
// fly. (A FullZone with explicit routes allocates a hosts x hosts table at seal time whatever
// the routes, 0.5 GB of pointers at 8,192 GPUs; this zone is O(links + hosts).) One SimGrid
// link per Topology link, SHARED, so flows share bandwidth by max-min fairness.
//
// Replay without actors: each op's activity starts from the completion callback of the last op
// it waits for (3.32 keeps pending activities in a list, so creating the DAG's activities up
// front would be quadratic; actors walking queues measured ~25 % slower in a 64-GPU ring).
// Our timers (kernel ends, latencies, solo transfers below) live in one heap of our own behind
// one SimGrid timer at its earliest entry (Replay::events), not one SimGrid timer each.
//  - compute: a kernel timer, not an Exec. Compute streams do not slow each other, so no
//    sharing model is needed; interference runs a GPU's kernels at 1/(1 + i) of their speed
//    while a transfer of that GPU is in flight, by moving their timers when that changes.
//    The runtime's overheads (Op::noisy false: launches, framework ops, event waits) are host
//    work or latencies, not SM work: a plain timer, never slowed.
//    (Execs cost a CPU-model solve and, in 3.32, a scan of every activity in flight when each
//    one ends: std::list::remove on the issuing actor's list, here maestro's.)
//  - transfer: a host-to-host Comm. The software latency (extra_latency_s) and the route's wire
//    latency are one kernel timer before the Comm starts; SimGrid's links have zero latency.
//    (CM02 weighs each flow's share of a link by 1/route latency, TCP's RTT unfairness; NVLink
//    and RDMA flows share a link equally, which is what a zero-latency Comm gets.) A rate cap (max_rate_Bps) cannot be set on host-to-host comms in
//    3.32 (Comm::set_rate is ignored there), so capped transfers leave from a shadow host of the
//    GPU whose routes start with a FATPIPE link of the cap's bandwidth: every flow crossing a
//    FATPIPE is bounded by it individually, without sharing.
//  - zero-duration ops and transfers from a GPU to itself complete at once, without SimGrid.
//  - a transfer that finds every link of its route idle runs as a kernel timer at the rate a
//    lone SimGrid flow gets (its route's narrowest link, under its cap): max-min fairness has
//    nothing to share, and a Comm costs an LMM variable, a constraint expansion and a solve per
//    start and end. When a later flow reaches one of its links, it becomes a Comm for the bytes
//    it has left, so from then on SimGrid shares the link exactly as before. Measured on
//    Llama-3 70B, 128 GPUs, full replay (3.9 M ops): replay 6.9 -> 4.7 s. The times agree with
//    Comms to SimGrid's rounding (~2e-11 s per Comm, tests/engine/solo_transfers_test.cpp);
//    where compute interference feeds transfer timing back into compute, that rounding can grow
//    (x10 per ~17 ms of simulated time in that 70B step, 0.4 % of the step after 32 layers).
//    Transfers of one same route that meet only each other stay timers too, as one group with
//    max-min's shares (route_bundles.hpp), and Comms of one route become such a group when a
//    transfer of that route finds nothing else on its links (regroup).
//  - a pipeline (TaskGraph::Pipeline: one NCCL channel's ring or tree) is one Comm between a
//    pair of pipeline hosts whose route is every member's links, a link listed once per member
//    crossing it: LMM then gives the members one rate, the one their most loaded link allows,
//    and each link carries that rate times its members. It starts when the last member joined
//    and its latency passed. Measured on a 1 GiB NVLS-Tree all-reduce over 16,384 GPUs: the
//    rails' 8,188 tree edges were ~7,800 distinct completions, each re-solving its rail's whole
//    max-min component (127.6 s); as 16 pipelines they are 16 flows. Links only the
//    pipeline's own members cross are left out of its route for one cap link (route_pipeline),
//    and graphs with lanes of 128+ members use SimGrid's Full update (full_update, simgrid_platform.cpp).
#include <xbt/log.h>

#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <simgrid/kernel/Timer.hpp>
#include <simgrid/s4u.hpp>
#include <stdexcept>

#include "engine/event_queue.hpp"
#include "engine/replay.hpp"
#include "engine/replay_common.hpp"
#include "engine/route_bundles.hpp"
#include "engine/simgrid_event.hpp"
#include "engine/simgrid_platform.hpp"
#include "engine/trace_writer.hpp"
#include "support/lifetime.hpp"

namespace cpsim::engine {

namespace sg4 = simgrid::s4u;
using schedule::OpId;
using schedule::OpKind;

namespace {

/// The replay state; SimGrid callbacks reach it through a pointer.
struct Replay {
  const schedule::TaskGraph& g;
  const model::Topology& topo;
  detail::TopologyZone& zone;
  const ReplayOptions& opt;
  Trace& tr;
  detail::TraceWriter& times;  ///< tr's per-op times
  const schedule::ComputeNoise& noise;  ///< opt.noise or the graph's
  std::vector<sg4::Host*> hosts{};                              ///< per GPU
  std::map<std::pair<int, double>, sg4::Host*> capped_hosts{};  ///< (GPU, cap) -> shadow host
  detail::Waits waits;
  std::unordered_map<OpId, sg4::CommPtr> running{};  ///< SimGrid comms in flight
  /// Those comms by route (source << 32 | destination), to regroup them as timers (regroup).
  std::unordered_map<uint64_t, std::vector<OpId>> route_comms{};
  static uint64_t route_key(int src, int dst) {
    return (static_cast<uint64_t>(src) << 32) | static_cast<uint32_t>(dst);
  }
  /// Transfers running as timers: alone on their route's links, or with transfers of the same
  /// route only, since they started (route_bundles.hpp).
  detail::RouteBundles solos;
  std::vector<uint32_t> link_flows{};  ///< per Topology link: transfers in flight on it
  std::vector<sg4::ActivityPtr> graveyard{};  ///< finished, released when time advances
  std::vector<int> inflight{};                ///< transfers in flight per GPU
  std::vector<detail::GpuKernels> kernels{};  ///< per GPU: its kernels in flight
  std::deque<OpId> instant{};                 ///< completed without SimGrid, to process
  /// Our timers, behind one SimGrid timer at the earliest live one (`wake`): simgrid_event.hpp.
  using Ev = detail::SgEv;
  using Event = detail::SgEvent;
  static Event event(double t, OpId op, Ev kind, uint32_t aux = 0) { return Event::make(t, op, kind, aux); }
  detail::EventQueue<Event> events{};
  simgrid::kernel::timer::Timer* wake = nullptr;
  double wake_t = 0;
  /// Pipelines: members joined so far and when the last one's latency has passed.
  struct Joining {
    uint32_t arrived = 0;
    double launch_s = 0;
  };
  std::unordered_map<uint32_t, Joining> joining{};
  /// Pipeline host pairs (source, destination) and the free ones. A pipeline that finds none
  /// free runs its members as independent transfers.
  std::vector<std::pair<sg4::Host*, sg4::Host*>> pipe_hosts{};
  std::vector<int> free_slots{};
  /// A running pipeline: its Comm, slot, and each distinct link its members cross with how many
  /// of them cross it.
  struct PipeFlow {
    sg4::CommPtr comm;
    int slot;
    std::vector<std::pair<uint32_t, uint32_t>> load;
  };
  std::unordered_map<uint32_t, PipeFlow> pipes_running{};
  static constexpr uint32_t kNoPipe = UINT32_MAX;
  /// Per Topology link: the running pipeline whose Comm leaves it out of its route because no
  /// other flow is on it (see route_pipeline), or kNoPipe.
  std::vector<uint32_t> link_pipe{};
  std::vector<uint32_t> link_scratch{};  ///< per Topology link, zero between uses
  detail::RouteCache routes;                ///< wire latency per (src, dst)
  bool draining = false;
  size_t done = 0;
  /// SimGrid's clock, read when SimGrid hands over control (our timer, a Comm's end); reading
  /// it ~5 times per op was ~4 % of the replay's instructions (counted on the 70B cut to 64 GPUs).
  double now_ = 0;

  /// Comm data: op id + 1, or a pipeline index with the top bit set.
  static constexpr uintptr_t kPipeBit = uintptr_t{1} << (sizeof(uintptr_t) * 8 - 1);
  static void* tag(OpId id) { return reinterpret_cast<void*>(static_cast<uintptr_t>(id) + 1); }
  static void* pipe_tag(uint32_t p) { return reinterpret_cast<void*>(kPipeBit | p); }

  /// Kernel speed on a GPU: slowed by interference while it has a transfer in flight.
  double speed(int gpu) const {
    return opt.interference > 0 && inflight[gpu] > 0 ? 1.0 / (1.0 + opt.interference) : 1.0;
  }

  void comm_delta(int gpu, int delta) {
    const double before = speed(gpu);
    inflight[gpu] += delta;
    const double after = speed(gpu);
    if (after == before) return;
    kernels[gpu].move(now_, after, [&](OpId id, double end) {
      events.push(event(end, id, Ev::Kernel, static_cast<uint32_t>(gpu)));
    });
  }

  /// Whether event e is one to run (a kernel's event carries its GPU: reading a copied op
  /// costs a search and a copy).
  bool live(const Event& e) const {
    if (e.kind() == Ev::Kernel) return kernels[e.aux()].ends(e.op, e.t);
    if (e.kind() == Ev::Solo) return solos.current(e.op, e.t);
    return true;
  }
  /// Event e, taken off the queue, came due: whether to run it. A kernel that moved later since
  /// its end was queued has its end now queued instead (GpuKernels::take); one that ends is
  /// removed from its GPU's.
  bool take(const Event& e) {
    if (e.kind() != Ev::Kernel) return live(e);
    return kernels[e.aux()].take(e.op, e.t, [&](OpId id, double end) {
      events.push(event(end, id, Ev::Kernel, e.aux()));
    });
  }
  void fire(const Event& e) {
    switch (e.kind()) {
      case Ev::Kernel:
        complete_compute(e.op);  // (taken off its GPU's kernels by take)
        break;
      case Ev::Plain: complete_compute(e.op); break;
      case Ev::Launch: launch_comm(e.op); break;
      case Ev::Solo:
        solos.finish(e.op, now_, queue_solo());
        transfer_done(e.op);
        break;
      case Ev::Pipeline: launch_pipeline(e.aux()); break;
    }
    drain();
  }
  /// SimGrid's timer: runs our events due now (those they queue for now too), then re-arms.
  void run_due() {
    const double now = now_ = sg4::Engine::get_clock();
    while (!events.empty() && events.top().t <= now) {
      const Event e = events.top();
      events.pop();
      if (take(e)) fire(e);
    }
    arm_wake();
  }
  /// Keeps SimGrid's one timer at our earliest live event; called whenever SimGrid hands back
  /// control (its timer, a Comm's end) and before it runs.
  void arm_wake() {
    while (!events.empty() && !live(events.top())) {
      const Event e = events.top();
      events.pop();
      take(e);  // (a kernel moved later: its end queued now)
    }
    if (events.empty() || (wake != nullptr && wake_t != events.top().t)) {
      if (wake != nullptr) wake->remove();
      wake = nullptr;
    }
    if (events.empty() || wake != nullptr) return;
    wake_t = events.top().t;
    wake = simgrid::kernel::timer::Timer::set(wake_t, [this] {
      wake = nullptr;
      run_due();
    });
  }

  void start(OpId id) {
    times.start(id, now_);
    int32_t shift;
    const schedule::Op& stored = g.stored_op(id, shift);
    if (stored.kind == OpKind::Compute) {
      const int rank = stored.rank + shift;
      const double d = detail::compute_time_s(stored, id, noise, rank);
      if (!(d > 0)) {
        instant.push_back(id);
        return;
      }
      const double now = now_;
      if (!stored.noisy) {  // a runtime overhead: host-side or a latency, interference does not slow it
        events.push(event(now + d, id, Ev::Plain));
        return;
      }
      events.push(event(kernels[rank].start(id, d, now, speed(rank)), id, Ev::Kernel, static_cast<uint32_t>(rank)));
      return;
    }
    const int rank = stored.rank + shift, peer = stored.peer + shift;  // (a transfer has a peer)
    if (!stored.interference_priced) {
      comm_delta(rank, +1);
      if (peer != rank) comm_delta(peer, +1);
    }
    const double delay =
        std::max(0.0, stored.extra_latency_s) + (peer != rank ? routes.get(rank, peer).latency_s : 0.0);
    if (const uint32_t p = opt.pipelines ? g.pipeline_of(id) : UINT32_MAX; p != UINT32_MAX) {
      join_pipeline(p, now_ + delay);
      return;
    }
    if (delay > 0)
      events.push(event(now_ + delay, id, Ev::Launch));
    else
      launch_comm(id);
  }

  void launch_comm(OpId id) {
    int32_t shift;
    const schedule::Op& op = g.stored_op(id, shift);  // (in place: see start)
    const int rank = op.rank + shift, peer = op.peer + shift;
    if (rank == peer) {
      instant.push_back(id);
      return;
    }
    const detail::RouteInfo& ri = routes.get(rank, peer);
    const auto [lb, le] = routes.links(ri);
    const double bytes = static_cast<double>(std::llround(std::max(0.0, op.bytes)));
    const double cap = op.max_rate_Bps > 0 ? op.max_rate_Bps : 0.0;
    if (opt.solo_transfers) {
      // A timer if its links carry nothing, or only transfers of its route (caps may differ).
      bool alone = true;
      for (const uint32_t* l = lb; l != le; ++l) alone = alone && link_flows[*l] == 0;
      uint32_t b = detail::RouteBundles::kNone;
      if (alone)
        b = solos.open(rank, peer, ri.bw_Bps, lb, le);
      else if (const uint32_t on = solos.on_link(*lb); on != detail::RouteBundles::kNone)
        b = solos.same(on, rank, peer) ? on : detail::RouteBundles::kNone;
      else
        b = regroup(rank, peer, ri, lb, le);
      if (b != detail::RouteBundles::kNone) {
        for (const uint32_t* l = lb; l != le; ++l) ++link_flows[*l];
        solos.join(b, id, bytes, cap, now_, queue_solo());
        return;
      }
    }
    for (const uint32_t* l = lb; l != le; ++l) ++link_flows[*l];
    for (const uint32_t* l = lb; l != le; ++l) reached(*l);
    start_comm(id, bytes);
  }

  /// The links of route rank -> peer carry Comms of that route only: they become a group of
  /// timers (route_bundles.hpp) for their bytes left, which the transfer then joins; else kNone. A
  /// route's transfers that overlap in a chain (a ring step's K,V sent while the previous dK,dV
  /// is in flight) would otherwise stay Comms for as long as the chain lasts once a group of
  /// them was dissolved: counted, 127 regroups on llama3-8b-128k-4nodes (27,198 Comms), none on
  /// the 70B full replay. (When groups required equal caps, K,V and dK,dV could not group and
  /// chained as Comms there: 1,419 in flight on average, each end scanning them all.)
  uint32_t regroup(int rank, int peer, const detail::RouteInfo& ri, const uint32_t* lb,
                   const uint32_t* le) {
    auto it = route_comms.find(route_key(rank, peer));
    if (it == route_comms.end() || it->second.empty()) return detail::RouteBundles::kNone;
    const std::vector<OpId>& same = it->second;
    for (const uint32_t* l = lb; l != le; ++l)
      if (link_flows[*l] != same.size()) return detail::RouteBundles::kNone;
    for (const OpId c : same)  // one ends now: SimGrid may be posting it, let it (as repipe)
      if (!(running.at(c)->get_remaining() >= 1)) return detail::RouteBundles::kNone;
    const double now = now_;
    const uint32_t b = solos.open(rank, peer, ri.bw_Bps, lb, le);
    for (const OpId c : same) {
      auto r = running.find(c);
      const double left = r->second->get_remaining();
      release(r->second);
      running.erase(r);
      solos.join(b, c, left, std::max(0.0, g.op(c).max_rate_Bps), now, queue_solo());
    }
    route_comms.erase(it);
    return b;
  }

  /// Takes a Comm out of SimGrid's sharing: suspended first so its variable shares nothing while
  /// SimGrid cleans it up, kept alive until time moves on.
  void release(sg4::CommPtr& c) {
    c->set_data(nullptr);
    c->suspend();
    c->cancel();
    graveyard.push_back(std::move(c));
  }

  /// Queues a timer transfer's (new) end.
  struct QueueSolo {
    Replay* r;
    void operator()(OpId id, double end) const {
      r->events.push(event(end, id, Ev::Solo));
    }
  };
  QueueSolo queue_solo() { return QueueSolo{this}; }

  /// A member of pipeline p is ready to move data at `ready_s`; the last one launches it.
  void join_pipeline(uint32_t p, double ready_s) {
    Joining& j = joining[p];
    ++j.arrived;
    j.launch_s = std::max(j.launch_s, ready_s);
    if (j.arrived < g.pipelines()[p].count) return;
    const double at = j.launch_s;
    joining.erase(p);
    if (at > now_)
      events.push(event(at, g.pipelines()[p].first, Ev::Pipeline, p));
    else
      launch_pipeline(p);
  }

  void launch_pipeline(uint32_t p) {
    const schedule::Pipeline& pl = g.pipelines()[p];
    if (free_slots.empty()) {
      for (OpId m = pl.first; m < pl.first + pl.count; ++m) launch_comm(m);
      return;
    }
    const int slot = free_slots.back();
    free_slots.pop_back();
    PipeFlow& pf = pipes_running[p];
    pf.slot = slot;
    pf.load.clear();
    for (OpId m = pl.first; m < pl.first + pl.count; ++m) {
      const auto [lb, le] = routes.links(routes.get(g.op(m).rank, g.op(m).peer));
      for (const uint32_t* l = lb; l != le; ++l) {
        ++link_flows[*l];
        if (link_scratch[*l]++ == 0) pf.load.emplace_back(*l, 0);
      }
    }
    for (auto& [l, members] : pf.load) {
      members = link_scratch[l];
      link_scratch[l] = 0;
    }
    for (const auto& [l, members] : pf.load) reached(l);
    route_pipeline(p, pf);
    start_pipe_comm(p, pf, std::llround(std::max(0.0, g.op(pl.first).bytes)));
  }

  /// The route of pipeline p's Comm. A link that some other flow also crosses is listed once per
  /// member crossing it, so max-min gives it the members' load. A link only its own members
  /// cross cannot be shared: it only bounds the rate, at its bandwidth / members; those links
  /// are left out and the tightest such bound is the slot's one FATPIPE cap link, the same
  /// constraint on the pipeline's rate. Why: SimGrid 3.32's selective update
  /// (System::update_modified_cnst_set_rec) marks a variable visited only after walking all
  /// its links, recursing into each, so each solve that reaches a variable of k links costs
  /// ~k^2 / 2 steps: a DP x CP ring lane of 1,024 GPUs is 2,176 links, and the 405B layout
  /// tp 2, cp 16, pp 8, dp 64 spent 72 % of a 216 s SimGrid replay there.
  void route_pipeline(uint32_t p, const PipeFlow& pf) {
    std::vector<uint32_t>& links = zone.slot_links[pf.slot];
    links.clear();
    double cap = std::numeric_limits<double>::infinity();
    for (const auto& [l, members] : pf.load) {
      if (opt.solo_transfers && link_flows[l] == members) {
        cap = std::min(cap, topo.links()[l].bw_Bps / members);
        link_pipe[l] = p;
        continue;
      }
      if (link_pipe[l] == p) link_pipe[l] = kNoPipe;
      links.insert(links.end(), members, l);
    }
    zone.slot_capped[pf.slot] = std::isfinite(cap);
    if (std::isfinite(cap)) zone.slot_cap[pf.slot]->set_bandwidth(cap);
  }

  void start_pipe_comm(uint32_t p, PipeFlow& pf, double bytes) {
    pf.comm = sg4::Comm::sendto_init(pipe_hosts[pf.slot].first, pipe_hosts[pf.slot].second);
    pf.comm->set_payload_size(static_cast<uint64_t>(std::llround(bytes)));
    pf.comm->set_data(pipe_tag(p));
    pf.comm->start();
  }

  /// Link l now carries one more flow (counted in link_flows): flows that had it to themselves
  /// give way to SimGrid's sharing, a group of timers as Comms for their bytes left
  /// (RouteBundles::dissolve), a pipeline with the link in its Comm's route (repipe).
  void reached(uint32_t l) {
    if (const uint32_t b = solos.on_link(l); b != detail::RouteBundles::kNone)
      solos.dissolve(b, now_, [this](OpId id, double left) { start_comm(id, left); });
    if (link_pipe[l] != kNoPipe) repipe(link_pipe[l]);
  }

  /// Another flow reached one of pipeline p's private links: its Comm gives way to one over
  /// the links now shared, for the bytes it has left (as a solo transfer becomes a Comm). The
  /// old Comm is suspended first, so its variable shares nothing while SimGrid cleans it up.
  void repipe(uint32_t p) {
    PipeFlow& pf = pipes_running.at(p);
    const double left = pf.comm->get_remaining();
    if (!(left >= 1)) return;  // it ends now: under a byte of sharing to miss
    release(pf.comm);
    route_pipeline(p, pf);
    start_pipe_comm(p, pf, left);
  }

  void start_comm(OpId id, double bytes) {
    const auto& op = g.op(id);
    sg4::Host* src =
        op.max_rate_Bps > 0 ? capped_hosts.at({op.rank, op.max_rate_Bps}) : hosts[op.rank];
    auto c = sg4::Comm::sendto_init(src, hosts[op.peer]);
    c->set_payload_size(static_cast<uint64_t>(std::llround(std::max(0.0, bytes))));
    c->set_data(tag(id));
    c->start();
    running[id] = c;
    route_comms[route_key(op.rank, op.peer)].push_back(id);
  }

  /// A transfer's bytes arrived (as a Comm or a solo timer): its links are free of it. (Read
  /// in place, not copied: see start.)
  void transfer_done(OpId id) {
    int32_t shift;
    const schedule::Op& op = g.stored_op(id, shift);
    const auto [lb, le] = routes.links(routes.get(op.rank + shift, op.peer + shift));
    for (const uint32_t* l = lb; l != le; ++l) --link_flows[*l];
    complete(id, op, shift);
  }

  void complete(OpId id) {
    int32_t shift;
    const schedule::Op& op = g.stored_op(id, shift);
    complete(id, op, shift);
  }
  /// Op id, stored as `op` on ranks `shift` lower (TaskGraph::stored_op), is done.
  void complete(OpId id, const schedule::Op& op, int32_t shift) {
    if (op.kind == OpKind::Transfer && !op.interference_priced) {
      comm_delta(op.rank + shift, -1);
      if (op.peer != op.rank) comm_delta(op.peer + shift, -1);
    }
    release_successors(id);
  }
  /// A compute op's end (a kernel's or a plain timer's): no op to read (a copied op's read is a
  /// search and a copy: ~6 % of the 70B full replay's samples went to them).
  void complete_compute(OpId id) { release_successors(id); }
  void release_successors(OpId id) {
    const double now = now_;
    times.end(id, now);
    detail::extend_makespan(tr, now);
    ++done;
    if (opt.progress && done % ReplayOptions::kProgressEvery == 0) opt.progress(now, done, g.size());
    detail::release_successors(g, waits, id, [this](OpId s) { start(s); });
  }

  /// Completes the ops that finished without SimGrid; they may release more of them.
  void drain() {
    if (draining) return;
    draining = true;
    while (!instant.empty()) {
      OpId id = instant.front();
      instant.pop_front();
      complete(id);
    }
    draining = false;
  }

  void on_activity_done(const sg4::Activity& a) {
    void* data = a.get_data<void>();
    if (data == nullptr) return;
    now_ = sg4::Engine::get_clock();
    const auto bits = reinterpret_cast<uintptr_t>(data);
    if (bits & kPipeBit) {
      const auto p = static_cast<uint32_t>(bits & ~kPipeBit);
      auto it = pipes_running.find(p);
      graveyard.push_back(std::move(it->second.comm));
      free_slots.push_back(it->second.slot);
      for (const auto& [l, members] : it->second.load)
        if (link_pipe[l] == p) link_pipe[l] = kNoPipe;
      pipes_running.erase(it);
      const schedule::Pipeline& pl = g.pipelines()[p];
      for (OpId m = pl.first; m < pl.first + pl.count; ++m) transfer_done(m);
      drain();
      arm_wake();
      return;
    }
    const auto id = static_cast<OpId>(bits - 1);
    // SimGrid is still inside a.complete(): keep the activity alive until time moves on.
    auto it = running.find(id);
    graveyard.push_back(std::move(it->second));
    running.erase(it);
    {
      const auto& op = g.op(id);
      std::vector<OpId>& same = route_comms.at(route_key(op.rank, op.peer));
      same.erase(std::find(same.begin(), same.end(), id));
    }
    transfer_done(id);
    drain();
    arm_wake();
  }
};

bool g_engine_used = false;


}  // namespace

Trace replay_simgrid(const schedule::TaskGraph& g, const model::Topology& topo,
                     const ReplayOptions& opt) {
  const auto wall0 = std::chrono::steady_clock::now();
  detail::check_replayable(g, topo);
  if (g_engine_used || sg4::Engine::has_instance())
    throw std::logic_error(
        "replay_simgrid: SimGrid allows one Engine per process; use replay_in_child");
  g_engine_used = true;

  if (!opt.verbose) xbt_log_control_set("root.thres:critical");
  sg4::Engine engine("cpsim");
  // SimGrid's engine takes SIGINT for itself (a status dump, exit 1 at the second): give it back
  // to cpsim's, which kills the children and removes the temporaries (support/lifetime.hpp).
  support::reclaim_signals();
  // A GPU fabric, not wide-area TCP: with these a lone flow takes exactly L + S/B.
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/crosstraffic:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
  if (opt.pipelines && detail::full_update(g)) sg4::Engine::set_config("network/optim:Full");

  const size_t n = g.size();
  Trace tr;
  tr.engine = "simgrid";
  const int gpus = topo.gpus();

  // --- platform, wait counts and the trace's arrays ---
  std::optional<detail::SimgridPlatform> pf;
  std::optional<detail::Waits> waits;
  pf.emplace(detail::build_platform(g, topo, opt.pipelines));
  waits.emplace(g);
  detail::TraceWriter times(tr, n, opt.keep_times);  // (after the counts' threads)
  Replay rp{.g = g, .topo = topo, .zone = *pf->zone, .opt = opt, .tr = tr, .times = times, .noise = opt.noise ? *opt.noise : g.noise(),
            .hosts = std::move(pf->hosts), .capped_hosts = std::move(pf->capped_hosts),
            .waits = std::move(*waits), .solos = detail::RouteBundles(topo.links().size()),
            .routes = detail::RouteCache(topo)};
  rp.pipe_hosts = std::move(pf->pipe_hosts);
  for (size_t k = rp.pipe_hosts.size(); k > 0; --k) rp.free_slots.push_back(static_cast<int>(k - 1));

  // --- replay ---
  rp.link_flows.assign(topo.links().size(), 0);
  rp.link_pipe.assign(topo.links().size(), Replay::kNoPipe);
  rp.link_scratch.assign(topo.links().size(), 0);
  rp.inflight.assign(gpus, 0);
  rp.kernels.resize(gpus);
  Replay* self = &rp;
  sg4::Activity::on_completion_cb([self](const sg4::Activity& a) { self->on_activity_done(a); });
  sg4::Engine::on_time_advance_cb([self](double) { self->graveyard.clear(); });
  for (OpId id = 0; id < n; ++id)
    if (rp.waits.ready(id)) rp.start(id);
  rp.drain();
  rp.arm_wake();
  engine.run();

  rp.graveyard.clear();
  rp.running.clear();
  times.finish();
  if (rp.done != n) {
    OpId stuck = 0;
    while (stuck < n && rp.waits.ready(stuck)) ++stuck;
    throw std::runtime_error("simgrid replay: " + std::to_string(n - rp.done) +
                             " ops never ran, e.g. " +
                             (stuck < n ? g.describe(stuck) : std::string("?")));
  }
  tr.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return tr;
}

}  // namespace cpsim::engine
