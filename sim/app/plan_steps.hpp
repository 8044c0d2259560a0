#pragma once
/// `cpsim plan`'s whole-step runs (stages 4 and 5 of plan_search.hpp) in children under the
/// memory limit, and what their outcomes say about a candidate.
#include <string>
#include <vector>

#include "app/text_format.hpp"
#include "app/plan_search.hpp"
#include "app/simulate.hpp"

namespace cpsim::app::plan {

/// How far over --max-memory the layer probe's graph estimate may be and the layout still
/// simulated: the estimate's worst error measured (+9 %, llama3-8b-128k-4nodes), rounded up. A
/// wider margin cost more than it saved: on the 405B on 16,384 GPUs four ZeRO-3 layouts
/// estimated at 1.19-1.22 x --max-memory spent 240 s of child time building graphs that
/// stopped at the limit.
constexpr double kEstimateMargin = 1.1;

std::string first_line(const std::string& s);

/// Indices of `key`, the largest first (ties in index order): children started in this order
/// leave the longest one running alone at the end less often.
std::vector<size_t> largest_first(const std::vector<double>& key);

/// Whole steps in children, at most `opt.jobs` at once, sharing the memory limit (the .cpp
/// says how); outcomes in the order of `in`. With `workers` (analytic steps only: stage 4),
/// candidate ids[k] stands for in[k] and the steps run in its long-lived workers.
std::vector<StepOutcome> bounded_steps(const std::vector<scenario::Scenario>& in, const Options& opt,
                                       const std::vector<double>& in_est = {}, StepWorkers* workers = nullptr,
                                       const std::vector<size_t>& ids = {});

/// Stage 5's picks: positions in `ranked` (best first) of the first `verify` layouts whose
/// SimGrid graph, estimated at est_bytes[i] (0: unknown, tried), fits `limit` with the
/// estimate's margin. A lean analytic graph may fit where SimGrid's full one does not
/// (schedule/lean_lanes.cpp, replicas.hpp tp_mirror): such a layout says why and the next best
/// is verified in its place (the 405B on 16,384 GPUs: the three best, ZeRO-3 at pp 4, need
/// 69.8 M ops in full; their children stopped at the 66.3 M of --max-memory, after 58 s of
/// building, and nothing was verified).
std::vector<size_t> verifiable(const std::vector<size_t>& ranked, const std::vector<double>& est_bytes,
                               double limit, int verify, std::vector<Candidate>& all);

/// A step's outcome on its candidate: "too_big" or "failed" with why, or true when it ran.
bool record(const StepOutcome& o, const Options& opt, Candidate& c);

}  // namespace cpsim::app::plan
