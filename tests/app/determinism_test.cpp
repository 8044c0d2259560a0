// Determinism and atomic outputs, end to end with the built binary: the same scenario run twice
// writes the same result JSON and trace byte for byte (with both engines, random documents and
// perturbations, whose draws are seeded), a sweep run 2 at a time writes the same results as
// one run at a time and as `cpsim run` alone, and `--json` / `--trace` replace their file by a
// rename (report::write_atomic), never by writing into it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;

namespace {

/// The result JSON with its one wall-clock figure (simulation.wall_s, how long the simulator
/// itself ran) zeroed; every other byte must repeat.
std::string without_wall_time(const std::string& json) {
  static const std::regex wall(R"("wall_s": [-+0-9.eE]+)");
  return std::regex_replace(json, wall, R"("wall_s": 0)");
}

/// results.csv with its sim_wall_s column blanked.
std::string csv_without_wall_time(const std::string& csv) {
  std::istringstream in(csv);
  std::string line, out;
  int wall_col = -1;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) {
        cells.push_back(cell);
        cell.clear();
      } else {
        cell.push_back(c);
      }
    }
    cells.push_back(cell);
    if (wall_col < 0) {
      for (size_t i = 0; i < cells.size(); ++i)
        if (cells[i] == "sim_wall_s") wall_col = static_cast<int>(i);
    } else if (wall_col < static_cast<int>(cells.size())) {
      cells[wall_col] = "-";
    }
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
    out += "\n";
  }
  return out;
}

/// A private directory holding a small scenario: one attention layer, 16K tokens on CP 8, with
/// every seeded random draw the simulator has (documents, jitter, per-GPU variation).
class Determinism : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) / (std::string("cpsim-determinism-") + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write(dir_ / "s.yaml",
          "platform: dgx-h100\n"
          "model: qwen3.8-27b\n"
          "training:\n"
          "  seq_len: 16K\n"
          "  documents: {distribution: lognormal, mean: 2K, seed: 7}\n"
          "parallel:\n"
          "  cp: 8\n"
          "  attention: {scheme: ring, layout: zigzag}\n"
          "simulation: {scope: attention-layer, engine: simgrid, seed: 3}\n"
          "perturb: {jitter_cv: 0.05, gpu_variation_cv: 0.03}\n");
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  /// `cpsim run` on the scenario with `sets`, writing <stem>.json and <stem>.trace.json.
  void run_scenario(const std::string& stem, const std::vector<std::string>& sets) {
    std::string cmd = kCpsim + " run " + (dir_ / "s.yaml").string();
    for (const auto& s : sets) cmd += " --set " + s;
    cmd += " --json " + (dir_ / (stem + ".json")).string() + " --trace " +
           (dir_ / (stem + ".trace.json")).string() + " -q";
    const Output o = run(cmd);
    ASSERT_EQ(o.rc, 0) << cmd << "\n" << o.text;
  }

  fs::path dir_;
};

}  // namespace

TEST_F(Determinism, SameScenarioTwiceSameBytes) {
  for (const std::string engine : {"simgrid", "analytic"}) {
    SCOPED_TRACE(engine);
    run_scenario(engine + "-1", {"simulation.engine=" + engine});
    run_scenario(engine + "-2", {"simulation.engine=" + engine});
    const std::string a = slurp(dir_ / (engine + "-1.json")), b = slurp(dir_ / (engine + "-2.json"));
    ASSERT_FALSE(a.empty());
    EXPECT_NE(a.find("\"step_time_s\""), std::string::npos);
    EXPECT_EQ(without_wall_time(a), without_wall_time(b));
    const std::string ta = slurp(dir_ / (engine + "-1.trace.json"));
    ASSERT_FALSE(ta.empty());
    EXPECT_EQ(ta, slurp(dir_ / (engine + "-2.trace.json")));
  }
}

TEST_F(Determinism, SweepUnderJ2MatchesJ1AndSingleRuns) {
  if (run(kCpsim + " sweep --help").rc != 0)
    GTEST_SKIP() << "`cpsim sweep` is not registered in sim/app/main.cpp in this build";
  write(dir_ / "sweep.yaml",
        "base: s.yaml\n"
        "axes:\n"
        "  simulation.engine: [simgrid, analytic]\n"
        "  parallel.attention.scheme: [ring, allgather]\n");
  for (const char* jobs : {"1", "2"}) {
    const std::string cmd = kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " -j " + jobs + " -o " +
                            (dir_ / (std::string("out-j") + jobs)).string() + " -q";
    const Output o = run(cmd);
    ASSERT_EQ(o.rc, 0) << cmd << "\n" << o.text;
  }
  EXPECT_EQ(csv_without_wall_time(slurp(dir_ / "out-j1" / "results.csv")),
            csv_without_wall_time(slurp(dir_ / "out-j2" / "results.csv")));
  // Points in row-major order: the first axis varies slowest.
  const char* engines[] = {"simgrid", "simgrid", "analytic", "analytic"};
  const char* schemes[] = {"ring", "allgather", "ring", "allgather"};
  for (int i = 0; i < 4; ++i) {
    const std::string id = "000" + std::to_string(i);
    SCOPED_TRACE(id);
    const std::string j1 = slurp(dir_ / "out-j1" / "runs" / (id + ".json"));
    const std::string j2 = slurp(dir_ / "out-j2" / "runs" / (id + ".json"));
    ASSERT_FALSE(j1.empty());
    EXPECT_EQ(without_wall_time(j1), without_wall_time(j2));
    run_scenario("single-" + id, {std::string("simulation.engine=") + engines[i],
                                  std::string("parallel.attention.scheme=") + schemes[i]});
    EXPECT_EQ(without_wall_time(j2), without_wall_time(slurp(dir_ / ("single-" + id + ".json"))));
  }
}

TEST_F(Determinism, JsonAndTraceAreReplacedByRename) {
  // An in-place write keeps the file's inode; write_atomic's temp file + rename gives a new one.
  const fs::path json = dir_ / "out.json", trace = dir_ / "out.trace.json";
  write(json, "old");
  write(trace, "old");
  struct stat before_json {}, before_trace {}, after_json {}, after_trace {};
  ASSERT_EQ(::stat(json.c_str(), &before_json), 0);
  ASSERT_EQ(::stat(trace.c_str(), &before_trace), 0);
  run_scenario("out", {"simulation.engine=analytic"});
  ASSERT_EQ(::stat(json.c_str(), &after_json), 0);
  ASSERT_EQ(::stat(trace.c_str(), &after_trace), 0);
  EXPECT_NE(before_json.st_ino, after_json.st_ino);
  EXPECT_NE(before_trace.st_ino, after_trace.st_ino);
  EXPECT_NE(slurp(json).find("\"step_time_s\""), std::string::npos);
  EXPECT_NE(slurp(trace).find("\"traceEvents\""), std::string::npos);
  // No temporary file is left behind.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(Determinism, UnwritableOutputLeavesNoFile) {
  const fs::path missing = dir_ / "no-such-dir" / "out.json";
  const Output o = run(kCpsim + " run " + (dir_ / "s.yaml").string() +
                       " --set simulation.engine=analytic -q --json " + missing.string());
  EXPECT_EQ(o.rc, 1) << o.text;
  EXPECT_NE(o.text.find("cannot write " + missing.string()), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(missing.parent_path()));
}

}  // namespace CPSIM_TEST_TU
