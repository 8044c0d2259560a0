// `cpsim compare`: a profiled step (PyTorch profiler Chrome traces) against the simulated one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {

using namespace cpsim::cli;
namespace fs = std::filesystem;

const std::string kKineto = std::string(CPSIM_SOURCE_DIR) + "/tests/data/kineto";

TEST(Compare, MeasuresEachClassFromTheTraceAndSetsItBesideTheSimulation) {
  const fs::path dir = fs::temp_directory_path() / ("cpsim-compare-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write(dir / "tiny.yaml", kTinyScenario);
  const Output o = run(kCpsim + " compare " + (dir / "tiny.yaml").string() + " " + kKineto +
                       "/rank0.pt.trace.json " + kKineto + "/rank1.pt.trace.json --json " +
                       (dir / "c.json").string());
  ASSERT_EQ(o.rc, 0) << o.text;
  std::ifstream in(dir / "c.json");
  const auto j = nlohmann::json::parse(in);
  fs::remove_all(dir);
  std::map<std::string, nlohmann::json> rows;
  for (const auto& r : j.at("rows")) rows[r.at("class").get<std::string>()] = r;
  // tests/data/kineto/README.md: the last step's kernels, per class.
  EXPECT_NEAR(rows.at("attention").at("measured_mean_s").get<double>(), 1.0e-3, 1e-9);
  EXPECT_NEAR(rows.at("gemm").at("measured_min_s").get<double>(), 2.8e-3, 1e-9);
  EXPECT_NEAR(rows.at("gemm").at("measured_max_s").get<double>(), 3.1e-3, 1e-9);
  EXPECT_NEAR(rows.at("memory").at("measured_mean_s").get<double>(), 0.6e-3, 1e-9);
  EXPECT_NEAR(rows.at("collective").at("measured_mean_s").get<double>(), 1.0e-3, 1e-9);
  EXPECT_NEAR(rows.at("p2p").at("measured_mean_s").get<double>(), 0.4e-3, 1e-9);
  EXPECT_NEAR(rows.at("exposed comm").at("measured_mean_s").get<double>(), 0.9e-3, 1e-9);
  EXPECT_NEAR(rows.at("step").at("measured_mean_s").get<double>(), 10e-3, 1e-9);
  EXPECT_GT(rows.at("step").at("simulated_s").get<double>(), 0);
  EXPECT_EQ(j.at("ranks").size(), 2u);
  EXPECT_EQ(j["ranks"][1].at("rank").get<int>(), 1);
}

TEST(Compare, ATraceThatIsNotOneIsRefused) {
  const Output o = run(kCpsim + " compare " + std::string(CPSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml " +
                       kKineto + "/README.md --engine analytic");
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("README.md: error: not JSON"), std::string::npos) << o.text;
}

}  // namespace CPSIM_TEST_TU
