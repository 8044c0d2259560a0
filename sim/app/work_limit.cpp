#include "app/work_limit.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "app/simulate.hpp"
#include "scenario/load.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::app {

namespace {

/// Resident bytes per op of a replayed graph: the op and its label, edges and per-stream queues
/// (schedule::TaskGraph), the replay's per-op state and the trace's start/end times. Measured
/// as maximum RSS (/usr/bin/time) over ops: llama3-8b-128k-4nodes.yaml with 4 micro-batches on
/// SimGrid, 786,816 ops in 207 MB (~205 B/op over the 45 MB base); with 17 on the analytic
/// engine, 3.29 M ops in 785 MB (~225 B/op). Rounded up.
constexpr double kBytesPerOp = 300;
/// A copied DP replica's op (TaskGraph::copy_ops) is not stored, nor are its edges and queue
/// links (it reads its original's): it costs its replay state and trace times. Llama-3 70B
/// full replay (symmetry off, SimGrid), 1,024 H100 with 7 copied replicas (24.30 M ops) peaked
/// at 947.8 MB and 2,048 H100 with 15 (48.60 M ops, 24.30 M more copies) at 1,415.5 MB:
/// ~19 B per copied op (trace times 16 B, waits 2 B). It was ~81 B when copies had their own
/// edges and queue slots. Scaled as kBytesPerOp is over its measurement (300 / 203) and
/// rounded up.
constexpr double kBytesPerCopiedOp = 32;
/// A step time alone (`cpsim plan`'s whole steps): the graph and the replay's per-op state, no
/// trace times and no report. Llama 3 405B on 16,384 H100, one replica built, analytic engine,
/// maximum RSS of a process that loads the scenario and replays its step (B per op over
/// kBaseBytes): tp 8 cp 4 pp 2 ring, 5.41 M ops, 0.92 GB (162); tp 2 cp 8 pp 16 USP, 16.9 M,
/// 2.75-2.82 GB (160-164); tp 4 cp 8 pp 4 double ring, 14.3 M, 2.40-2.46 GB (165-169); tp 4
/// cp 16 pp 4 USP, 27.9 M, 4.64 GB (165); tp 2 cp 16 pp 8 USP, 27.2 M, 4.54-4.65 GB (165-169);
/// tp 1 cp 32 pp 16 USP, 50.3 M, 8.51 GB (168); tp 8 cp 1 pp 2 ZeRO-3, 52.1 M, 8.18 GB (156).
/// SimGrid: tp 2 cp 8 pp 16 USP 2.79 GB (165 B per estimated op), tp 2 cp 16 pp 8 USP 4.53 GB
/// (166). Building alone, tp 8 cp 16 pp 2 ZeRO-3: 61.2 M ops, 10.46 GB (170). Rounded up to
/// >= 1.1x every measurement: it sizes what a child holds and where its build stops (the op
/// limit); the child's memory watchdog, not this margin, is what keeps it within its limit.
/// It was 250 (from 189-196 B/op measured on older builds): `cpsim plan` then stopped layouts
/// of 50-52 M ops at 50.4 M ops, "over the 12.6 GB" its children may use, where they need
/// ~8.5 GB (and 220 stopped 61.2 M-op ones that need ~10.5 GB at 57.2 M).
constexpr double kStepBytesPerOp = 190;
/// More per op when a Chrome trace is built in memory: the same scenario with 1 micro-batch
/// (~0.21 M ops) peaks at 1.71 GB with --trace against 80 MB without (~7.7 KB/op).
constexpr double kTraceBytesPerOp = 8000;
/// What the process holds before it builds anything (SimGrid, presets, the platform): the
/// quick start's 48 K ops run in 45 MB.
constexpr double kBaseBytes = 45e6;

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
  return buf;
}

std::string count(double n) {
  char buf[32];
  if (n >= 1e12) std::snprintf(buf, sizeof buf, "%.3g", n);
  else if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.3g G", n / 1e9);
  else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.3g M", n / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

}  // namespace

double default_plan_memory() {
  if (const char* env = std::getenv("CPSIM_MAX_MEMORY"); env != nullptr && *env != '\0') return default_max_memory();
  return 1.5 * default_max_memory();
}

double default_max_memory() {
  // A site (or the argv fuzzer) can lower the default for every subcommand at once.
  if (const char* env = std::getenv("CPSIM_MAX_MEMORY"); env != nullptr && *env != '\0') {
    try {
      return parse_memory_limit(env);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("CPSIM_MAX_MEMORY: ") + e.what());
    }
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 8e9;
  return 0.5 * static_cast<double>(pages) * static_cast<double>(page);
}

double parse_memory_limit(const std::string& s) {
  double v = 0;
  try {
    v = scenario::parse_bytes(s);
  } catch (const std::exception& e) {
    throw std::invalid_argument("--max-memory: " + std::string(e.what()));
  }
  if (!(v > 0)) throw std::invalid_argument("--max-memory: expected a size above 0, e.g. 8GiB (got '" + s + "')");
  return v;
}

WorkEstimate estimate_work(const scenario::Scenario& sc, bool trace, int probe_above) {
  WorkEstimate e;
  const int m = sc.training.micro_batches;
  // Layer scope builds the whole pipeline too, with fewer layers: its ops grow with m as well.
  if (sc.simulation.scope == scenario::Scope::AttentionLayer || m <= std::max(2, probe_above)) return e;
  // Probed with 1 and 2 micro-batches. An interleaved pipeline needs a multiple of pp, and
  // probing it at pp and 2 pp would cost half the build (the 405B layout of 64 micro-batches on
  // 16,384 GPUs: 27 s and 4.1 GB for the probe alone): it is probed without interleaving,
  // which has the same compute and collectives per micro-batch and fewer stage-boundary
  // transfers (2 (pp - 1) instead of 2 (v pp - 1) per micro-batch and direction).
  scenario::Scenario base = sc;
  for (;;) {
    scenario::Scenario one = base, two = base;
    one.training.micro_batches = 1;
    two.training.micro_batches = 2;
    GraphSize g1, g2;
    try {
      g1 = graph_size(one);
      g2 = graph_size(two);
    } catch (const schedule::OpLimitExceeded&) {
      throw;  // the probe itself is over the build's limit: so is the graph
    } catch (const std::invalid_argument&) {
      if (base.parallel.virtual_stages > 1) {
        base.parallel.virtual_stages = 1;
        continue;
      }
      // A schedule that needs more micro-batches than the probe: the probe cannot tell; the
      // real build reports its own error.
      return e;
    }
    e.probed = true;
    const double o1 = static_cast<double>(g1.ops), o2 = static_cast<double>(g2.ops);
    const double c1 = static_cast<double>(g1.copied), c2 = static_cast<double>(g2.copied);
    e.ops = o1 + (m - 1) * std::max(0.0, o2 - o1);
    e.copied = std::min(e.ops, c1 + (m - 1) * std::max(0.0, c2 - c1));
    e.bytes = graph_bytes(e.ops, trace, e.copied);
    return e;
  }
}

double graph_bytes(double ops, bool trace, double copied) {
  return kBaseBytes + (ops - copied) * kBytesPerOp + copied * kBytesPerCopiedOp +
         ops * (trace ? kTraceBytesPerOp : 0);
}

double step_time_bytes(double ops, double copied) {
  return kBaseBytes + (ops - copied) * kStepBytesPerOp + copied * kBytesPerCopiedOp * kStepBytesPerOp / kBytesPerOp;
}

double copied_op_weight() { return kBytesPerCopiedOp / kBytesPerOp; }

uint64_t ops_within(double bytes) {
  return static_cast<uint64_t>(std::max(1000.0, (bytes - kBaseBytes) / kStepBytesPerOp));
}

WorkEstimate check_work(const scenario::Scenario& sc, const WorkLimits& limits) {
  const WorkEstimate e = estimate_work(sc, limits.trace);
  if (!e.probed || limits.force) return e;
  const double limit = limits.max_memory_bytes > 0 ? limits.max_memory_bytes : default_max_memory();
  const bool layer = sc.simulation.scope == scenario::Scope::Layer;
  const char* env = std::getenv("CPSIM_MAX_MEMORY");
  const std::string why = limits.max_memory_bytes > 0      ? ""
                          : env != nullptr && *env != '\0' ? " (CPSIM_MAX_MEMORY)"
                                                           : " (half of this machine's memory)";
  if (e.bytes > limit)
    throw WorkLimitError(std::string(layer ? "the layer's" : "the step's") + " task graph would have about " +
                         count(e.ops) + " ops (" + std::to_string(sc.training.micro_batches) +
                         " micro-batches) and need about " + gb(e.bytes) + " of memory, over the limit of " +
                         gb(limit) + why + "; use fewer training.micro_batches, " +
                         (layer ? "" : "simulation.scope: layer, ") +
                         "or raise --max-memory (--force skips this check)");
  return e;
}

}  // namespace cpsim::app
