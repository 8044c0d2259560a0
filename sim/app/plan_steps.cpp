// `cpsim plan`'s whole-step runs: plan_steps.hpp.
#include "app/text_format.hpp"
#include "app/plan_steps.hpp"

#include <algorithm>
#include <cstdio>

#include "app/work_limit.hpp"

namespace cpsim::app::plan {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::vector<size_t> largest_first(const std::vector<double>& key) {
  std::vector<size_t> order(key.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] > key[b]; });
  return order;
}

/// Whole steps in children, at most `opt.jobs` at once, sharing the memory limit: a run whose
/// memory is estimated (`est_bytes[k]` > 0, the layer probe's, which also spares the child its
/// own probe) holds that much and the estimate's error (kEstimateMargin; holding the estimate
/// alone stopped every 405B child a few ops short, at its op limit, and ran it again alone),
/// one without holds an equal share (limit / jobs); children start
/// while what they hold fits, so a large run goes beside small ones and no two large ones
/// meet. A child stops at what it holds; one stopped below the whole limit runs again alone
/// with all of it. The largest (by the estimate) start first, so that the longest child is not
/// the last one left running (SimGrid on the 405B: 30 s, 35 s and 195 s children, the 195 s one
/// third).
std::vector<StepOutcome> bounded_steps(const std::vector<scenario::Scenario>& in, const Options& opt,
                                       const std::vector<double>& in_est, StepWorkers* workers,
                                       const std::vector<size_t>& ids) {
  std::vector<double> key(in.size(), 0.0);
  std::copy_n(in_est.begin(), std::min(in_est.size(), key.size()), key.begin());
  const std::vector<size_t> order = largest_first(key);
  std::vector<scenario::Scenario> runs;
  std::vector<double> est_bytes;
  std::vector<size_t> run_ids;
  for (size_t k : order) {
    runs.push_back(in[k]);
    est_bytes.push_back(k < in_est.size() ? in_est[k] : 0.0);
    if (workers) run_ids.push_back(ids.at(k));
  }
  const double limit = opt.max_memory_bytes > 0 ? opt.max_memory_bytes : default_max_memory();
  const double total = opt.max_memory_bytes > 0 ? opt.max_memory_bytes : default_plan_memory();
  const int jobs = std::max(1, opt.jobs);
  // The estimate may be high by up to kEstimateMargin: a run estimated a little over the limit
  // still tries with all of it, stopped by its op limit if it is really over.
  std::vector<double> est(runs.size(), 0.0), hold(runs.size(), limit / jobs);
  for (size_t k = 0; k < runs.size() && k < est_bytes.size(); ++k)
    if (est_bytes[k] > 0) {
      est[k] = std::min(est_bytes[k], limit);
      hold[k] = std::min(est_bytes[k] * kEstimateMargin, limit);
    }
  std::vector<StepOutcome> out =
      workers ? workers->run(run_ids, hold, est) : run_bounded_steps(runs, jobs, hold, total, est);
  std::vector<scenario::Scenario> alone;
  std::vector<double> alone_est;
  std::vector<size_t> alone_at, alone_ids;
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k].over_memory && out[k].estimate_bytes <= limit && hold[k] < limit) {
      alone.push_back(runs[k]);
      alone_est.push_back(est[k]);
      alone_at.push_back(k);
      if (workers) alone_ids.push_back(run_ids[k]);
    }
  const std::vector<double> all(alone.size(), limit);
  const std::vector<StepOutcome> again =
      workers ? workers->run(alone_ids, all, alone_est) : run_bounded_steps(alone, 1, all, limit, alone_est);
  for (size_t i = 0; i < alone_at.size(); ++i) out[alone_at[i]] = again[i];
  std::vector<StepOutcome> back(in.size());
  for (size_t i = 0; i < order.size(); ++i) back[order[i]] = out[i];
  return back;
}


std::vector<size_t> verifiable(const std::vector<size_t>& ranked, const std::vector<double>& est_bytes,
                               double limit, int verify, std::vector<Candidate>& all) {
  std::vector<size_t> picked;
  for (size_t k = 0; k < ranked.size() && picked.size() < static_cast<size_t>(std::max(0, verify)); ++k) {
    const double est = est_bytes[ranked[k]];
    if (est * kEstimateMargin > limit) {
      all[ranked[k]].why = fmt("SimGrid not run: its graph would need about %.3g GB", est / 1e9) +
                           fmt(" with the estimate's margin, over the %.3g GB", limit / 1e9) +
                           " of --max-memory";
      continue;
    }
    picked.push_back(k);
  }
  return picked;
}

/// A step's outcome on its candidate: "too_big" or "failed" with why, or true when it ran.
bool record(const StepOutcome& o, const Options& opt, Candidate& c) {
  if (o.over_memory) {
    const double limit = opt.max_memory_bytes > 0 ? opt.max_memory_bytes : default_max_memory();
    c.status = "too_big";
    const std::string whose = opt.max_memory_bytes > 0 ? "" : " (default: half of this machine's memory)";
    c.why = o.error.empty() ? "not simulated: its task graph would need about " +
                                  fmt("%.3g GB", o.estimate_bytes / 1e9) +
                                  fmt(", over --max-memory %.3g GB", limit / 1e9) + whose
                            : "stopped: " + first_line(o.error) +
                                  (opt.max_memory_bytes > 0 ? " (--max-memory)"
                                                            : " (--max-memory, default half of this machine's memory)");
    return false;
  }
  if (o.step_s <= 0) {
    c.status = "failed";
    c.why = "the schedule could not be built or replayed" + (o.error.empty() ? "" : ": " + first_line(o.error));
    return false;
  }
  return true;
}

}  // namespace cpsim::app::plan
