// Scope attention-layer simulates one attention layer, so its memory verdict is that layer's
// working set (attention_layer_memory), the same in the summary, the JSON and results.csv; the
// whole step's memory stays with `cpsim memory` and the other scopes.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "app/sweep/results_csv.hpp"
#include "support/cli_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kAnchor = CPSIM_SOURCE_DIR "/scenarios/anchor-128k-ring-zigzag.yaml";

class ScopeMemoryTest : public cpsim::test::CliDir {
 protected:
  json run_json(const std::string& sets, const std::string& name, std::string* summary = nullptr) {
    const std::string path = (dir_ / name).string();
    const Output o = run(kCpsim + " run " + kAnchor + " --engine analytic " + sets + " --json " + path);
    EXPECT_EQ(o.rc, 0) << o.text;
    if (summary) *summary = o.text;
    return json::parse(slurp(path));
  }
};

TEST_F(ScopeMemoryTest, AnAttentionLayerHasItsOwnMemoryNotTheSteps) {
  // 256K tokens on 8 GPUs: the step is out of memory (135.6 GB of 85.9), one attention layer
  // of it is not.
  std::string summary;
  const json al = run_json("--set simulation.scope=attention-layer --set training.seq_len=256K", "al.json", &summary);
  const json step = run_json("--set training.seq_len=256K --set simulation.scope=layer", "layer.json");
  const auto& mem = al["memory"];
  SCOPED_TRACE(mem.dump(1));
  EXPECT_FALSE(step["memory"]["fits"].get<bool>());
  EXPECT_TRUE(mem["fits"].get<bool>());
  EXPECT_LT(mem["peak_bytes_per_rank"].get<double>(), step["memory"]["peak_bytes_per_rank"].get<double>() / 10);
  EXPECT_NE(mem["verdict"].get<std::string>().find("one attention layer"), std::string::npos);
  // The same verdict in the summary, and no step-level advice on an attention layer.
  EXPECT_NE(summary.find("memory per GPU              " + mem["verdict"].get<std::string>()), std::string::npos) << summary;
  // The terms: Q, O (bf16) and K, V of the GPU's 32K tokens with the fp32 LSE; the backward's
  // dO, dK, dV and the fp32 dQ; the CP buffers as the step counts them; the CUDA context, NCCL's
  // buffers and the cuBLAS workspace. The peak is what the caching allocator reserves for them.
  const auto& m = al["scenario"]["model"];
  const double tokens = 262144 / 8, hq = m["heads_q"], hkv = m["heads_kv"], d = m["head_dim"];
  const double q = tokens * hq * d * 2, kv = tokens * 2 * hkv * d * 2, lse = tokens * hq * 4;
  double cp = -1;
  for (const auto& t : step["memory"]["terms"])
    if (t["name"] == "context-parallel buffers") cp = t["bytes"];
  ASSERT_GT(cp, 0);
  auto terms_of = [](const json& memory) {
    std::map<std::string, double> bytes;
    double reserved = 0;
    for (const auto& t : memory["terms"]) {
      bytes[t["name"].get<std::string>()] = t["bytes"].get<double>();
      EXPECT_GE(t["reserved_bytes"].get<double>(), t["bytes"].get<double>()) << t["name"];
      reserved += t["reserved_bytes"].get<double>();
    }
    EXPECT_DOUBLE_EQ(reserved, memory["peak_bytes_per_rank"].get<double>());
    return bytes;
  };
  auto b = terms_of(mem);
  EXPECT_DOUBLE_EQ(b["attention inputs and output (Q, K, V, O, LSE)"], 2 * q + kv + lse);
  EXPECT_DOUBLE_EQ(b["attention gradients (dO, dQ fp32, dK, dV)"], 3 * q + kv + lse);
  EXPECT_DOUBLE_EQ(b["context-parallel buffers"], cp);
  EXPECT_DOUBLE_EQ(b["CUDA context"], 400e6);
  // Prefill: no gradients.
  const json pf = run_json("--set simulation.scope=attention-layer --set training.seq_len=256K --set mode=prefill", "pf.json");
  b = terms_of(pf["memory"]);
  EXPECT_EQ(b.count("attention gradients (dO, dQ fp32, dK, dV)"), 0u);
  EXPECT_DOUBLE_EQ(b["attention inputs and output (Q, K, V, O, LSE)"], 2 * q + kv + lse);
}

TEST_F(ScopeMemoryTest, SweepRowsCarryTheAttentionLayersVerdict) {
  write(dir_ / "sweep.yaml", "base: " + kAnchor + "\naxes:\n  simulation.scope: [attention-layer]\n"
                             "  simulation.engine: [analytic]\n  training.seq_len: [128K, 256K]\n");
  const Output o = run(kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " -q -o " + (dir_ / "out").string());
  ASSERT_EQ(o.rc, 0) << o.text;
  const auto rows = cpsim::app::sweep::read_rows((dir_ / "out" / "results.csv").string());
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    SCOPED_TRACE(r.id);
    const json j = json::parse(slurp(dir_ / "out" / "runs" / (r.id + ".json")));
    EXPECT_EQ(r.cells.at("fits"), "true");
    EXPECT_EQ(r.cells.at("fits"), j["memory"]["fits"].get<bool>() ? "true" : "false");
    char gb[32];
    std::snprintf(gb, sizeof gb, "%.4f", j["memory"]["peak_bytes_per_rank"].get<double>() * 1e-9);
    EXPECT_EQ(r.cells.at("peak_mem_gb"), gb);
  }
}

}  // namespace

}  // namespace CPSIM_TEST_TU
