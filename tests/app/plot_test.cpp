// Every command of tools/cpsim_plot.py runs on outputs of the bundled scenarios and sweeps and
// writes a PNG and an SVG. The sweeps run with the analytic engine to stay fast. Skipped where
// /usr/bin/python3 has no matplotlib (Debian's python3-matplotlib).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

#include "support/cli.hpp"

using namespace cpsim::cli;

namespace {

const std::string kSource = CPSIM_SOURCE_DIR;
const std::string kPlot = "/usr/bin/python3 " + kSource + "/tools/cpsim_plot.py";

/// Bundled scenario paths are relative to the source tree.
Output run_in_source(const std::string& cmd) { return run("cd " + kSource + " && " + cmd); }

std::string head(const fs::path& p, size_t n) {
  std::ifstream in(p, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

bool have_matplotlib() { return run_in_source("/usr/bin/python3 -c 'import matplotlib'").rc == 0; }

class PlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 has no matplotlib (apt install python3-matplotlib)";
    ASSERT_TRUE(fs::exists(kCpsim)) << "build the cpsim binary first: " << kCpsim;
    dir_ = fs::temp_directory_path() / ("cpsim-plot-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty() && !HasFailure()) fs::remove_all(dir_);
  }

  std::string p(const std::string& name) const { return (dir_ / name).string(); }

  /// Runs a plot command writing OUT and checks both images.
  void plot(const std::string& args, const std::string& out) {
    SCOPED_TRACE(args);
    const Output o = run_in_source(kPlot + " " + args + " -o " + p(out));
    ASSERT_EQ(o.rc, 0) << o.text;
    const fs::path png = dir_ / (out + ".png"), svg = dir_ / (out + ".svg");
    ASSERT_TRUE(fs::exists(png)) << o.text;
    ASSERT_TRUE(fs::exists(svg)) << o.text;
    EXPECT_EQ(head(png, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_NE(head(svg, 2000).find("<svg"), std::string::npos);
    EXPECT_GT(fs::file_size(png), 10000u) << "an almost empty image";
  }

  fs::path dir_;
};

// One test, because producing the inputs (two runs, two sweeps) is most of its time and
// ctest runs every test in a process of its own.
TEST_F(PlotTest, EveryPlotCommandRunsOnBundledOutputs) {
  // One attention layer at 16K tokens of two bundled scenarios: a trace and two results.
  const std::string cut = " --set simulation.scope=attention-layer --set training.seq_len=16K --engine analytic -q";
  ASSERT_EQ(run_in_source(kCpsim + " run scenarios/anchor-128k-ring-contiguous.yaml" + cut + " --trace " + p("trace.json") +
                " --json " + p("contiguous.json")).rc, 0);
  ASSERT_EQ(run_in_source(kCpsim + " run scenarios/anchor-128k-ring-zigzag.yaml" + cut + " --json " + p("zigzag.json")).rc, 0);
  ASSERT_EQ(run_in_source(kCpsim + " partition --seq 16 --cp 4 --layout contiguous --json " + p("part-c.json")).rc, 0);
  ASSERT_EQ(run_in_source(kCpsim + " partition --seq 16 --cp 4 --layout zigzag --json " + p("part-z.json")).rc, 0);
  // Two bundled sweeps, analytic to stay fast; usp-degrees holds points that fail on purpose.
  const std::string fast = " -j 2 -q --set simulation.engine=analytic";
  ASSERT_EQ(run_in_source(kCpsim + " sweep sweeps/schedules-x-seqlen.yaml -o " + p("sched") + fast).rc, 0);
  ASSERT_EQ(run_in_source(kCpsim + " sweep sweeps/usp-degrees.yaml -o " + p("usp") + fast).rc, 1);

  plot("timeline " + p("trace.json"), "timeline");
  plot("timeline " + p("trace.json") + " --ranks 0-3 --layer 3", "timeline-ranks");
  plot("compare " + p("contiguous.json") + " " + p("zigzag.json"), "compare");
  plot("compare " + p("sched") + " --where training.seq_len=128K", "compare-sweep");
  plot("sweep " + p("sched") + " --x training.seq_len --series schedule --y step_time_s --y exposed_comm_s --logy",
       "sweep");
  plot("sweep " + p("usp") + " --x parallel.attention.ulysses_degree --series parallel.cp --facet simulation.scope",
       "sweep-facets");
  plot("heatmap " + p("usp") + " --x parallel.attention.ulysses_degree --y parallel.cp --note ring_degree --best row",
       "heatmap");
  plot("partition " + p("part-c.json") + " " + p("part-z.json"), "partition");
  plot("bench bench/results", "bench");  // the CSVs bench/run.sh wrote, committed
}

TEST_F(PlotTest, BadInputsExitTwo) {
  std::ofstream(p("not-a-trace.json")) << "{\"a\": 1}\n";
  fs::create_directories(p("empty-dir"));
  EXPECT_EQ(run_in_source(kPlot + " nosuchplot x").rc, 2);
  EXPECT_EQ(run_in_source(kPlot + " timeline " + p("not-a-trace.json") + " -o " + p("bad")).rc, 2);
  EXPECT_EQ(run_in_source(kPlot + " timeline " + p("missing.json") + " -o " + p("bad")).rc, 2);
  EXPECT_EQ(run_in_source(kPlot + " compare " + p("not-a-trace.json") + " -o " + p("bad")).rc, 2);
  EXPECT_EQ(run_in_source(kPlot + " sweep " + p("empty-dir") + " -o " + p("bad")).rc, 2);
  EXPECT_EQ(run_in_source(kPlot + " bench " + p("empty-dir") + " -o " + p("bad")).rc, 2);
  EXPECT_FALSE(fs::exists(p("bad.png")));
}

}  // namespace
