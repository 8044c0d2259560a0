#pragma once
/// `cpsim plan`'s whole-step runs (stages 4 and 5 of plan_search.hpp) in children under the
/// memory limit, and what their outcomes say about a candidate.
#include <functional>
#include <string>
#include <vector>

#include "app/plan_search.hpp"
#include "app/simulate.hpp"
#include "app/worker_pool.hpp"

namespace cpsim::app::plan {

/// How far over --max-memory the layer probe's graph estimate may be and the layout still
/// simulated: the estimate's worst error measured (+9 %, llama3-8b-128k-4nodes), rounded up. A
/// wider margin cost more than it saved: on the 405B on 16,384 GPUs four ZeRO-3 layouts
/// estimated at 1.19-1.22 x --max-memory spent 240 s of child time building graphs that
/// stopped at the limit.
constexpr double kEstimateMargin = 1.1;

std::string fmt(const char* f, double v);
std::string first_line(const std::string& s);

/// Indices of `key`, the largest first (ties in index order): children started in this order
/// leave the longest one running alone at the end less often.
std::vector<size_t> largest_first(const std::vector<double>& key);

/// Stage 4's analytic steps in long-lived workers (pool::WorkerPool), one after another in
/// each, instead of a fresh child per step: measured on five 405B layouts of 9.5-11.8 GB run
/// in turn, a child each spent 52 s of 199 s in the kernel (faulting the graphs in), one
/// process keeping its heap ~37 s of 175 s.
class StepWorkers {
 public:
  /// `scenario_of(id)`: candidate `id`'s scenario as stage 4 runs it (recomputation and ZeRO
  /// stage set). Workers are forked on the first run() and call it in their copy of this
  /// process: what it reads must not change after that.
  StepWorkers(std::function<scenario::Scenario(size_t)> scenario_of, const Options& opt);
  /// As run_bounded_steps for candidates `ids`: `limits` and `known` as its limits and
  /// known_bytes. A step whose worker stopped at its memory limit or died runs again in a
  /// child of its own (run_bounded_steps), whose answer is the one given: a worker's heap keeps
  /// fragments of its earlier jobs (five 405B layouts in turn: 14.2 GB resident where the
  /// largest alone needed 11.8), and the answer must not depend on which jobs came before.
  std::vector<StepOutcome> run(const std::vector<size_t>& ids, const std::vector<double>& limits,
                               const std::vector<double>& known);

 private:
  std::function<scenario::Scenario(size_t)> scenario_of_;
  int jobs_;
  double limit_;
  pool::WorkerPool pool_;
};

/// Whole steps in children, at most `opt.jobs` at once, sharing the memory limit (the .cpp
/// says how); outcomes in the order of `in`. With `workers` (analytic steps only), candidate
/// ids[k] stands for in[k] and the steps run in its workers.
std::vector<StepOutcome> bounded_steps(const std::vector<scenario::Scenario>& in, const Options& opt,
                                       const std::vector<double>& in_est = {}, StepWorkers* workers = nullptr,
                                       const std::vector<size_t>& ids = {});

/// A step's outcome on its candidate: "too_big" or "failed" with why, or true when it ran.
bool record(const StepOutcome& o, const Options& opt, Candidate& c);

}  // namespace cpsim::app::plan
