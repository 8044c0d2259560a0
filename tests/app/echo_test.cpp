// The result JSON's `scenario` echo is a scenario the loader reads back: for every bundled
// scenario, `cpsim run <its echo>` gives the same step time, to the bit, and the same echo
// (analytic engine, to keep 16 pairs of runs fast; the echo does not depend on the engine).
// The two large meshes without pipeline stages run one layer (`simulation.scope: layer`,
// echoed like every other key; their whole step takes 20 s twice on a loaded 2-core machine);
// the pipelined ones (Llama-3 405B: 90 s, DeepSeek-V3: 30 s) run whole, as a layer holds
// fewer layers than their pipeline chunks, on a smaller cut (below).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

namespace fs = std::filesystem;
using namespace cpsim::cli;

namespace {

std::vector<std::string> bundled() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(CPSIM_SOURCE_DIR "/scenarios"))
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

class EchoTest : public cpsim::test::TempDir, public ::testing::WithParamInterface<std::string> {};

TEST_P(EchoTest, ReloadsToTheSameRun) {
  const bool large = GetParam().starts_with("llama3-") && GetParam() != "llama3-8b-128k-4nodes";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // 10-20x slower under sanitizers: the meshes would take many minutes (as in the golden tests).
  if (large || GetParam().starts_with("deepseek")) GTEST_SKIP() << "large mesh under a sanitizer";
#endif
  const fs::path first = dir_ / "first.json", echo = dir_ / "echo.yaml", second = dir_ / "second.json";
  // Smaller but still pipelined (the echo carries an override like any key): DeepSeek-V3 with
  // one micro-batch; Llama-3 405B, whose interleaved schedule needs 16, with a 2-way ring.
  std::string cut;
  if (large && GetParam().starts_with("llama3-70b")) cut = " --set simulation.scope=layer";
  if (GetParam().starts_with("deepseek")) cut = " --set training.micro_batches=1";
  if (GetParam().starts_with("llama3-405b")) cut = " --set parallel.cp=2 --set parallel.dp=64";
  Output o = run(kCpsim + " run " + CPSIM_SOURCE_DIR "/scenarios/" + GetParam() + ".yaml --engine analytic -q --json " +
                 first.string() + cut);
  ASSERT_EQ(o.rc, 0) << o.text;
  const auto a = nlohmann::json::parse(slurp(first));
  write(echo, a["scenario"].dump(2));  // YAML reads JSON
  // From another directory: nothing in the echo may depend on where the scenario file was.
  o = run("cd " + dir_.string() + " && " + kCpsim + " run echo.yaml -q --json " + second.string());
  ASSERT_EQ(o.rc, 0) << o.text << "\n--- echo:\n" << a["scenario"].dump(2);
  const auto b = nlohmann::json::parse(slurp(second));
  EXPECT_EQ(a["step_time_s"].get<double>(), b["step_time_s"].get<double>());
  EXPECT_EQ(a["memory"], b["memory"]);
  EXPECT_EQ(a["scenario"], b["scenario"]) << "the echo of the echo differs";
  // The keys the loader's defaults would hide if they were left out.
  for (const char* key : {"mode", "platform", "model", "training", "parallel", "simulation", "cost", "perturb"})
    EXPECT_TRUE(a["scenario"].contains(key)) << key;
  for (const char* key : {"loss", "precision", "recompute"})
    EXPECT_TRUE(a["scenario"]["training"].contains(key)) << key;
  for (const char* key : {"ep", "expert_tp", "linear_attention"})
    EXPECT_TRUE(a["scenario"]["parallel"].contains(key)) << key;
  EXPECT_TRUE(a["scenario"]["parallel"]["attention"].contains("document_sharding"));
  EXPECT_TRUE(a["scenario"]["platform"].contains("runtime"));
  EXPECT_TRUE(a["scenario"]["cost"].contains("attention_kernel"));
}

// The memory keys that refine a mode (partial recomputation, offloads, the allocator) echo only
// when set, and the echo reloads to the same step and memory.
class EchoKeysTest : public cpsim::test::TempDir {};

TEST_F(EchoKeysTest, RecomputeOffloadAndAllocatorKeysSurviveTheEcho) {
  const std::string base = kCpsim + " run " CPSIM_SOURCE_DIR "/scenarios/llama3-8b-128k-4nodes.yaml --engine analytic" +
                           " --set simulation.scope=layer -q --json ";
  for (const std::string sets :
       {" --set training.recompute_method=block --set training.recompute_layers=2"
        " --set training.optimizer_cpu_offload=true --set training.optimizer_offload_fraction=0.5"
        " --set memory.allocator.fragmentation=0.1",
        " --set training.recompute=none --set training.offload_layers=1",
        " --set training.recompute=selective --set training.selective_ac_option=2"
        " --set memory.allocator.expandable_segments=true"}) {
    const fs::path first = dir_ / "first.json", echo = dir_ / "echo.yaml", second = dir_ / "second.json";
    Output o = run(base + first.string() + sets);
    ASSERT_EQ(o.rc, 0) << sets << "\n" << o.text;
    const auto a = nlohmann::json::parse(slurp(first));
    write(echo, a["scenario"].dump(2));
    o = run(kCpsim + " run " + echo.string() + " -q --json " + second.string());
    ASSERT_EQ(o.rc, 0) << o.text << "\n--- echo:\n" << a["scenario"].dump(2);
    const auto b = nlohmann::json::parse(slurp(second));
    EXPECT_EQ(a["step_time_s"].get<double>(), b["step_time_s"].get<double>()) << sets;
    EXPECT_EQ(a["memory"], b["memory"]) << sets;
    EXPECT_EQ(a["scenario"], b["scenario"]) << sets;
  }
}

// HSDP's replicate degree reloads from the echo to the same run (and changes the run).
TEST_F(EchoKeysTest, HsdpReplicateDegreeSurvivesTheEcho) {
  const std::string base = kCpsim + " run " CPSIM_SOURCE_DIR "/scenarios/llama3-8b-8k-torchtitan.yaml --engine analytic"
                           " -q --json ";
  const fs::path fsdp = dir_ / "fsdp.json", first = dir_ / "first.json", echo = dir_ / "echo.yaml",
                 second = dir_ / "second.json";
  Output o = run(base + fsdp.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  o = run(base + first.string() + " --set parallel.dp_replicate=2");
  ASSERT_EQ(o.rc, 0) << o.text;
  const auto a = nlohmann::json::parse(slurp(first));
  EXPECT_EQ(a["scenario"]["parallel"]["dp_replicate"], 2);
  EXPECT_NE(a["memory"], nlohmann::json::parse(slurp(fsdp))["memory"]);
  write(echo, a["scenario"].dump(2));
  o = run(kCpsim + " run " + echo.string() + " -q --json " + second.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  const auto b = nlohmann::json::parse(slurp(second));
  EXPECT_EQ(a["step_time_s"].get<double>(), b["step_time_s"].get<double>());
  EXPECT_EQ(a["memory"], b["memory"]);
  EXPECT_EQ(a["scenario"], b["scenario"]);
}

INSTANTIATE_TEST_SUITE_P(Bundled, EchoTest, ::testing::ValuesIn(bundled()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace

}  // namespace CPSIM_TEST_TU
