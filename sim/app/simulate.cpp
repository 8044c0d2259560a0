#include "app/simulate.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <stdexcept>

#include "app/boundary.hpp"
#include "app/result_check.hpp"
#include "app/work_limit.hpp"
#include "app/progress.hpp"
#include "engine/replay.hpp"
#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "model/memory.hpp"
#include "model/transformer.hpp"
#include "schedule/plan.hpp"

namespace cpsim::app {

namespace {

engine::ReplayOptions replay_options(const scenario::Scenario& sc) {
  engine::ReplayOptions ro;
  ro.interference = sc.perturb.interference >= 0 ? sc.perturb.interference
                                                 : sc.platform.compute_interference;
  return ro;
}

/// Builds and replays `sc` in this process (which then holds SimGrid's one engine); returns
/// the step time. For child processes.
double step_time(const scenario::Scenario& sc) {
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::make(sc.cost, sc.platform.gpu);
  const schedule::Plan p = schedule::plan(sc, topo, *cost);
  const schedule::Trace tr = engine::replay(p.graph, topo, sc.simulation.engine, replay_options(sc));
  check_finite(p.graph, tr);
  return tr.makespan_s;
}

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

struct Child {
  size_t job;
  pid_t pid;
  int fd;
};

/// Starts job `i` in a forked child that writes back "ok <value bytes>" or "error <message>".
Child start_child(const std::function<double()>& job, size_t i) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    int code = 0;
    try {
      const double v = job();
      out = "ok ";
      out.append(reinterpret_cast<const char*>(&v), sizeof v);
    } catch (const std::exception& e) {
      out = std::string("error ") + e.what();
      code = 1;
    }
    // _exit: the child must not run the parent's atexit handlers or flush its stdio buffers.
    ::_exit(write_all(fds[1], out) ? code : 3);
  }
  ::close(fds[1]);
  return {i, pid, fds[0]};
}

/// Reads the child's answer and reaps it. Results are small, so a child never blocks on a
/// full pipe while the parent waits for an older one.
double finish_child(const Child& c) {
  std::string buf;
  char chunk[4096];
  for (;;) {
    const ssize_t r = ::read(c.fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    buf.append(chunk, static_cast<size_t>(r));
  }
  ::close(c.fd);
  int status = 0;
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string who = "child run " + std::to_string(c.job + 1);
  if (WIFSIGNALED(status))
    throw std::runtime_error(who + " killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                             strsignal(WTERMSIG(status)) + ")");
  if (buf.rfind("ok ", 0) == 0 && buf.size() == 3 + sizeof(double)) {
    double v;
    std::memcpy(&v, buf.data() + 3, sizeof v);
    return v;
  }
  if (buf.rfind("error ", 0) == 0) throw std::runtime_error(who + ": " + buf.substr(6));
  throw std::runtime_error(who + " exited without a result");
}

/// Runs each job in its own forked child, at most `parallel` at once; values in job order.
std::vector<double> run_in_children(const std::vector<std::function<double()>>& jobs, int parallel) {
  std::vector<double> out(jobs.size(), 0.0);
  std::deque<Child> running;
  size_t next = 0;
  std::string error;
  while (next < jobs.size() || !running.empty()) {
    while (error.empty() && next < jobs.size() &&
           running.size() < static_cast<size_t>(std::max(1, parallel))) {
      running.push_back(start_child(jobs[next], next));
      ++next;
    }
    if (running.empty()) break;
    const Child c = running.front();
    running.pop_front();
    try {
      out[c.job] = finish_child(c);
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();  // let the running ones finish, start no more
    }
  }
  if (!error.empty()) throw std::runtime_error(error);
  return out;
}

/// The straggler what-if: for each candidate rank (static factor > 1: the most slowed ranks,
/// and the critical path's straggler), the step with that rank made neutral (perturb.neutral_rank:
/// no slowdown, variation or jitter; the other ranks' draws are untouched).
report::StragglerWhatIf straggler_what_if(const scenario::Scenario& priced, const report::Result& r,
                                          const std::vector<double>& rank_factor,
                                          const SimulateOptions& opt) {
  report::StragglerWhatIf w;
  w.step_with_s = r.step_time_s;
  w.step_without_s = r.step_time_s;
  w.removed = "the rank's slowdown (slow_gpus, slow_nodes), static variation and jitter";
  std::vector<std::pair<double, int>> slowed;  // (factor, rank) of ranks that compute
  for (const auto& m : r.ranks)
    if (m.compute_s > 0 && rank_factor[static_cast<size_t>(m.rank)] > 1)
      slowed.push_back({rank_factor[static_cast<size_t>(m.rank)], m.rank});
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

  std::vector<std::function<double()>> jobs;
  for (int k : cand) {
    scenario::Scenario s = priced;
    s.perturb.neutral_rank = k;
    jobs.push_back([s] { return step_time(s); });
  }
  const std::vector<double> steps = run_in_children(jobs, opt.jobs);
  double best = -1;
  for (size_t i = 0; i < cand.size(); ++i) {
    const double factor = rank_factor[static_cast<size_t>(cand[i])];
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

report::Samples run_samples(const scenario::Scenario& sc, const SimulateOptions& opt) {
  report::Samples sm;
  std::vector<std::function<double()>> jobs;
  for (int i = 0; i < opt.samples; ++i) {
    scenario::Scenario s = sc;
    s.simulation.seed = sc.simulation.seed + static_cast<uint64_t>(i);
    sm.seeds.push_back(s.simulation.seed);
    jobs.push_back([s] { return step_time(s); });
  }
  sm.step_time_s = run_in_children(jobs, opt.jobs);
  report::sample_stats(sm);
  return sm;
}

}  // namespace

SimulateOutput simulate(const scenario::Scenario& sc, const SimulateOptions& opt) {
  Progress progress(opt.progress);
  progress.phase("build graph");
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::make(sc.cost, sc.platform.gpu);
  set_phase("building the task graph of " + sc.name);
  const schedule::Plan p = schedule::plan(sc, topo, *cost);
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
  const bool children = what_if || opt.samples > 0;
  const schedule::Trace tr = children ? engine::replay_in_child(p.graph, topo, sc.simulation.engine, ro)
                                      : engine::replay(p.graph, topo, sc.simulation.engine, ro);
  check_finite(p.graph, tr);
  progress.phase("report");
  set_phase("reporting " + sc.name);
  report::Result r = report::analyze(p, tr, topo, model::peak_rank_memory(sc));
  if (what_if) {
    progress.phase("straggler what-if (child replays)");
    r.straggler = straggler_what_if(p.scenario, r, p.rank_factor, opt);
  }
  if (opt.samples > 0) {
    progress.phase("samples: " + std::to_string(opt.samples) + " seeds (child replays)");
    r.samples = run_samples(sc, opt);
  }
  progress.phase("write outputs");
  SimulateOutput out;
  out.result = report::result_json(r, sc, p.graph);
  out.result["cost_model"] = cost->describe();
  out.summary = report::summary_table(r, sc);
  if (!opt.json_path.empty()) report::write_atomic(opt.json_path, out.result.dump(2) + "\n");
  if (!opt.trace_path.empty())
    report::write_atomic(opt.trace_path, [&](std::ostream& os) {
      report::write_chrome_trace(os, p.graph, tr, r.critical_path.ops, opt.trace_filter);
      os << "\n";
    });
  progress.finish();
  return out;
}

void validate_for_run(const scenario::Scenario& sc) {
  check_work(sc, {});
  graph_ops(sc);
}

size_t graph_ops(const scenario::Scenario& sc) {
  const model::Topology topo(sc.platform, sc.perturb);
  const auto cost = model::CostModel::make(sc.cost, sc.platform.gpu);
  return schedule::plan(sc, topo, *cost).graph.ops().size();
}

double simulate_step_time(const scenario::Scenario& sc) { return step_time(sc); }

std::vector<double> run_step_times(const std::vector<scenario::Scenario>& scs, int jobs) {
  std::vector<std::function<double()>> fns;
  for (const auto& s : scs)
    fns.push_back([s] {
      try {
        return step_time(s);
      } catch (const std::exception&) {
        return -1.0;  // the caller reports the configuration as invalid, not the whole batch
      }
    });
  return run_in_children(fns, jobs);
}

std::vector<int> parse_index_list(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string part = s.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    try {
      if (dash == std::string::npos) {
        out.push_back(std::stoi(part));
      } else {
        const int a = std::stoi(part.substr(0, dash)), b = std::stoi(part.substr(dash + 1));
        if (b < a || b - a > 1000000) throw std::invalid_argument("range");
        for (int i = a; i <= b; ++i) out.push_back(i);
      }
    } catch (const std::exception&) {
      throw std::invalid_argument("expected a list like 0-3,7; got '" + s + "'");
    }
    pos = comma + 1;
  }
  return out;
}

}  // namespace cpsim::app
