// `cpsim import hf` and `cpsim import megatron` with the built binary: the YAML they write is
// accepted by `cpsim check` (and runs), what they did not use is reported on stderr, and bad
// input exits 2 with its location.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

namespace fs = std::filesystem;
using namespace cpsim::cli;

namespace {

const std::string kHf = CPSIM_SOURCE_DIR "/tests/data/hf/";

class Import : public testing::Test {
 protected:
  void SetUp() override {
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(testing::TempDir()) / (std::string("cpsim-import-") + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

}  // namespace

TEST_F(Import, HfModelFileIsCheckedAndRun) {
  const Output o = run(kCpsim + " import hf " + kHf + "qwen3.5-27b-like/config.json -o " + path("m.yaml"));
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("note: ignored fields ("), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("text_config.rope_theta"), std::string::npos) << o.text;
  const std::string model = slurp(path("m.yaml"));
  EXPECT_NE(model.find("pattern: [linear, linear, linear, full]"), std::string::npos) << model;
  EXPECT_NE(model.find("# ignored: "), std::string::npos) << model;
  write(path("s.yaml"),
        "platform: dgx-h100\nmodel: m.yaml\ntraining: {seq_len: 16K}\nparallel: {cp: 8, attention: {scheme: ring, "
        "layout: zigzag}}\nsimulation: {engine: analytic, scope: attention-layer}\n");
  const Output c = run(kCpsim + " check " + path("s.yaml"));
  EXPECT_EQ(c.rc, 0) << c.text;
  EXPECT_NE(c.text.find("ok (qwen3_5 on dgx-h100, 8 GPUs)"), std::string::npos) << c.text;
  const Output r = run(kCpsim + " run -q " + path("s.yaml"));
  EXPECT_EQ(r.rc, 0) << r.text;
}

TEST_F(Import, ScenarioWithAnHfModel) {
  write(path("s.yaml"), "platform: {preset: h100-cluster, nodes: 4}\nmodel: hf:" + kHf +
                            "llama3-8b/config.json\ntraining: {seq_len: 128K}\nparallel: {tp: 2, cp: 16}\n");
  const Output c = run(kCpsim + " check " + path("s.yaml"));
  EXPECT_EQ(c.rc, 0) << c.text;
  EXPECT_NE(c.text.find("ok (llama on h100-cluster, 32 GPUs)"), std::string::npos) << c.text;
}

TEST_F(Import, MegatronAcceptanceCommandPassesCheck) {
  const Output o = run(kCpsim + " import megatron -o " + path("s.yaml") +
                       " -- --tensor-model-parallel-size 2 --context-parallel-size 4 --cp-comm-type a2a+p2p"
                       " --hierarchical-context-parallel-sizes 2 2 --seq-length 131072 --micro-batch-size 1"
                       " --global-batch-size 8 --sequence-parallel --recompute-granularity full"
                       " --use-distributed-optimizer --bf16 --model qwen3.8-27b --platform dgx-h100"
                       " --lr 3e-4 --save /ckpt");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("note: arguments not understood (2): --lr 3e-4, --save /ckpt"), std::string::npos) << o.text;
  const std::string s = slurp(path("s.yaml"));
  EXPECT_NE(s.find("    scheme: usp\n    ulysses_degree: 2\n"), std::string::npos) << s;
  const Output c = run(kCpsim + " check " + path("s.yaml"));
  EXPECT_EQ(c.rc, 0) << c.text;
  EXPECT_NE(c.text.find("ok (qwen3.8-27b on dgx-h100, 8 GPUs)"), std::string::npos) << c.text;
}

TEST_F(Import, MegatronHfModelPathIsRelativeToTheOutput) {
  fs::create_directories(path("out"));
  const Output o = run("cd " + dir_.string() + " && " + kCpsim + " import megatron -o out/s.yaml -- --model hf:" +
                       kHf + "llama3-8b/config.json --seq-length 65536 --context-parallel-size 8 --platform dgx-h100");
  ASSERT_EQ(o.rc, 0) << o.text;
  const Output c = run(kCpsim + " check " + path("out/s.yaml"));
  EXPECT_EQ(c.rc, 0) << c.text << slurp(path("out/s.yaml"));
}

TEST_F(Import, BadInputExitsTwoWithItsLocation) {
  write(path("bad.json"), "{\n  \"model_type\": \"llama\"\n  \"hidden_size\": 1\n}\n");
  const Output b = run(kCpsim + " import hf " + path("bad.json"));
  EXPECT_EQ(b.rc, 2) << b.text;
  EXPECT_NE(b.text.find("bad.json:3:3: error: invalid JSON"), std::string::npos) << b.text;
  const Output m = run(kCpsim + " import megatron -- --context-parallel-size 4 --cp-comm-type ring");
  EXPECT_EQ(m.rc, 2) << m.text;
  EXPECT_NE(m.text.find("<megatron arguments>:1:42: error: --cp-comm-type: expected p2p, a2a, allgather or a2a+p2p"),
            std::string::npos)
      << m.text;
}

}  // namespace CPSIM_TEST_TU
