#include "app/result_check.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace cpsim::app {

namespace {
bool sane(double t) { return std::isfinite(t) && t >= 0 && t <= kMaxSimulatedSeconds; }
}  // namespace

void check_finite(const schedule::TaskGraph& g, const schedule::Trace& tr) {
  // A replay that kept no times (ReplayOptions::keep_times off) has its makespan only.
  const bool kept = !tr.end_s.empty() || g.size() == 0;
  if (sane(tr.makespan_s) && (!kept || tr.end_s.size() == g.ops().size())) {
    bool all = true;
    for (double t : tr.end_s) all = all && sane(t);
    if (all) return;
  }
  // The culprit: an op that started at a sane time and ended at an insane one (its own cost is
  // the problem, not a predecessor's).
  size_t bad = g.ops().size();
  for (size_t i = 0; i < tr.end_s.size() && i < g.ops().size(); ++i)
    if (!sane(tr.end_s[i]) && (i >= tr.start_s.size() || sane(tr.start_s[i])) &&
        (bad == g.ops().size() || tr.start_s[i] < tr.start_s[bad]))
      bad = i;
  char buf[160];
  if (bad == g.ops().size() || !kept) {
    std::snprintf(buf, sizeof buf, "the step time is %g s, not a finite time below %g s", tr.makespan_s,
                  kMaxSimulatedSeconds);
    throw std::runtime_error(buf);
  }
  const auto& op = g.ops()[bad];
  std::snprintf(buf, sizeof buf, " ends at %g s (duration %g s, %g bytes, rank %d)", tr.end_s[bad], op.duration_s,
                op.bytes, op.rank);
  throw std::runtime_error("op " + g.describe(static_cast<schedule::OpId>(bad)) + buf +
                           ": not a finite time below 1e9 s; check the platform's bandwidths and FLOP rates "
                           "and the cost profile");
}

}  // namespace cpsim::app
