// Agreement of the engines: where nothing contends, the analytic engine (no contention model:
// each flow at its route's bottleneck share) and SimGrid (flows sharing links) must give the
// same step. On one NVSwitch node every flow of a CP group has its own GPU up and down links
// (a ring's p2p steps) or an equal share of them (all-gather, all-to-all): there the two agree
// within kTolerance, whole layers included. Two nodes' CP and DP traffic meet on the NICs and
// the leaf switch, where SimGrid's sharing and the analytic share may differ: held to
// kContendedTolerance (measured +5.4 % on the two-node step).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "app/simulate.hpp"
#include "invariants/cases.hpp"
#include "scenario/load.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {
// 1 %: measured within 0.06 % (double ring) and 0.63 % (the one-node TP 2 x CP 4 step).
constexpr double kTolerance = 0.01;
constexpr double kContendedTolerance = 0.10;
}  // namespace

TEST(InvariantEngines, AnalyticAndSimGridAgreeWithoutContention) {
  std::vector<scenario::Scenario> simgrid, analytic;
  std::vector<std::string> names;
  for (const auto& rc : invariants::run_cases()) {
    scenario::Scenario s = scenario::parse_scenario(rc.yaml, rc.name + ".yaml");
    s.simulation.engine = scenario::EngineKind::Analytic;
    analytic.push_back(s);
    s.simulation.engine = scenario::EngineKind::SimGrid;
    simgrid.push_back(s);
    names.push_back(rc.name);
  }
  const auto ta = app::run_step_times(analytic, 2), ts = app::run_step_times(simgrid, 2);
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_GT(ta[i], 0) << names[i];
    ASSERT_GT(ts[i], 0) << names[i];
    const bool quiet = names[i].find("two nodes") == std::string::npos;
    const double tol = quiet ? kTolerance : kContendedTolerance;
    std::printf("%-40s analytic %.6f s simgrid %.6f s (%+.2f %%)\n", names[i].c_str(), ta[i], ts[i],
                100 * (ts[i] / ta[i] - 1));
    EXPECT_NEAR(ts[i] / ta[i], 1.0, tol) << "case: " << names[i] << "\n  analytic " << ta[i]
                                        << " s, simgrid " << ts[i] << " s";
  }
}

}  // namespace CPSIM_TEST_TU
