// `cpsim compare`: a profiled step (PyTorch profiler Chrome traces) against the simulated one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

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

TEST(Compare, TimelinePutsEachProfiledRankBesideItsSimulationOnOneAxis) {
  const fs::path dir = fs::temp_directory_path() / ("cpsim-compare-tl-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write(dir / "tiny.yaml", kTinyScenario);
  const Output o = run(kCpsim + " compare " + (dir / "tiny.yaml").string() + " " + kKineto +
                       "/rank0.pt.trace.json " + kKineto + "/rank1.pt.trace.json --timeline " +
                       (dir / "t.json").string());
  ASSERT_EQ(o.rc, 0) << o.text;
  std::ifstream in(dir / "t.json");
  const auto j = nlohmann::json::parse(in);
  fs::remove_all(dir);
  std::map<int, std::string> process;
  std::map<int, std::vector<nlohmann::json>> events;
  std::map<int, double> step_us;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") process[e.at("pid")] = e["args"]["name"];
    if (e.at("ph") == "X" && e.at("cat") == "step") step_us[e.at("pid")] = e.at("dur");
    else if (e.at("ph") == "X") events[e.at("pid")].push_back(e);
  }
  // Measured rank 0, its simulation, measured rank 1, its simulation: in that order.
  ASSERT_EQ(process.size(), 4u);
  EXPECT_EQ(process.at(1).rfind("rank 0 measured", 0), 0u) << process.at(1);
  EXPECT_EQ(process.at(2), "rank 0 simulated");
  EXPECT_EQ(process.at(3).rfind("rank 1 measured", 0), 0u) << process.at(3);
  EXPECT_EQ(process.at(4), "rank 1 simulated");
  // tests/data/kineto/README.md: 9 kernels in the last step, the window starting at 0 (the
  // step's first kernel may start after it) and ending by 10 ms.
  for (int pid : {1, 3}) {
    ASSERT_EQ(events[pid].size(), 9u);
    double lo = 1e300, hi = 0;
    for (const auto& e : events[pid]) {
      lo = std::min(lo, e.at("ts").get<double>());
      hi = std::max(hi, e.at("ts").get<double>() + e.at("dur").get<double>());
      EXPECT_EQ(e["args"]["side"], "measured");
    }
    EXPECT_GE(lo, 0);
    EXPECT_LT(lo, 1000);
    EXPECT_LE(hi, 10000 + 1e-6);
    EXPECT_NEAR(step_us.at(pid), 10000, 1e-6);  // the profiled window
  }
  // The simulated lanes carry cpsim's own ops of that rank, classed with the same names.
  const std::set<std::string> classes = {"attention", "gemm", "memory", "collective", "p2p", "overhead", "linear-attention"};
  for (int pid : {2, 4}) {
    ASSERT_FALSE(events[pid].empty());
    double end = 0;
    for (const auto& e : events[pid]) end = std::max(end, e.at("ts").get<double>() + e.at("dur").get<double>());
    EXPECT_GE(step_us.at(pid) * (1 + 1e-9), end);  // no op of the rank after the simulated step
    for (const auto& e : events[pid]) {
      EXPECT_EQ(classes.count(e.at("cat").get<std::string>()), 1u) << e.dump();
      EXPECT_EQ(e["args"]["rank"].get<int>(), pid / 2 - 1);
    }
  }
  EXPECT_TRUE(j.at("otherData").at("ranks_not_simulated").empty());
}

TEST(Compare, ATimelineOverAnInputIsRefusedBeforeAnyWork) {
  const std::string copy = (fs::temp_directory_path() / ("cpsim-tl-" + std::to_string(::getpid()) + ".json")).string();
  fs::copy_file(kKineto + "/rank0.pt.trace.json", copy, fs::copy_options::overwrite_existing);
  const Output o = run(kCpsim + " compare " + std::string(CPSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml " +
                       copy + " --engine analytic --timeline " + copy);
  const auto size = fs::file_size(copy);
  fs::remove(copy);
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("--timeline"), std::string::npos) << o.text;
  EXPECT_EQ(size, fs::file_size(kKineto + "/rank0.pt.trace.json"));
}

TEST(Compare, ATraceThatIsNotOneIsRefused) {
  const Output o = run(kCpsim + " compare " + std::string(CPSIM_SOURCE_DIR) + "/scenarios/quickstart.yaml " +
                       kKineto + "/README.md --engine analytic");
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("README.md: error: not JSON"), std::string::npos) << o.text;
}

}  // namespace CPSIM_TEST_TU
