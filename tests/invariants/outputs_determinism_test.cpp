// Determinism of outputs: the same input twice gives the same bytes (result JSON, Chrome trace,
// results.csv and each point's JSON), and so do `run --samples K` and `sweep` with 1 and with 2
// workers. The only fields allowed to differ are wall-clock ones, named here: the JSON's
// simulation.wall_s and results.csv's sim_wall_s. Cases: output_cases.hpp; a failure names it.
// (`plan -j` is not here: its determinism across worker counts is a separate fix.)
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "app/sweep/results_csv.hpp"
#include "invariants/output_cases.hpp"
#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;
using namespace cpsim::test::outputs;
namespace fs = std::filesystem;

namespace {

/// results.csv with its one wall-clock column (sim_wall_s) blanked; every other byte kept.
std::string csv_without_wall_time(const std::string& text) {
  auto recs = cpsim::app::sweep::parse_csv(text);
  size_t wall = recs.empty() ? 0 : recs.front().size();
  for (size_t i = 0; !recs.empty() && i < recs.front().size(); ++i)
    if (recs.front()[i] == "sim_wall_s") wall = i;
  std::string out;
  for (size_t r = 0; r < recs.size(); ++r) {
    for (size_t i = 0; i < recs[r].size(); ++i)
      out += (i ? "," : "") + (r > 0 && i == wall ? std::string("-") : cpsim::app::sweep::csv_field(recs[r][i]));
    out += "\n";
  }
  return out;
}

class OutputsDeterminism : public cpsim::test::TempDir {
 protected:
  void SetUp() override {
    TempDir::SetUp();
    ASSERT_TRUE(fs::exists(kCpsim)) << "build the cpsim binary first: " << kCpsim;
  }
  /// The JSON text with its wall-clock field zeroed, checking there is exactly one.
  std::string masked(const fs::path& p) {
    int n = 0;
    const std::string s = json_without_wall_time(slurp(p), &n);
    EXPECT_EQ(n, 1) << p << ": the result names one wall-clock field, simulation.wall_s";
    return s;
  }
};

TEST_F(OutputsDeterminism, TheSameRunTwiceWritesTheSameBytes) {
  const auto cs = cases();
  for (size_t i = 0; i < cs.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i) + ": " + cs[i].text());
    for (const char* k : {"a", "b"}) {
      const std::string stem = (dir_ / k).string();
      const Output o = run(kCpsim + " run " + kBase + cs[i].sets() + " -q --json " + stem + ".json --trace " + stem + ".trace");
      ASSERT_EQ(o.rc, 0) << o.text;
    }
    EXPECT_EQ(masked(dir_ / "a.json"), masked(dir_ / "b.json"));
    EXPECT_TRUE(slurp(dir_ / "a.trace") == slurp(dir_ / "b.trace")) << "the Chrome traces differ";
  }
}

TEST_F(OutputsDeterminism, SamplesWithOneOrTwoWorkersWriteTheSameBytes) {
  // Perturbed samples (each seed's draw) of a whole step and of an attention layer.
  const auto cs = cases();
  for (size_t i : {size_t{10}, size_t{11}, size_t{13}}) {
    SCOPED_TRACE("case " + std::to_string(i) + ": " + cs[i].text() + " --samples 3");
    for (const char* j : {"1", "2"}) {
      const Output o = run(kCpsim + " run " + kBase + cs[i].sets() + " --set perturb.gpu_variation_cv=0.05 --set perturb.jitter_cv=0.02 --samples 3 -j " +
                           j + " -q --json " + (dir_ / (std::string("j") + j + ".json")).string());
      ASSERT_EQ(o.rc, 0) << o.text;
    }
    EXPECT_EQ(masked(dir_ / "j1.json"), masked(dir_ / "j2.json"));
  }
}

TEST_F(OutputsDeterminism, SweepWithOneOrTwoWorkersWritesTheSameBytes) {
  const auto cs = cases();
  write(dir_ / "cases.yaml", sweep_yaml(cs));
  for (const char* j : {"1", "2"}) {
    const Output o = run(kCpsim + " sweep " + (dir_ / "cases.yaml").string() + " -q -j " + j + " -o " +
                         (dir_ / (std::string("out-j") + j)).string());
    ASSERT_EQ(o.rc, 0) << o.text;
  }
  EXPECT_EQ(csv_without_wall_time(slurp(dir_ / "out-j1" / "results.csv")),
            csv_without_wall_time(slurp(dir_ / "out-j2" / "results.csv")));
  for (size_t i = 0; i < cs.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i) + ": " + cs[i].text());
    char id[32];
    std::snprintf(id, sizeof id, "%04zu.json", i);
    EXPECT_EQ(masked(dir_ / "out-j1" / "runs" / id), masked(dir_ / "out-j2" / "runs" / id));
  }
}

}  // namespace

}  // namespace CPSIM_TEST_TU
