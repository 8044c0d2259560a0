// The new keys of the modes work (mode, training.loss, attention masks and windows,
// document_sharding, linear_attention a2a): parsed into the spec, refused with file:line:col.
#include <gtest/gtest.h>

#include <string>

#include "scenario/load.hpp"
#include "support/scenario_error.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;
using cpsim::test::scenario_error;

namespace {

const std::string kHead = "platform: dgx-h100\nmodel: qwen3.8-27b\n";

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(ModesKeys, Parse) {
  const Scenario s = parse_scenario(kHead +
                                        "mode: prefill\ntraining: {seq_len: 128K, loss: chunked}\nparallel:\n"
                                        "  cp: 8\n  attention: {document_sharding: whole-sequence}\n"
                                        "  linear_attention: {scheme: a2a}\n",
                                    "s.yaml");
  EXPECT_EQ(s.mode, Mode::Prefill);
  EXPECT_EQ(s.training.loss, Loss::Chunked);
  EXPECT_FALSE(s.parallel.attention.per_document_sharding);
  EXPECT_EQ(s.parallel.linear, LinearScheme::AllToAll);
  const Scenario d = parse_scenario(kHead + "training: {seq_len: 128K}\n", "s.yaml");
  EXPECT_EQ(d.mode, Mode::Train);
  EXPECT_EQ(d.training.loss, Loss::Materialized);
  EXPECT_TRUE(d.parallel.attention.per_document_sharding);
}

TEST(ModesKeys, ModelMaskAndSlidingPattern) {
  const Scenario s = parse_scenario(
      "platform: dgx-h100\nmodel: {preset: qwen3.8-27b, pattern: [linear, sliding, full], "
      "attention: {mask: causal, window: 4K}}\ntraining: {seq_len: 128K}\n",
      "s.yaml");
  ASSERT_EQ(s.model.pattern_sliding.size(), 3u);
  EXPECT_EQ(s.model.pattern_sliding[1], 1);
  EXPECT_EQ(s.model.pattern_sliding[2], 0);
  EXPECT_EQ(s.model.window, 4096);
  const std::string e = scenario_error(
      "platform: dgx-h100\nmodel: {preset: qwen3.8-27b, attention: {mask: sliding-window}}\n"
      "training: {seq_len: 128K}\n");
  EXPECT_TRUE(has(e, "s.yaml:2:")) << e;
  EXPECT_TRUE(has(e, "needs attention.window")) << e;
  const std::string m = scenario_error(
      "platform: dgx-h100\nmodel: {preset: qwen3.8-27b, attention: {mask: banded}}\ntraining: {seq_len: 128K}\n");
  EXPECT_TRUE(has(m, "model.attention.mask")) << m;
  EXPECT_TRUE(has(m, "sliding-window")) << m;
}

TEST(ModesKeys, BadValuesNameTheKey) {
  std::string e = scenario_error(kHead + "mode: decode\ntraining: {seq_len: 128K}\n");
  EXPECT_TRUE(has(e, "s.yaml:3:7: error: mode:")) << e;
  EXPECT_TRUE(has(e, "prefill")) << e;
  e = scenario_error(kHead + "training: {seq_len: 128K, loss: fused}\n");
  EXPECT_TRUE(has(e, "s.yaml:3:33: error: training.loss:")) << e;
  EXPECT_TRUE(has(e, "chunked")) << e;
  e = scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  attention: {document_sharding: thd}\n");
  EXPECT_TRUE(has(e, "parallel.attention.document_sharding")) << e;
  EXPECT_TRUE(has(e, "per-document")) << e;
}

TEST(ModesKeys, LinearA2aHeadsMustDivide) {
  // 16 key heads / tp 4 = 4 per TP rank, not divisible by cp 8.
  const std::string e = scenario_error(
      "platform: {preset: h100-cluster, nodes: 4}\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"
      "parallel:\n  tp: 4\n  cp: 8\n  linear_attention: {scheme: a2a}\n");
  EXPECT_TRUE(has(e, "s.yaml:7:30: error: parallel.linear_attention.scheme:")) << e;
  EXPECT_TRUE(has(e, "heads_k 16")) << e;
  EXPECT_TRUE(has(e, "divisible")) << e;
  EXPECT_EQ(scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: 8\n  linear_attention: {scheme: a2a}\n"),
            "(no error)");
}

}  // namespace CPSIM_TEST_TU
