// Megatron's optimizer CPU offload (model/offload.hpp): the memory it frees on the GPU and the
// host traffic and CPU Adam it costs.
#include <gtest/gtest.h>

#include "model/memory.hpp"
#include "model/offload.hpp"
#include "model/transformer.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

double opt_term(const model::MemoryEstimate& m) {
  for (const auto& t : m.terms)
    if (t.name.rfind("optimizer states", 0) == 0) return t.bytes;
  return -1;
}

scenario::Scenario llama70b_tp8_dp2() {
  scenario::Scenario sc;
  sc.model = fixtures::llama3_70b_model();
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  sc.training.seq_len = 8192;
  sc.parallel.tp = 8;
  sc.parallel.dp = 2;
  sc.parallel.zero_stage = 1;
  return sc;
}

}  // namespace

TEST(OptimizerOffload, MovesTheOffloadedShareOfTheStatesToTheHost) {
  auto sc = llama70b_tp8_dp2();
  const auto on_gpu = model::estimate_memory(sc);
  const double states = opt_term(on_gpu);
  // The distributed optimizer's 12 B per parameter over DP 2.
  EXPECT_NEAR(states, 12.0 * model::total_params(sc.model) / 8 / 2, 1e3);
  sc.training.optimizer_offload_fraction = 1.0;
  const auto all = model::estimate_memory(sc);
  EXPECT_EQ(opt_term(all), 0);
  // The allocator's view: the states' blocks leave the allocated peak (each rounded up to its
  // block: 512 B, or a segment tail of up to 1 MiB kept whole).
  EXPECT_NEAR(on_gpu.allocated_bytes - all.allocated_bytes, states, states * 1e-4);
  EXPECT_GT(on_gpu.peak_bytes - all.peak_bytes, states);  // and their segments' share of fragmentation
  sc.training.optimizer_offload_fraction = 0.25;
  EXPECT_NEAR(opt_term(model::estimate_memory(sc)), 0.75 * states, 1e3);
  bool named = false;
  for (const auto& t : model::estimate_memory(sc).terms)
    named = named || t.name == "optimizer states (fp32 master + Adam; 25% on the host)";
  EXPECT_TRUE(named);
}

TEST(OptimizerOffload, HostTrafficAndCpuAdamPerParameter) {
  auto sc = llama70b_tp8_dp2();
  const double params = 1e9;
  const auto t = model::optimizer_offload_time(sc, params);
  // 4 GB of fp32 gradients each way over PCIe Gen5 x16 at 57.6 GB/s.
  EXPECT_NEAR(t.d2h_s, 4e9 / 57.6e9, 1e-3);
  EXPECT_NEAR(t.h2d_s, t.d2h_s, 1e-12);
  // 28 B per parameter at 614.4 GB/s of host DRAM shared by 8 GPUs.
  EXPECT_NEAR(t.cpu_step_s, 28e9 / (614.4e9 / 8), 1e-9);
  EXPECT_EQ(model::optimizer_offload_time(sc, 0).cpu_step_s, 0);
}

}  // namespace CPSIM_TEST_TU
