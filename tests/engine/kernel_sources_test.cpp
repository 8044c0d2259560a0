// Every memory-bound kernel a bundled scenario runs is priced at a measured kernel-class rate
// (stack_kernels.hpp), never at a class-less HBM roofline; each op kind's sources carry the
// time they priced, so the summary can give shares, and a copied replica counts its time too.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "scenario/load.hpp"
#include "schedule/plan.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

schedule::Plan plan_of(const std::string& file, std::vector<std::string> sets) {
  sets.push_back("simulation.engine=analytic");
  const scenario::Scenario sc = scenario::load_scenario(std::string(CPSIM_SOURCE_DIR) + "/scenarios/" + file, sets);
  const auto cost = model::CostModel::make(sc.cost, sc.platform.gpu);
  const model::Topology topo(sc.platform, sc.perturb);
  return schedule::plan(sc, topo, *cost);
}

}  // namespace

class KernelSources : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(KernelSources, MemoryKernelsAtMeasuredRatesAndTimesPerSource) {
  const auto& args = GetParam();
  const schedule::Plan p = plan_of(args[0], {args.begin() + 1, args.end()});
  ASSERT_TRUE(p.pricing.count("memory")) << args[0];
  for (const auto& [source, n] : p.pricing.at("memory")) {
    EXPECT_EQ(source.rfind("measured (", 0), 0u) << args[0] << ": memory ops priced by " << source;
  }
  // No op of a bundled scenario is priced by a bare roofline (the Gated DeltaNet CP pre-process
  // is derived kernel by kernel from FLA's published figures).
  for (const auto& [kind, by_source] : p.pricing)
    for (const auto& [source, n] : by_source)
      EXPECT_NE(source.rfind("roofline", 0), 0u) << args[0] << ": " << kind << " ops priced by " << source;
  // The same kinds and sources in the op counts and the times; every counted source priced time.
  ASSERT_EQ(p.pricing.size(), p.pricing_time_s.size()) << args[0];
  for (const auto& [kind, by_source] : p.pricing) {
    ASSERT_TRUE(p.pricing_time_s.count(kind)) << kind;
    for (const auto& [source, n] : by_source) {
      ASSERT_TRUE(p.pricing_time_s.at(kind).count(source)) << kind << " " << source;
      EXPECT_GT(p.pricing_time_s.at(kind).at(source), 0) << kind << " " << source;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Bundled, KernelSources,
    ::testing::Values(
        // Gated DeltaNet short convolutions, ring dK/dV accumulation and merges, embedding, optimizer.
        std::vector<std::string>{"quickstart.yaml", "training.seq_len=32K"},
        // MoE router, permute, expert and shared-expert SwiGLU.
        std::vector<std::string>{"qwen3-30b-a3b-128k-2nodes.yaml", "training.seq_len=16K"},
        // PyTorch-native stack, data-parallel replicas copied.
        std::vector<std::string>{"llama3-8b-8k-torchtitan.yaml"}));

}  // namespace CPSIM_TEST_TU
