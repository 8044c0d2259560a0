// Perturbed runs end to end with the built binary: step-time samples over seeds (the same seed
// gives the same distribution), the straggler what-if, a perturbation of nothing reproducing the
// plain run bit for bit, interference's default and override, and impossible rail failures.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "report/metrics.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

#include "support/cli_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;

namespace {

const std::string kScenarios = CPSIM_SOURCE_DIR "/scenarios/";

class Perturbed : public cpsim::test::CliDir {
 protected:
  /// `cpsim run SCENARIO ARGS --json FILE`; returns the result JSON (null on failure).
  json result(const std::string& scenario, const std::string& args, Output* out = nullptr) {
    return run_json(kCpsim + " run " + kScenarios + scenario + " " + args, out);
  }
};

const std::string kLayer = "--set simulation.scope=layer";

}  // namespace

TEST_F(Perturbed, SameSeedGivesTheSameDistribution) {
  const std::string args = kLayer + " --no-what-if-straggler --samples 4";
  Output o;
  const json a = result("perturb-fleet-noise.yaml", args, &o);
  const json b = result("perturb-fleet-noise.yaml", args + " -j 3");
  ASSERT_TRUE(a.contains("samples")) << a.dump(1).substr(0, 2000);
  const auto& sa = a["samples"];
  EXPECT_EQ(sa["count"], 4);
  EXPECT_EQ(sa["seeds"], json({1, 2, 3, 4}));
  EXPECT_EQ(sa["step_time_s"], b["samples"]["step_time_s"]);  // same seeds, one or three at a time
  // With 3 jobs the samples replay beside the main run (keeping no times): the same report.
  EXPECT_EQ(a["step_time_s"], b["step_time_s"]);
  EXPECT_EQ(a["ranks"], b["ranks"]);
  EXPECT_EQ(a["critical_path"], b["critical_path"]);
  // The first sample is the main run's seed.
  EXPECT_EQ(sa["step_time_s"][0].get<double>(), a["step_time_s"].get<double>());
  // Jitter and variation make the seeds differ.
  std::vector<double> v = sa["step_time_s"];
  EXPECT_NE(v[0], v[1]);
  EXPECT_LE(sa["min_s"].get<double>(), sa["p50_s"].get<double>());
  EXPECT_LE(sa["p50_s"].get<double>(), sa["p95_s"].get<double>());
  EXPECT_LE(sa["p95_s"].get<double>(), sa["p99_s"].get<double>());
  EXPECT_LE(sa["p99_s"].get<double>(), sa["max_s"].get<double>());
  EXPECT_EQ(sa["min_s"].get<double>(), *std::min_element(v.begin(), v.end()));
  EXPECT_NE(o.text.find("step time over 4 seeds"), std::string::npos) << o.text;
  // Starting one seed later shifts the samples by one: each seed's draw is its own.
  const json c = result("perturb-fleet-noise.yaml", args + " --set simulation.seed=2");
  EXPECT_EQ(c["samples"]["seeds"], json({2, 3, 4, 5}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c["samples"]["step_time_s"][i], sa["step_time_s"][i + 1]) << i;
}

TEST_F(Perturbed, WhatIfNamesTheSlowGpuAndTheStepWithoutIt) {
  Output o;
  const json slow = result("perturb-slow-gpu.yaml", kLayer, &o);  // the what-if is on by default
  const json plain = result("anchor-128k-ring-zigzag.yaml", kLayer);
  ASSERT_TRUE(slow.contains("straggler")) << o.text;
  const auto& st = slow["straggler"];
  EXPECT_EQ(st["rank"], 3);
  EXPECT_DOUBLE_EQ(st["factor"].get<double>(), 1.2);
  EXPECT_EQ(st["step_with_s"].get<double>(), slow["step_time_s"].get<double>());
  // Without GPU 3's slowdown the run is the unperturbed one, bit for bit.
  EXPECT_EQ(st["step_without_s"].get<double>(), plain["step_time_s"].get<double>());
  EXPECT_DOUBLE_EQ(st["shrink_s"].get<double>(),
                   slow["step_time_s"].get<double>() - plain["step_time_s"].get<double>());
  EXPECT_EQ(slow["straggler_rank"], 3);
  EXPECT_NE(o.text.find("straggler (what-if)         rank 3 (x1.200)"), std::string::npos) << o.text;
  EXPECT_FALSE(plain.contains("straggler"));  // no perturbation, no what-if
  // Off on request.
  EXPECT_FALSE(result("perturb-slow-gpu.yaml", kLayer + " --no-what-if-straggler").contains("straggler"));
  // The analysis of the main run is the same with or without the what-if's child processes.
  const json off = result("perturb-slow-gpu.yaml", kLayer + " --no-what-if-straggler");
  EXPECT_EQ(off["step_time_s"], slow["step_time_s"]);
  EXPECT_EQ(off["ranks"], slow["ranks"]);
}

TEST_F(Perturbed, SlowNodeIsEverySlowGpuOfIt) {
  const std::string two = " --set platform=h100-cluster --set parallel.cp=16"
                          " --set simulation.scope=attention-layer --no-what-if-straggler";
  const json node = result("anchor-128k-ring-zigzag.yaml", "--set 'perturb.slow_nodes={1: 1.1}'" + two);
  std::string gpus = "{";
  for (int g = 8; g < 16; ++g) gpus += std::to_string(g) + ": 1.1" + (g < 15 ? ", " : "}");
  const json each = result("anchor-128k-ring-zigzag.yaml", "--set 'perturb.slow_gpus=" + gpus + "'" + two);
  const json plain = result("anchor-128k-ring-zigzag.yaml", two);
  EXPECT_EQ(node["step_time_s"], each["step_time_s"]);
  EXPECT_GT(node["step_time_s"].get<double>(), 1.05 * plain["step_time_s"].get<double>());
}

TEST_F(Perturbed, ZeroPerturbationReproducesThePlainRunBitForBit) {
  const json plain = result("anchor-128k-ring-zigzag.yaml", kLayer);
  const json zero = result("anchor-128k-ring-zigzag.yaml",
                           kLayer + " --set 'perturb={slow_gpus: {3: 1}, slow_nodes: {0: 1.0}, jitter_cv: 0, "
                                    "gpu_variation_cv: 0, links: [{gpu: 2, link: nvlink, bw_factor: 1}]}'");
  EXPECT_EQ(zero["step_time_s"].get<double>(), plain["step_time_s"].get<double>());
  EXPECT_EQ(zero["ranks"], plain["ranks"]);
  EXPECT_EQ(zero["critical_path"], plain["critical_path"]);
  EXPECT_FALSE(zero.contains("straggler"));  // nothing perturbed: no what-if
}

TEST_F(Perturbed, InterferenceDefaultsToThePlatformAndZeroIsIdealOverlap) {
  const json dflt = result("anchor-128k-ring-zigzag.yaml", kLayer);
  const json same = result("anchor-128k-ring-zigzag.yaml", kLayer + " --set perturb.interference=0.19");
  const json off = result("anchor-128k-ring-zigzag.yaml", kLayer + " --set perturb.interference=0");
  const json worst = result("anchor-128k-ring-zigzag.yaml", kLayer + " --set perturb.interference=0.4");
  EXPECT_EQ(dflt["step_time_s"].get<double>(), same["step_time_s"].get<double>());  // dgx-h100: 0.19
  EXPECT_LT(off["step_time_s"].get<double>(), dflt["step_time_s"].get<double>());
  EXPECT_LT(dflt["step_time_s"].get<double>(), worst["step_time_s"].get<double>());
  // The platform knob does the same.
  const json platform_off = result("anchor-128k-ring-zigzag.yaml", kLayer + " --set platform.compute_interference=0");
  EXPECT_EQ(platform_off["step_time_s"].get<double>(), off["step_time_s"].get<double>());
}

TEST_F(Perturbed, RailDownReroutesAndEveryRailDownIsImpossible) {
  const std::string two = " --set platform=h100-cluster --set parallel.cp=16"
                          " --set simulation.scope=attention-layer";
  const json plain = result("anchor-128k-ring-zigzag.yaml", two);
  const json down = result("anchor-128k-ring-zigzag.yaml", two + " --set perturb.rails_down=[0]");
  EXPECT_GE(down["step_time_s"].get<double>(), plain["step_time_s"].get<double>());
  ASSERT_FALSE(down["links"].empty());
  EXPECT_EQ(down["scenario"]["perturb"]["rails_down"], json({0}));
  const Output o = run(kCpsim + " run " + kScenarios + "anchor-128k-ring-zigzag.yaml" + two +
                       " --set 'perturb.rails_down=[0, 1, 2, 3, 4, 5, 6, 7]'");
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("<--set>:1:20: error: perturb.rails_down: every rail GPUs use (8 of 8 NICs per "
                        "node) is down, so the 2 nodes cannot reach each other: the run is impossible"),
            std::string::npos)
      << o.text;
}

TEST(SampleStats, PercentilesInterpolateBetweenOrderStatistics) {
  cpsim::report::Samples s;
  s.step_time_s = {5, 1, 4, 2, 3};
  cpsim::report::sample_stats(s);
  EXPECT_DOUBLE_EQ(s.mean_s, 3);
  EXPECT_DOUBLE_EQ(s.stdev_s, std::sqrt(2.5));
  EXPECT_DOUBLE_EQ(s.min_s, 1);
  EXPECT_DOUBLE_EQ(s.max_s, 5);
  EXPECT_DOUBLE_EQ(s.p50_s, 3);
  EXPECT_DOUBLE_EQ(s.p95_s, 4.8);
  EXPECT_DOUBLE_EQ(s.p99_s, 4.96);
  cpsim::report::Samples one;
  one.step_time_s = {2};
  cpsim::report::sample_stats(one);
  EXPECT_DOUBLE_EQ(one.p99_s, 2);
  EXPECT_DOUBLE_EQ(one.stdev_s, 0);
}

}  // namespace CPSIM_TEST_TU
