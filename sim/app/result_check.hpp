#pragma once
/// Results are finite or an error: a replay whose ops end at inf, NaN, a negative time or after
/// more than 1e9 simulated seconds (31 years: no training step) is a failure that names the op,
/// never a summary of "inf s" and "-nan %".
#include "schedule/trace.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::app {

constexpr double kMaxSimulatedSeconds = 1e9;

/// Throws std::runtime_error naming the first op (in start order) whose end time is not a
/// finite time in [0, kMaxSimulatedSeconds], with its duration, bytes and rank.
void check_finite(const schedule::TaskGraph& g, const schedule::Trace& tr);

}  // namespace cpsim::app
