// The analytic engine: an event-driven replay without contention. Every transfer runs at its
// route's bottleneck bandwidth as if alone; compute runs at full speed unless interference is
// on, in which case it slows while an NCCL transfer of its GPU is in flight, exactly as the
// SimGrid engine models it (so the two agree whenever no link is shared). A pipeline's members
// (TaskGraph::Pipeline) start moving data together once the last one joined and its latency
// passed, and end together after the slowest member's serialisation, as in the SimGrid engine.
#include <chrono>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "engine/event_queue.hpp"
#include "engine/replay.hpp"
#include "engine/replay_common.hpp"
#include "engine/trace_writer.hpp"

namespace cpsim::engine {

using schedule::OpId;
using schedule::OpKind;

namespace {

struct Event {
  double t;
  OpId op;
  /// 0: an op that is never moved; 1: the end of a kernel slowed or sped up by interference,
  /// stale unless it is still that kernel's end in its GPU's GpuKernels (ops in flight hold
  /// it: 4 B per op of the graph were 97 MB on the 24 M-op 70B full replay).
  uint32_t kernel;
};

}  // namespace

Trace replay_analytic(const schedule::TaskGraph& g, const model::Topology& topo,
                      const ReplayOptions& opt) {
  const auto wall0 = std::chrono::steady_clock::now();
  detail::check_replayable(g, topo);
  const size_t n = g.size();

  Trace tr;
  tr.engine = "analytic";
  detail::Waits waits(g);
  detail::TraceWriter times(tr, n, opt.keep_times);  // (after the counts' threads)
  detail::RouteCache routes(topo);
  detail::EventQueue<Event> events;

  // Interference: compute progresses at `rate` (1 when no transfer of its GPU is in flight).
  const bool interfere = opt.interference > 0;
  const schedule::ComputeNoise& noise = opt.noise ? *opt.noise : g.noise();
  const double slow_rate = interfere ? 1.0 / (1.0 + opt.interference) : 1.0;
  std::vector<int> inflight(interfere ? topo.gpus() : 0, 0);
  std::vector<detail::GpuKernels> running(interfere ? topo.gpus() : 0);
  auto comm_delta = [&](int gpu, int delta, double t) {
    const int before = inflight[gpu];
    inflight[gpu] += delta;
    if ((before == 0) != (inflight[gpu] == 0))
      running[gpu].move(t, inflight[gpu] ? slow_rate : 1.0,
                        [&](OpId id, double end) { events.push({end, id, 1}); });
  };

  // Pipelines being joined: the latest time a member's latency ends, the longest
  // serialisation, the members joined.
  struct Joining {
    double launch_s = 0, ser_s = 0;
    uint32_t arrived = 0;
  };
  std::unordered_map<uint32_t, Joining> joining;

  auto start = [&](OpId id, double t) {
    const auto& op = g.op(id);
    times.start(id, t);
    if (op.kind == OpKind::Compute) {
      const double d = detail::compute_time_s(op, id, noise);
      if (interfere && d > 0 && op.noisy) {  // (runtime overheads: host-side, not slowed)
        events.push({running[op.rank].start(id, d, t, inflight[op.rank] ? slow_rate : 1.0), id, 1});
      } else {
        events.push({t + std::max(0.0, d), id, 0});
      }
      return;
    }
    const schedule::LoneTransfer lt = op.rank == op.peer
                                          ? schedule::LoneTransfer{0, std::max(0.0, op.extra_latency_s)}
                                          : detail::lone_transfer(op, routes.get(op.rank, op.peer));
    const double dur = lt.duration_s;
    // Only unordered transfers form pipelines (TaskGraph::add_pipeline): the others skip the
    // binary search over every pipeline.
    if (const uint32_t p = opt.pipelines && op.unordered ? g.pipeline_of(id) : UINT32_MAX; p != UINT32_MAX) {
      Joining& j = joining[p];
      j.launch_s = std::max(j.launch_s, t + lt.latency_s);
      j.ser_s = std::max(j.ser_s, lt.serialisation_s());
      const schedule::Pipeline& pl = g.pipelines()[p];
      if (++j.arrived == pl.count) {
        const double end = j.launch_s + j.ser_s;
        joining.erase(p);
        for (OpId m = pl.first; m < pl.first + pl.count; ++m) events.push({end, m, 0});
      }
    } else {
      events.push({t + dur, id, 0});
    }
    if (interfere && !op.interference_priced) {
      comm_delta(op.rank, +1, t);
      if (op.peer != op.rank) comm_delta(op.peer, +1, t);
    }
  };

  for (OpId id = 0; id < n; ++id)
    if (waits.ready(id)) start(id, 0.0);

  size_t done = 0;
  while (!events.empty()) {
    const Event ev = events.top();
    events.pop();
    const OpId id = ev.op;
    const auto& op = g.op(id);
    // A kernel interference can move: its end unless it moved since.
    if (ev.kernel != 0 &&
        !running[op.rank].take(id, ev.t, [&](OpId k, double end) { events.push({end, k, 1}); }))
      continue;
    times.end(id, ev.t);
    detail::extend_makespan(tr, ev.t);
    ++done;
    if (opt.progress && done % ReplayOptions::kProgressEvery == 0) opt.progress(ev.t, done, n);
    if (interfere && ev.kernel == 0 && op.kind == OpKind::Transfer && !op.interference_priced) {
      comm_delta(op.rank, -1, ev.t);
      if (op.peer != op.rank) comm_delta(op.peer, -1, ev.t);
    }
    detail::release_successors(g, waits, id, [&](OpId s) { start(s, ev.t); });
  }
  if (done != n) throw std::logic_error("analytic replay: ops left unreplayed (graph deadlock)");
  times.finish();

  tr.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return tr;
}

}  // namespace cpsim::engine
