// training.stack and training.fp8_recipe end to end: the keys' errors, the FP8 quantisation
// kernels and the stacks' memory-bound kernels in a whole layer's time, and `kernels price`
// for a GEMM and a norm.
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

const char* const kLayer = R"(name: llama-layer
platform: dgx-h100
model: llama3-8b
training: {seq_len: 8K, recompute: none}
simulation: {engine: analytic, scope: layer}
)";

nlohmann::json run_json(const std::string& tag, const std::string& sets = "") {
  const auto dir = std::filesystem::temp_directory_path() / ("cpsim_stack_" + tag);
  std::filesystem::create_directories(dir);
  const auto file = dir / "s.yaml";
  std::ofstream(file) << kLayer;
  const auto out = cli::run(cli::kCpsim + " run " + file.string() + " " + sets + " --json " + (dir / "r.json").string());
  EXPECT_EQ(out.rc, 0) << out.text;
  return nlohmann::json::parse(cli::slurp(dir / "r.json"));
}

double category(const nlohmann::json& j, const char* c) {
  return j["time_by_category_s"].contains(c) ? j["time_by_category_s"][c].get<double>() : 0.0;
}

}  // namespace

TEST(StackKey, ErrorsNameTheKey) {
  EXPECT_NE(test::scenario_error("platform: dgx-h100\nmodel: llama3-8b\ntraining: {seq_len: 8K, stack: jax}\n")
                .find("megatron-te"), std::string::npos);
  EXPECT_NE(test::scenario_error("platform: dgx-h100\nmodel: llama3-8b\ntraining: {seq_len: 8K, fp8_recipe: blockwise}\n")
                .find("needs training.precision: fp8"), std::string::npos);
  EXPECT_NE(test::scenario_error("platform: dgx-h100\nmodel: llama3-8b\n"
                                 "training: {seq_len: 8K, precision: fp8, fp8_recipe: mxfp8}\n")
                .find("Blackwell"), std::string::npos);
}

// FP8 runs TE's quantisation kernels before its GEMMs (category quantize); current scaling adds
// amax passes; PyTorch eager spends more on memory-bound kernels than Megatron-TE.
TEST(StackKey, QuantiseKernelsAndEagerKernelsTakeTime) {
  const auto bf16 = run_json("bf16");
  const auto fp8 = run_json("fp8", "--set training.precision=fp8");
  const auto cur = run_json("cur", "--set training.precision=fp8 --set training.fp8_recipe=tensorwise");
  EXPECT_EQ(category(bf16, "quantize"), 0.0);
  EXPECT_GT(category(fp8, "quantize"), 0.0);
  EXPECT_GT(category(cur, "quantize"), category(fp8, "quantize"));
  EXPECT_LT(category(fp8, "gemm"), category(bf16, "gemm"));
  const auto eager = run_json("eager", "--set training.stack=torch-eager");
  auto op = [](const nlohmann::json& j, const char* name) { return j["time_by_op_s"][name].get<double>(); };
  EXPECT_GT(op(eager, "rope"), 2 * op(bf16, "rope"));
  EXPECT_GT(op(eager, "swiglu"), 2 * op(bf16, "swiglu"));
}

TEST(KernelsPrice, GemmAndNormWithTheirSources) {
  const auto dir = std::filesystem::temp_directory_path() / "cpsim_price_gemm";
  std::filesystem::create_directories(dir);
  auto out = cli::run(cli::kCpsim + " kernels price --op gemm --platform dgx-h100 --m 8K --n 4096 --k 4096 "
                      "--dtype fp8 --json " + (dir / "g.json").string());
  ASSERT_EQ(out.rc, 0) << out.text;
  auto j = nlohmann::json::parse(cli::slurp(dir / "g.json"));
  EXPECT_GT(j["tflops"].get<double>(), 500);
  EXPECT_NE(j["source"].get<std::string>().find("tile/wave"), std::string::npos);
  EXPECT_FALSE(j["quantize"].empty());
  out = cli::run(cli::kCpsim + " kernels price --op norm --stack torch-eager --platform dgx-h100 --tokens 8K "
                 "--json " + (dir / "n.json").string());
  ASSERT_EQ(out.rc, 0) << out.text;
  j = nlohmann::json::parse(cli::slurp(dir / "n.json"));
  EXPECT_EQ(j["source"].get<std::string>().rfind("measured", 0), 0u);
  out = cli::run(cli::kCpsim + " kernels price --op gemm --platform dgx-h100 --m 8K --n 4096 --k 4096 --layout XX");
  EXPECT_EQ(out.rc, 2);
  EXPECT_NE(out.text.find("--layout"), std::string::npos);
}

}  // namespace CPSIM_TEST_TU
