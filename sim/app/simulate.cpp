#include "app/simulate.hpp"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "app/boundary.hpp"
#include "app/child_replay.hpp"
#include "app/process_pool.hpp"
#include "app/result_check.hpp"
#include "app/work_limit.hpp"
#include "app/progress.hpp"
#include "engine/replay.hpp"
#include "log/log.hpp"
#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "model/memory.hpp"
#include "model/transformer.hpp"
#include "scenario/perturb_items.hpp"
#include "schedule/plan.hpp"
#include "support/threads.hpp"

namespace cpsim::app {

namespace {

engine::ReplayOptions replay_options(const scenario::Scenario& sc) {
  engine::ReplayOptions ro;
  ro.interference = sc.perturb.interference >= 0 ? sc.perturb.interference
                                                 : sc.platform.compute_interference;
  return ro;
}

/// Builds and replays `sc` in this process (which then holds SimGrid's one engine); returns
/// the step time. For child processes. `lean`: build the analytic engine's lean graph.
double step_time(const scenario::Scenario& in, bool lean = true) {
  // The analytic step time alone: a lean graph (schedule/lean_lanes.cpp) gives the same.
  scenario::Scenario sc = in;
  sc.simulation.lean_collectives = lean && sc.simulation.engine == scenario::EngineKind::Analytic;
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::make(sc.cost, sc.platform.gpu);
  const schedule::Plan p = schedule::plan(sc, topo, *cost);
  // The makespan alone (16 bytes per op less); an analytic replay that is not finite runs
  // again with its times, so the error names the op (SimGrid's engine runs once a process).
  engine::ReplayOptions ro = replay_options(sc);
  ro.keep_times = false;
  const schedule::Trace tr = engine::replay(p.graph, topo, sc.simulation.engine, ro);
  try {
    check_finite(p.graph, tr);
  } catch (const std::exception&) {
    if (sc.simulation.engine != scenario::EngineKind::Analytic) throw;
    ro.keep_times = true;
    check_finite(p.graph, engine::replay(p.graph, topo, sc.simulation.engine, ro));
    throw;
  }
  return tr.makespan_s;
}

std::string double_bytes(double v) { return std::string(reinterpret_cast<const char*>(&v), sizeof v); }

double bytes_double(const std::string& b) {
  if (b.size() != sizeof(double)) throw std::runtime_error("child replay: truncated result");
  double v;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

/// Runs each job in its own child process (app/process_pool), at most `parallel` at once;
/// values in job order.
std::vector<double> run_in_children(const std::vector<std::function<double()>>& jobs, int parallel) {
  std::vector<std::function<std::string()>> fns;
  for (const auto& job : jobs)
    fns.push_back([&job] { return double_bytes(job()); });
  std::vector<double> out;
  for (const std::string& b : pool::run_in_children(fns, parallel)) out.push_back(bytes_double(b));
  return out;
}

/// The step time of `p`'s graph replayed with `noise` (in this process: a child's body).
/// Only the makespan is kept: 16 bytes per op less than a trace.
double noisy_step(const schedule::Plan& p, const model::Topology& topo, const schedule::ComputeNoise& noise) {
  engine::ReplayOptions ro = replay_options(p.scenario);
  ro.noise = &noise;
  ro.keep_times = false;
  const schedule::Trace tr = engine::replay(p.graph, topo, p.scenario.simulation.engine, ro);
  check_finite(p.graph, tr);
  return tr.makespan_s;
}

/// The step time of `p`'s graph replayed once per noise, each in a child process (SimGrid's one
/// engine per process). The children read the parent's graph through copy-on-write pages
/// instead of building their own, so the machine holds one graph however many samples or
/// what-ifs run (the 405B 16,384-GPU full replay's graph is ~15 GB).
std::vector<double> replay_with_noise(const schedule::Plan& p, const model::Topology& topo,
                                      const std::vector<schedule::ComputeNoise>& noises, int jobs) {
  std::vector<std::function<double()>> fns;
  for (const auto& n : noises) fns.push_back([&p, &topo, &n] { return noisy_step(p, topo, n); });
  return run_in_children(fns, jobs);
}

/// The straggler what-if: for each candidate rank (static factor > 1: the most slowed ranks,
/// and the critical path's straggler), the step with that rank made neutral (no slowdown,
/// variation or jitter; the other ranks' draws are untouched), on the same graph.
report::StragglerWhatIf straggler_what_if(const schedule::Plan& p, const model::Topology& topo,
                                          const report::Result& r, const SimulateOptions& opt) {
  const schedule::ComputeNoise& noise = p.graph.noise();
  report::StragglerWhatIf w;
  w.step_with_s = r.step_time_s;
  w.step_without_s = r.step_time_s;
  w.removed = "the rank's slowdown (slow_gpus, slow_nodes), static variation and jitter";
  std::vector<std::pair<double, int>> slowed;  // (factor, rank) of ranks that compute
  for (const auto& m : r.ranks)
    if (m.compute_s > 0 && noise.rank_factor(m.rank) > 1) slowed.push_back({noise.rank_factor(m.rank), m.rank});
  std::sort(slowed.begin(), slowed.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<int> cand;
  for (const auto& [f, k] : slowed)
    if (static_cast<int>(cand.size()) < std::max(1, opt.what_if_candidates)) cand.push_back(k);
  const int cp = r.straggler_rank;
  if (cp >= 0 && std::find(cand.begin(), cand.end(), cp) == cand.end() &&
      std::any_of(slowed.begin(), slowed.end(), [&](const auto& s) { return s.second == cp; }))
    cand.push_back(cp);
  if (cand.empty()) return w;

  std::vector<schedule::ComputeNoise> noises;
  for (int k : cand) noises.push_back(noise.with_neutral(k));
  const std::vector<double> steps = replay_with_noise(p, topo, noises, opt.jobs);
  double best = -1;
  for (size_t i = 0; i < cand.size(); ++i) {
    const double factor = noise.rank_factor(cand[i]);
    w.tried.push_back({cand[i], factor, steps[i]});
    if (r.step_time_s - steps[i] > best) {
      best = r.step_time_s - steps[i];
      w.rank = cand[i];
      w.factor = factor;
      w.step_without_s = steps[i];
      w.shrink_s = best;
    }
  }
  return w;
}

/// The perturbation what-if: the step without each of the scenario's perturbations
/// (scenario::perturb_items, the first opt.what_if_perturbations of them), then without all.
/// A fault of the fleet's compute (a slow GPU or node, variation, jitter) is priced on the same
/// graph replayed with the noise left without it, as the straggler what-if does; a network
/// fault (a link, a rail) changes routes and the collectives' tuning, so the step is built
/// again without it. Each in a child process; one that fails is reported, not fatal.
report::PerturbWhatIf perturb_what_if(const scenario::Scenario& sc, const schedule::Plan& p,
                                      const model::Topology& topo, const report::Result& r,
                                      const SimulateOptions& opt) {
  report::PerturbWhatIf w;
  w.step_with_s = r.step_time_s;
  std::vector<scenario::PerturbItem> items = scenario::perturb_items(sc.perturb);
  w.perturbations = static_cast<int>(items.size());
  if (items.empty() || opt.what_if_perturbations <= 0) return w;
  const bool all = items.size() > 1;
  const scenario::PerturbItem everything{"all", "all " + std::to_string(items.size()) + " removed together", 0,
                                         std::any_of(items.begin(), items.end(),
                                                     [](const auto& i) { return i.network; }),
                                         scenario::without_all(sc.perturb)};
  if (items.size() > static_cast<size_t>(opt.what_if_perturbations))
    items.resize(static_cast<size_t>(opt.what_if_perturbations));
  if (all) items.push_back(everything);
  // Built again without jitter's op-keyed draws only if a lean graph numbers the ops as the
  // main run's graph does: with jitter the full graph keeps every other op's draw.
  const bool lean = sc.perturb.jitter_cv == 0;
  std::vector<schedule::ComputeNoise> noises(items.size());
  std::vector<scenario::Scenario> rebuilt(items.size(), sc);
  std::vector<std::function<std::string()>> jobs;
  for (size_t i = 0; i < items.size(); ++i) {
    rebuilt[i].perturb = items[i].without;
    if (items[i].network) {
      jobs.push_back([&s = rebuilt[i], lean] { return double_bytes(step_time(s, lean)); });
    } else {
      noises[i] = schedule::ComputeNoise(schedule::priced_scenario(rebuilt[i]), topo.gpus());
      jobs.push_back([&p, &topo, &n = noises[i]] { return double_bytes(noisy_step(p, topo, n)); });
    }
  }
  const std::vector<pool::ChildOutcome> done = pool::run_each_in_children(jobs, opt.jobs);
  for (size_t i = 0; i < items.size(); ++i) {
    report::PerturbWhatIf::Try t{items[i].kind, items[i].label, -1, done[i].error};
    if (done[i].ok) {
      try {
        t.step_without_s = bytes_double(done[i].value);
      } catch (const std::exception& e) {
        t.error = e.what();
      }
    }
    (all && i + 1 == items.size() ? w.all.emplace() : w.tried.emplace_back()) = t;
  }
  return w;
}

/// Whether the graph itself depends on simulation.seed, not only its noise: seeded MoE routing
/// sets the experts' token counts, hence the ops' nominal times.
bool graph_depends_on_seed(const scenario::Scenario& sc) {
  return sc.model.moe.experts > 0 && sc.model.moe.router_skew > 0;
}

/// The scenarios of seeds seed, seed + 1, ..., seed + K - 1 (K = opt.samples): the plan's
/// scenario, or the input's when the seed shapes the graph (it is rebuilt per seed).
std::vector<scenario::Scenario> seeded_scenarios(const scenario::Scenario& sc, const schedule::Plan& p, int samples) {
  std::vector<scenario::Scenario> seeded;
  for (int i = 0; i < samples; ++i) {
    seeded.push_back(graph_depends_on_seed(sc) ? sc : p.scenario);
    seeded.back().simulation.seed = sc.simulation.seed + static_cast<uint64_t>(i);
  }
  return seeded;
}

/// The fleet noise of each sample after the first (whose graph is the main run's).
std::vector<schedule::ComputeNoise> sample_noises(const std::vector<scenario::Scenario>& seeded,
                                                  const model::Topology& topo) {
  std::vector<schedule::ComputeNoise> noises;
  for (size_t i = 1; i < seeded.size(); ++i) noises.emplace_back(seeded[i], topo.gpus());
  return noises;
}

/// Step times for seeds seed, seed + 1, ...: the same graph replayed with each seed's noise
/// (static variation and jitter), or, when the seed shapes the graph, a graph built per seed.
/// The first seed is the main run's: its step is `main_step_s`, not replayed again. `done`:
/// the other seeds' steps when they were replayed already (beside the main run).
report::Samples run_samples(const scenario::Scenario& sc, const schedule::Plan& p,
                            const model::Topology& topo, const SimulateOptions& opt, double main_step_s,
                            const std::vector<double>& done) {
  report::Samples sm;
  const std::vector<scenario::Scenario> seeded = seeded_scenarios(sc, p, opt.samples);
  for (const auto& s : seeded) sm.seeds.push_back(s.simulation.seed);
  if (graph_depends_on_seed(sc)) {
    std::vector<std::function<double()>> jobs;
    for (const auto& s : seeded) jobs.push_back([&s] { return step_time(s); });
    sm.step_time_s = run_in_children(jobs, opt.jobs);
  } else {
    sm.step_time_s = {main_step_s};
    const std::vector<double> rest =
        !done.empty() ? done : replay_with_noise(p, topo, sample_noises(seeded, topo), opt.jobs);
    sm.step_time_s.insert(sm.step_time_s.end(), rest.begin(), rest.end());
  }
  report::sample_stats(sm);
  return sm;
}

/// The main replay and the other samples' replays side by side, at most opt.jobs at once, each
/// in a child process: with as many jobs as samples the samples cost no wall time of their own
/// (before, they waited for the main replay and its report). Returns the main run's trace and
/// the other seeds' steps in seed order.
std::pair<schedule::Trace, std::vector<double>> replay_with_samples(const scenario::Scenario& sc,
                                                                    const schedule::Plan& p,
                                                                    const model::Topology& topo,
                                                                    const engine::ReplayOptions& ro,
                                                                    const SimulateOptions& opt) {
  const std::vector<schedule::ComputeNoise> noises = sample_noises(seeded_scenarios(sc, p, opt.samples), topo);
  std::vector<std::function<std::string()>> fns;
  fns.push_back([&] { return encode_trace(engine::replay(p.graph, topo, sc.simulation.engine, ro)); });
  for (const auto& n : noises) fns.push_back([&p, &topo, &n] { return double_bytes(noisy_step(p, topo, n)); });
  const std::vector<std::string> out = pool::run_in_children(fns, opt.jobs);
  std::vector<double> steps;
  for (size_t i = 1; i < out.size(); ++i) steps.push_back(bytes_double(out[i]));
  return {decode_trace(out[0]), steps};
}

}  // namespace

SimulateOutput simulate(const scenario::Scenario& sc, const SimulateOptions& opt) {
  Progress progress(opt.progress);
  progress.phase("build graph");
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::make(sc.cost, sc.platform.gpu);
  log::debug("cost model: " + cost->describe());
  set_phase("building the task graph of " + sc.name);
  schedule::Plan p = schedule::plan(sc, topo, *cost);
  if (log::enabled(log::Level::Info))
    log::info("graph: " + std::to_string(p.graph.ops().size()) + " ops on " + std::to_string(p.info.ranks) +
              " GPUs (" + std::to_string(p.extrapolated_ops) + " priced outside their profile); replay: " +
              (sc.simulation.engine == scenario::EngineKind::Analytic ? "analytic engine (no link contention)"
                                                                      : "SimGrid (flows share links)"));
  // What the build freed and left resident (the edge lists finalize turned into CSR) goes back
  // to the kernel instead of staying in the replay's peak: ~30 MB on the 70B full replay
  // (peak 955 -> 935 MB; mallinfo2 counted 160 MB free in the heap there).
  malloc_trim(0);
  progress.phase("replay");
  set_phase("replaying " + std::to_string(p.graph.ops().size()) + " ops of " + sc.name);
  engine::ReplayOptions ro = replay_options(sc);
  // In a child replay the callback draws from the child (same terminal, same line).
  ro.progress = [&progress](double sim_s, size_t done, size_t total) {
    progress.replay(sim_s, done, total);
  };
  // With child runs to come, this process must not hold SimGrid's one engine: replay in a
  // child too (the trace comes back whole).
  const bool what_if = opt.what_if_straggler.value_or(sc.perturb.any());
  const bool perturb_what = opt.what_if_perturbations > 0 && sc.perturb.any();
  const bool children = what_if || perturb_what || opt.samples > 0;
  // Samples of the same graph need nothing from the main run: with jobs to spare they replay
  // beside it.
  const bool together = opt.samples > 1 && opt.jobs > 1 && !graph_depends_on_seed(sc);
  std::vector<double> sampled;
  schedule::Trace tr;
  if (together) {
    progress.phase("replay, and " + std::to_string(opt.samples - 1) + " more seeds beside it (child replays)");
    std::tie(tr, sampled) = replay_with_samples(sc, p, topo, ro, opt);
  } else if (children) {
    tr = replay_in_child(p.graph, topo, sc.simulation.engine, ro);
  }
  // Replayed here (no child processes to start, so another thread may run meanwhile): the report's part
  // that reads the graph alone is built on the core the replay leaves idle.
  std::optional<report::GraphPart> part;
  if (!together && !children)
    support::on_threads(support::threads_for(0, p.graph.size()) > 1 ? 2 : 1, [&](unsigned w) {
      if (w == 0)
        tr = engine::replay(p.graph, topo, sc.simulation.engine, ro);
      else
        part.emplace(p.graph, topo);
    });
  check_finite(p.graph, tr);
  progress.phase("report");
  set_phase("reporting " + sc.name);
  report::Result r = part ? report::analyze(p, tr, model::simulated_memory(sc), std::move(*part))
                          : report::analyze(p, tr, topo, model::simulated_memory(sc));
  if (!opt.trace_path.empty())
    report::write_atomic(opt.trace_path, [&](std::ostream& os) {
      report::write_chrome_trace(os, p.graph, tr, r.critical_path.ops, opt.trace_filter);
      os << "\n";
    });
  if (opt.trace_stream) report::write_chrome_trace(*opt.trace_stream, p.graph, tr, r.critical_path.ops, opt.trace_filter);
  if (children) {
    // The children replay this graph (copy-on-write): free the trace, which they do not read
    // (16 B per op; 1.5 GB on the 16,384-GPU full replay).
    tr = schedule::Trace();
    malloc_trim(0);
  }
  if (what_if) {
    progress.phase("straggler what-if (child replays of the same graph)");
    r.straggler = straggler_what_if(p, topo, r, opt);
  }
  if (perturb_what) {
    progress.phase("perturbation what-if (each fault removed, child replays)");
    r.perturbations = perturb_what_if(sc, p, topo, r, opt);
  }
  if (opt.samples > 0) {
    if (!together) progress.phase("samples: " + std::to_string(opt.samples) + " seeds (child replays)");
    r.samples = run_samples(sc, p, topo, opt, r.step_time_s, sampled);
  }
  progress.phase("write outputs");
  SimulateOutput out;
  out.result = report::result_json(r, sc);
  out.result["cost_model"] = cost->describe();
  out.summary = report::summary_table(r, sc);
  if (!opt.json_path.empty()) report::write_atomic(opt.json_path, out.result.dump(2) + "\n");
  progress.finish();
  return out;
}

void validate_for_run(const scenario::Scenario& sc) {
  check_work(sc, {});
  graph_ops(sc);
}

GraphSize graph_size(const scenario::Scenario& sc) {
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::make(sc.cost, sc.platform.gpu);
  const schedule::Plan p = schedule::plan(sc, topo, *cost);
  return {p.graph.size(), p.graph.size() - p.graph.stored_ops()};
}

size_t graph_ops(const scenario::Scenario& sc) { return graph_size(sc).ops; }

double simulate_step_time(const scenario::Scenario& sc) { return step_time(sc); }

std::vector<double> run_step_times(const std::vector<scenario::Scenario>& scs, int jobs) {
  std::vector<double> out;
  for (const StepOutcome& o : run_bounded_steps(scs, jobs, {}, 0)) out.push_back(o.step_s);
  return out;
}

std::string bounded_step_bytes(const scenario::Scenario& s, double limit_bytes, double known_bytes) {
  // Probed beyond 2 micro-batches (the probe builds 1 and 2): a search's children stay inside
  // their share however many micro-batches a layout has, for ~3/m of its build time.
  constexpr int kProbeAbove = 2;
  // step time (-2: estimate over the limit, -3: build stopped), estimate, wall seconds, start
  // (steady clock: the same across the processes of this machine)
  double v[4] = {-1, 0, 0, 0};
  const auto t0 = std::chrono::steady_clock::now();
  v[3] = std::chrono::duration<double>(t0.time_since_epoch()).count();
  scenario::Scenario b = s;
  try {
    if (limit_bytes > 0) {
      // The build stops at the ops its share holds (seconds), before the watchdog would.
      // A step time alone (step_time: no per-op times, no report) needs less per op than a
      // full replay, on either engine: measured on the 405B at 16,384 GPUs, analytic 189-196
      // B/op, SimGrid 165 (tp 2 cp 8 pp 16 USP, 2.79 GB) and 166 (tp 2 cp 16 pp 8, 4.53 GB).
      b.simulation.max_ops = ops_within(limit_bytes);
      b.simulation.copied_op_weight = copied_op_weight();
      if (known_bytes > 0) {
        v[1] = known_bytes;
      } else {
        const WorkEstimate e = estimate_work(b, false, kProbeAbove);
        v[1] = e.probed ? step_time_bytes(e.ops, e.copied) : 0;
      }
      if (v[1] > limit_bytes) v[0] = -2;
    }
    if (v[0] != -2) v[0] = step_time(b);
  } catch (const schedule::OpLimitExceeded&) {
    v[0] = -3;
    v[1] = static_cast<double>(b.simulation.max_ops);
  }
  v[2] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::string(reinterpret_cast<const char*>(v), sizeof v);
}

StepOutcome step_outcome(const pool::ChildOutcome& c, double limit_bytes) {
  StepOutcome o;
  o.over_memory = c.over_memory;
  if (!c.ok || c.value.size() != 4 * sizeof(double)) {
    o.error = c.ok ? "child run: truncated result" : c.error;
    return o;
  }
  double v[4];
  std::memcpy(v, c.value.data(), sizeof v);
  o.wall_s = v[2];
  o.start_s = v[3];
  if (v[0] == -3) {
    o.over_memory = true;
    char buf[200];
    std::snprintf(buf, sizeof buf, "its task graph passed %.3g M ops while being built, over the %.3g GB it may use",
                  v[1] / 1e6, limit_bytes / 1e9);
    o.error = buf;
    return o;
  }
  o.estimate_bytes = v[1];
  if (v[0] == -2) o.over_memory = true;
  else o.step_s = v[0];
  return o;
}

std::vector<double> step_watch_limits(const std::vector<double>& limits, size_t n) {
  // A child starts with this process's resident pages counted in its own (shared, not new
  // memory): its watchdog allows them on top of its limit.
  const double parent = limits.empty() ? 0 : pool::resident_bytes();
  std::vector<double> watch(n, 0.0);
  for (size_t k = 0; k < n && k < limits.size(); ++k)
    if (limits[k] > 0) watch[k] = limits[k] + parent;
  return watch;
}

namespace {

/// A worker's request: which scenario, its op limit's bytes, the caller's estimate.
struct StepRequest {
  uint64_t id;
  double limit_bytes, known_bytes;
};

}  // namespace

StepWorkers::StepWorkers(std::function<scenario::Scenario(size_t)> scenario_of, int jobs, double limit_bytes)
    : scenario_of_(std::move(scenario_of)),
      jobs_(std::max(1, jobs)),
      limit_(limit_bytes),
      pool_(
          [this](const std::string& req) {
            StepRequest r{};
            if (req.size() != sizeof r) throw std::logic_error("step worker: malformed request");
            std::memcpy(&r, req.data(), sizeof r);
            const scenario::Scenario s = scenario_of_(static_cast<size_t>(r.id));
            if (s.simulation.engine != scenario::EngineKind::Analytic)
              throw std::logic_error("step worker: a SimGrid run needs a process of its own");
            return bounded_step_bytes(s, r.limit_bytes, r.known_bytes);
          },
          jobs_,
          // As run_bounded_steps: the limit, and each child's share of this process's pages.
          limit_bytes > 0 ? limit_bytes + jobs_ * pool::resident_bytes() : 0) {}

std::vector<StepOutcome> StepWorkers::run(const std::vector<size_t>& ids, const std::vector<double>& limits,
                                          const std::vector<double>& known) {
  auto limit_of = [&](size_t k) { return k < limits.size() ? limits[k] : 0.0; };
  std::vector<std::string> requests;
  for (size_t k = 0; k < ids.size(); ++k) {
    const StepRequest r{ids[k], limit_of(k), k < known.size() ? known[k] : 0.0};
    requests.emplace_back(reinterpret_cast<const char*>(&r), sizeof r);
  }
  const auto each = pool_.run(requests, step_watch_limits(limits, ids.size()));
  std::vector<StepOutcome> out;
  std::vector<scenario::Scenario> again;
  std::vector<double> again_limits, again_known;
  std::vector<size_t> again_at;
  for (size_t k = 0; k < each.size(); ++k) {
    out.push_back(step_outcome(each[k], limit_of(k)));
    if (!each[k].lost) continue;
    again.push_back(scenario_of_(ids[k]));
    again_limits.push_back(limit_of(k));
    again_known.push_back(k < known.size() ? known[k] : 0.0);
    again_at.push_back(k);
  }
  if (again.empty()) return out;
  const std::vector<StepOutcome> fresh = run_bounded_steps(again, jobs_, again_limits, limit_, again_known);
  for (size_t i = 0; i < again_at.size(); ++i) out[again_at[i]] = fresh[i];
  return out;
}

std::vector<double> run_analytic_step_times(const std::vector<scenario::Scenario>& scs, int jobs) {
  StepWorkers workers([&scs](size_t k) { return scs.at(k); }, jobs, 0);
  std::vector<size_t> ids(scs.size());
  for (size_t k = 0; k < ids.size(); ++k) ids[k] = k;
  std::vector<double> out;
  for (const StepOutcome& o : workers.run(ids, {}, {})) out.push_back(o.step_s);
  return out;
}

std::vector<StepOutcome> run_bounded_steps(const std::vector<scenario::Scenario>& scs, int jobs,
                                           const std::vector<double>& limits, double total_bytes,
                                           const std::vector<double>& known_bytes) {
  std::vector<std::function<std::string()>> fns;
  for (size_t k = 0; k < scs.size(); ++k)
    fns.push_back([&s = scs[k], limit_bytes = k < limits.size() ? limits[k] : 0.0,
                   known = k < known_bytes.size() ? known_bytes[k] : 0.0] {
      return bounded_step_bytes(s, limit_bytes, known);
    });
  // The probe is an estimate, and it builds graphs itself: the watchdog bounds what it misses.
  const double parent = limits.empty() ? 0 : pool::resident_bytes();
  const std::vector<double> watch = step_watch_limits(limits, scs.size());
  const auto each = pool::run_each_in_children(fns, jobs, watch, total_bytes > 0 ? total_bytes + jobs * parent : 0);
  std::vector<StepOutcome> out;
  for (size_t k = 0; k < each.size(); ++k) out.push_back(step_outcome(each[k], k < limits.size() ? limits[k] : 0.0));
  return out;
}

}  // namespace cpsim::app
