#pragma once
/// Engines replay a finalized TaskGraph on a Topology and return per-op start/end times.
#include <cstddef>
#include <functional>

#include "model/topology.hpp"
#include "schedule/task_graph.hpp"
#include "schedule/trace.hpp"

namespace cpsim::engine {

using schedule::Trace;

struct ReplayOptions {
  /// Compute ops run this much slower (0.2 = 20 %) while a transfer of the same GPU is in
  /// flight (SM and HBM contention with NCCL kernels). 0 = ideal overlap.
  double interference = 0;
  bool verbose = false;          ///< let SimGrid log
  /// SimGrid: run a transfer whose route is idle as a timer until another flow meets it (see
  /// simgrid.cpp). Off: every transfer is a SimGrid Comm (the reference the tests compare to).
  bool solo_transfers = true;
  /// Replay each TaskGraph::Pipeline's members in lockstep (one rate, started and ended
  /// together). Off: they run as independent transfers, as before pipelines existed.
  bool pipelines = true;
  /// Fleet noise for the graph's priced compute ops instead of graph.noise(): another seed (a
  /// sample) or a spared rank (the straggler what-if) on the same graph. Null: the graph's own.
  const schedule::ComputeNoise* noise = nullptr;
  /// Keep every op's start and end (Trace::start_s / end_s). Off: only the makespan, for a
  /// replay whose step time alone is wanted (a sample): 16 bytes per op less, 1.5 GB on the
  /// 405B 16,384-GPU full replay.
  bool keep_times = true;
  /// Called every kProgressEvery completed ops with the simulated time reached, the ops done and
  /// the ops in all (for a progress line). Empty: never.
  std::function<void(double sim_s, size_t done, size_t total)> progress;
  static constexpr size_t kProgressEvery = 1 << 14;
};

/// Contention-free: each transfer takes extra_latency + route latency + bytes / min(route bw,
/// max_rate). Deterministic, fast, no SimGrid.
Trace replay_analytic(const schedule::TaskGraph& g, const model::Topology& topo,
                      const ReplayOptions& opt = {});

/// SimGrid: a host per GPU, flows share links (max-min fairness). Creates the process's one
/// simgrid::s4u::Engine: call at most once per process (app/child_replay.hpp replays in a
/// child process).
Trace replay_simgrid(const schedule::TaskGraph& g, const model::Topology& topo,
                     const ReplayOptions& opt = {});

/// Dispatches to the engine `kind` names.
Trace replay(const schedule::TaskGraph& g, const model::Topology& topo,
             scenario::EngineKind kind, const ReplayOptions& opt = {});

}  // namespace cpsim::engine
