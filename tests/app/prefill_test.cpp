// `mode: prefill` over every bundled scenario: the run succeeds, reports the time to first
// token and the KV cache, and its memory has no gradient or optimizer terms.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

namespace fs = std::filesystem;
using namespace cpsim::cli;

namespace {

nlohmann::json run_json(const std::string& scenario, const std::string& extra) {
  const fs::path out =
      fs::temp_directory_path() / ("cpsim-prefill-" + std::to_string(::getpid()) + ".json");
  const Output o = run(kCpsim + " run " + scenario + " -q --no-what-if-straggler --json " + out.string() +
                       " " + extra);
  EXPECT_EQ(o.rc, 0) << scenario << ": " << o.text;
  if (o.rc != 0) return {};
  std::ifstream in(out);
  auto j = nlohmann::json::parse(in);
  fs::remove(out);
  return j;
}

/// The bundled scenarios, one test each, so that ctest spreads them over the cores (as one test
/// they were its longest: 20 s in the -O2 build, 47 s on a loaded machine). Under ASan+UBSan
/// the whole set takes 206 s of CPU; the two smallest meshes stand for it there, and the -O2
/// stage runs every scenario.
std::vector<std::string> bundled_scenarios() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(CPSIM_SOURCE_DIR "/scenarios")) {
    if (e.path().extension() != ".yaml") continue;
#ifdef CPSIM_SANITIZED
    const std::string stem = e.path().stem().string();
    if (stem != "quickstart" && stem != "anchor-128k-ulysses") continue;
#endif
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class PrefillScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefillScenario, RunsAsPrefillWithTtftAndKvCache) {
  // The analytic engine keeps the biggest fleets fast; the graph is the same.
  const auto pre = run_json(GetParam(), "--engine analytic --set mode=prefill");
  ASSERT_FALSE(pre.is_null());
  EXPECT_EQ(pre.at("mode"), "prefill");
  EXPECT_EQ(pre.at("scenario").at("mode"), "prefill");
  const double ttft = pre.at("ttft_s").get<double>();
  EXPECT_GT(ttft, 0);
  EXPECT_DOUBLE_EQ(ttft, pre.at("step_time_s").get<double>());
  bool kv = false;
  for (const auto& t : pre.at("memory").at("terms")) {
    const std::string name = t.at("name");
    EXPECT_EQ(name.find("gradient"), std::string::npos) << name;
    EXPECT_EQ(name.find("optimizer"), std::string::npos) << name;
    if (name.rfind("KV cache", 0) == 0 || name == "linear-attention states") kv = kv || t.at("bytes") > 0;
  }
  EXPECT_TRUE(kv);
  EXPECT_GT(pre.at("kv_cache_bytes_per_rank").at("total").get<double>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Bundled, PrefillScenario, ::testing::ValuesIn(bundled_scenarios()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = fs::path(p.param).stem().string();
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(Prefill, EveryBundledScenarioHasItsTest) {
#ifdef CPSIM_SANITIZED
  EXPECT_EQ(bundled_scenarios().size(), 2u);
#else
  EXPECT_GE(bundled_scenarios().size(), 10u);
#endif
}

TEST(Prefill, ForwardOnlyIsWellUnderTheTrainingStep) {
  const std::string s = CPSIM_SOURCE_DIR "/scenarios/anchor-128k-ring-zigzag.yaml";
  const auto pre = run_json(s, "--engine analytic --set mode=prefill");
  const auto train = run_json(s, "--engine analytic");
  ASSERT_FALSE(pre.is_null() || train.is_null());
  // Forward + recomputed forward + backward (2x) against the forward alone.
  EXPECT_LT(pre.at("ttft_s").get<double>(), 0.4 * train.at("step_time_s").get<double>());
  EXPECT_GT(pre.at("ttft_s").get<double>(), 0.15 * train.at("step_time_s").get<double>());
  EXPECT_FALSE(train.contains("ttft_s"));
  EXPECT_EQ(train.at("mode"), "train");
}

TEST(Prefill, SummaryLine) {
  const Output o = run(kCpsim + " run " CPSIM_SOURCE_DIR "/scenarios/quickstart.yaml --engine analytic --set mode=prefill");
  EXPECT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("time to first token"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("KV cache"), std::string::npos) << o.text;
}

TEST(Prefill, AttentionLayerScopeReportsAForwardTime) {
  const auto j = run_json(CPSIM_SOURCE_DIR "/scenarios/anchor-128k-ring-zigzag.yaml",
                          "--set mode=prefill --set simulation.scope=attention-layer");
  ASSERT_FALSE(j.is_null());
  EXPECT_FALSE(j.contains("ttft_s"));
  EXPECT_GT(j.at("forward_time_s").get<double>(), 0);
  const auto train = run_json(CPSIM_SOURCE_DIR "/scenarios/anchor-128k-ring-zigzag.yaml",
                              "--set simulation.scope=attention-layer");
  // Forward alone against forward + backward (2.5x the forward's work).
  EXPECT_LT(j.at("forward_time_s").get<double>(), 0.4 * train.at("step_time_s").get<double>());
}

TEST(Prefill, BadModeNamesTheKey) {
  const Output o = run(kCpsim + " run " CPSIM_SOURCE_DIR "/scenarios/quickstart.yaml --set mode=decode");
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("mode"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("prefill"), std::string::npos) << o.text;
}

TEST(Partition, PerDocumentShardingBalancesTheLognormalMix) {
  const std::string base = kCpsim + " partition --seq 128K --cp 8 --layout zigzag --doc-mean 8K";
  const Output before = run(base);
  const Output after = run(base + " --document-sharding per-document");
  ASSERT_EQ(before.rc, 0) << before.text;
  ASSERT_EQ(after.rc, 0) << after.text;
  auto imbalance = [](const std::string& t) {
    const auto at = t.find("imbalance (max / mean pairs per GPU):");
    return std::stod(t.substr(t.find_first_of("0123456789", at + 30)));
  };
  EXPECT_GT(imbalance(before.text), 1.2);
  EXPECT_LT(imbalance(after.text), 1.01);
  EXPECT_NE(after.text.find("per-document chunks"), std::string::npos);
  EXPECT_EQ(run(base + " --document-sharding per-doc").rc, 2);
  EXPECT_EQ(run(kCpsim + " partition --seq 64 --cp 2 --layout contiguous --mask sliding-window").rc, 2);
  const Output sw = run(kCpsim + " partition --seq 64 --cp 4 --layout contiguous --mask sliding-window --window 16");
  EXPECT_EQ(sw.rc, 0) << sw.text;
  // Blocks of 16, window 16: 136 pairs on the diagonal block and 120 in the one before.
  EXPECT_NE(sw.text.find("256"), std::string::npos) << sw.text;
}

}  // namespace

}  // namespace CPSIM_TEST_TU
