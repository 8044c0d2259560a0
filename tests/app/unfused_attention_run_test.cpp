// `cost.attention_kernel: unfused` end to end: a run prices attention as the unfused path
// (slower than FlashAttention-2, its summary naming what priced it), `cpsim memory` counts the
// scores as their own term growing as s^2, `kernels price` lists the parts, and the refusals.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.hpp"
#include "support/scenario_error.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

// One Llama-2 7B layer at 8K on one H200, no recomputation (the scores stay for the backward).
const char* const kLayer = R"(name: unfused-layer
platform: hgx-h200
model: llama2-7b
training: {seq_len: 8K, recompute: none, stack: megatron-te}
parallel: {tp: 1, cp: 1, dp: 1}
cost: {attention_kernel: unfused}
simulation: {engine: analytic, scope: layer}
)";

struct Out {
  nlohmann::json j;
  std::string text;
};

Out run(const std::string& cmd, const std::string& tag, const std::string& sets = "") {
  const auto dir = std::filesystem::temp_directory_path() / ("cpsim_unfused_" + tag);
  std::filesystem::create_directories(dir);
  const auto file = dir / "s.yaml";
  std::ofstream(file) << kLayer;
  const auto out = cli::run(cli::kCpsim + " " + cmd + " " + file.string() + " " + sets + " --json " +
                            (dir / "r.json").string());
  EXPECT_EQ(out.rc, 0) << out.text;
  return {nlohmann::json::parse(cli::slurp(dir / "r.json")), out.text};
}

double scores_term(const nlohmann::json& memory) {
  for (const auto& t : memory["terms"])
    if (t["name"] == "unfused attention scores (s x s, kept for backward)") return t["bytes"].get<double>();
  return 0;
}

}  // namespace

TEST(UnfusedAttentionRun, SlowerThanFa2At8kAndNamesWhatPricedIt) {
  const Out unfused = run("run", "run");
  const Out fa2 = run("run", "run_fa2", "--set cost.attention_kernel=fa2");
  const double a_unf = unfused.j["time_by_category_s"]["attention"].get<double>();
  const double a_fa2 = fa2.j["time_by_category_s"]["attention"].get<double>();
  EXPECT_GT(a_unf, 2 * a_fa2);
  EXPECT_GT(unfused.j["step_time_s"].get<double>(), fa2.j["step_time_s"].get<double>());
  // The summary's "kernel costs from" line names the path's pricing, never bare roofline.
  EXPECT_NE(unfused.text.find("attention: derived (unfused: BF16 batched GEMMs by the GEMM cost"), std::string::npos)
      << unfused.text;
  EXPECT_EQ(unfused.text.find("attention=roofline"), std::string::npos) << unfused.text;
  // torch-eager runs PyTorch's math SDPA: FP32 GEMMs, slower still.
  const Out math = run("run", "run_math", "--set training.stack=torch-eager");
  EXPECT_GT(math.j["time_by_category_s"]["attention"].get<double>(), a_unf);
  EXPECT_NE(math.text.find("unfused: math SDPA"), std::string::npos) << math.text;
}

TEST(UnfusedAttentionRun, MemoryCountsTheScoresAsTheirOwnTermGrowingAsSSquared) {
  // At 2K and 4K Megatron's fused softmax keeps 2 B per score: 4x the bytes for 2x the tokens.
  const double s2 = scores_term(run("memory", "mem2k", "--set training.seq_len=2K").j["peak"]);
  const double s4 = scores_term(run("memory", "mem4k", "--set training.seq_len=4K").j["peak"]);
  EXPECT_NEAR(s4, 32 * 2.0 * 32 * 4096.0 * 4096, 1e3);  // 32 layers x 2 B x 32 heads x s^2
  EXPECT_NEAR(s4 / s2, 4.0, 1e-9);
  EXPECT_EQ(scores_term(run("memory", "mem_fa2", "--set cost.attention_kernel=fa2").j["peak"]), 0);
}

TEST(UnfusedAttentionRun, KernelsPriceListsTheParts) {
  const auto dir = std::filesystem::temp_directory_path() / "cpsim_unfused_price";
  std::filesystem::create_directories(dir);
  const auto out = cli::run(cli::kCpsim +
                            " kernels price --platform hgx-h200 --impl unfused --stack torch-eager --q 4K --heads 32"
                            " --mask causal --direction fwdbwd --json " + (dir / "p.json").string());
  ASSERT_EQ(out.rc, 0) << out.text;
  const auto j = nlohmann::json::parse(cli::slurp(dir / "p.json"));
  int gemms = 0;
  for (const char* d : {"fwd", "bwd"})
    for (const auto& p : j[d]["parts"]) {
      gemms += p["kind"] == "gemm";
      EXPECT_FALSE(p["source"].get<std::string>().empty());
    }
  EXPECT_EQ(gemms, 6);
  EXPECT_EQ(j["variant"], "PyTorch math SDPA (FP32)");
  EXPECT_NE(out.text.find("softmax (FP32)"), std::string::npos) << out.text;
}

// Past 4096 keys Megatron's fused softmax kernel refuses the shape: the summary and -v say
// that the FP32 torch softmax priced it.
TEST(UnfusedAttentionRun, MegatronPast4kKeysRunsTheFp32SoftmaxAndSaysSo) {
  const Out o = run("run", "run16k", "--set training.seq_len=16K -v");
  EXPECT_NE(o.text.find("FusedScaleMaskSoftmax kernel refuses the shape"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("attention: derived (unfused: BF16 batched GEMMs by the GEMM cost + FP32 torch softmax"),
            std::string::npos)
      << o.text;
}

TEST(UnfusedAttentionRun, RefusedUnderContextParallelism) {
  const std::string e = test::scenario_error(
      "platform: dgx-h100\nmodel: llama3-8b\ntraining:\n  seq_len: 8K\nparallel:\n  cp: 2\ncost:\n"
      "  attention_kernel: unfused\n");
  EXPECT_NE(e.find("s.yaml:8:"), std::string::npos) << e;
  EXPECT_NE(e.find("without context parallelism"), std::string::npos) << e;
}

// FlashAttention's head-dim limit: 512 is refused with fa2, priced with unfused.
TEST(UnfusedAttentionRun, HeadDimPastFlashAttentionsLimit) {
  const std::string model =
      "platform: hgx-h200\nmodel: {name: wide, layers: 2, hidden: 4096, heads_q: 8, heads_kv: 8, head_dim: 512, "
      "ffn_hidden: 8192, vocab: 32000}\ntraining:\n  seq_len: 4K\ncost:\n  attention_kernel: ";
  const std::string e = test::scenario_error(model + "fa2\n");
  EXPECT_NE(e.find("s.yaml:6:"), std::string::npos) << e;
  EXPECT_NE(e.find("fa2 takes head dims up to 256"), std::string::npos) << e;
  EXPECT_EQ(test::scenario_error(model + "unfused\n"), "(no error)");
}

}  // namespace CPSIM_TEST_TU
