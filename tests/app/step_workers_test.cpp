// app/simulate StepWorkers: analytic steps in long-lived workers (cpsim plan's stages 3 and 4)
// give the answers a fresh child gives, even where a worker is lost.
#include "app/simulate.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "scenario/load.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

scenario::Scenario anchor_layer() {
  return scenario::load_scenario(std::string(CPSIM_SOURCE_DIR) + "/scenarios/anchor-128k-ring-zigzag.yaml",
                                 {"simulation.engine=analytic", "simulation.scope=attention_layer"});
}

TEST(StepWorkers, WorkersGiveTheStepsAFreshChildGives) {
  const scenario::Scenario sc = anchor_layer();
  app::StepWorkers workers([&sc](size_t) { return sc; }, 2, 0);
  const auto out = workers.run({0, 1, 2}, {0, 0, 0}, {0, 0, 0});
  const auto fresh = app::run_bounded_steps({sc}, 1, {0}, 0);
  ASSERT_GT(fresh[0].step_s, 0);
  for (const auto& o : out) EXPECT_EQ(o.step_s, fresh[0].step_s) << o.error;
}

TEST(StepWorkers, AStepWhoseWorkerIsLostRunsAgainInAChildOfItsOwn) {
  // The worker dies (as at a memory limit its heap's fragments reached): the step's answer is
  // the one a fresh child gives, not the lost worker's.
  const scenario::Scenario sc = anchor_layer();
  const pid_t parent = ::getpid();
  app::StepWorkers workers(
      [&sc, parent](size_t) {
        if (::getpid() != parent) ::raise(SIGKILL);  // only in the worker: the rerun's scenario is made here
        return sc;
      },
      1, 0);
  const auto out = workers.run({0}, {0}, {0});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_GT(out[0].step_s, 0) << out[0].error;
  EXPECT_TRUE(out[0].error.empty()) << out[0].error;
}

}  // namespace

}  // namespace CPSIM_TEST_TU
