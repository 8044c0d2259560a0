// Megatron's optimizer CPU offload in the step: the offloaded share's gradients go to the host,
// a CPU Adam steps them, the weights come back, and the parameter gather waits for it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "support/built_step.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

struct Stepped {
  double step_s = 0;
  int host_ops = 0;      ///< optimizer_offload_d2h / optimizer_step_cpu / optimizer_offload_h2d ops
  double cpu_step_s = 0; ///< the longest CPU Adam op
};

Stepped step(const scenario::Scenario& sc) {
  const test::BuiltStep built(sc);
  const schedule::TaskGraph& g = built.g;
  Stepped s;
  for (schedule::OpId id = 0; id < g.size(); ++id) {
    const std::string n = g.str(g.op(id).label.name);
    if (n.rfind("optimizer_offload_", 0) == 0 || n == "optimizer_step_cpu") {
      ++s.host_ops;
      EXPECT_EQ(g.op(id).stream, schedule::stream::kOffload);
      EXPECT_EQ(g.op(id).label.phase, schedule::Phase::Optimizer);
    }
    if (n == "optimizer_step_cpu") s.cpu_step_s = std::max(s.cpu_step_s, g.op(id).duration_s);
  }
  s.step_s = built.analytic_s();
  return s;
}

}  // namespace

TEST(OptimizerOffloadTime, TheHostStepLengthensTheStepByItsShare) {
  auto sc = test::llama8b_tp8_job();
  const Stepped gpu = step(sc);
  EXPECT_EQ(gpu.host_ops, 0);
  sc.training.optimizer_offload_fraction = 1.0;
  const Stepped all = step(sc);
  sc.training.optimizer_offload_fraction = 0.5;
  const Stepped half = step(sc);
  // Three host ops per optimizer member (every GPU of the built replicas).
  EXPECT_GT(all.host_ops, 0);
  EXPECT_EQ(all.host_ops % 3, 0);
  EXPECT_NEAR(half.cpu_step_s, 0.5 * all.cpu_step_s, 1e-12);
  // The host's Adam at DRAM speed is slower than the GPU's at HBM speed: the step lengthens.
  EXPECT_GT(half.step_s, gpu.step_s);
  EXPECT_GT(all.step_s, half.step_s);
}

}  // namespace CPSIM_TEST_TU
