// The lesson's figures (SPEC.md) as tests of the accounting in sim/model/transformer.
#include "model/transformer.hpp"

#include <gtest/gtest.h>

#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {
scenario::ModelSpec anchor() { return fixtures::anchor_model(); }
constexpr double GB = 1e9;
}  // namespace

TEST(LessonMemory, MaterialisedScoresOneHeadOneLayer) {
  EXPECT_NEAR(model::scores_bytes_one_head(32768) / GB, 2.1, 0.05);
  EXPECT_NEAR(model::scores_bytes_one_head(131072) / GB, 34.4, 0.05);
  EXPECT_NEAR(model::scores_bytes_one_head(262144) / GB, 137.4, 0.05);
}

TEST(LessonMemory, FullRecomputeKeepsLayerInputs) {
  EXPECT_NEAR(model::full_recompute_bytes(32768, 1, 5120, 64) / GB, 21.5, 0.05);
  EXPECT_NEAR(model::full_recompute_bytes(131072, 1, 5120, 64) / GB, 85.9, 0.05);
  EXPECT_NEAR(model::full_recompute_bytes(262144, 1, 5120, 64) / GB, 171.8, 0.05);
  // Split over 8 GPUs: 16,384 tokens each.
  EXPECT_NEAR(model::full_recompute_bytes(131072 / 8, 1, 5120, 64) / GB, 10.7, 0.05);
}

TEST(LessonMemory, ModelStatesBeforeSharding) {
  EXPECT_NEAR(model::model_state_bytes(model::total_params(anchor())) / GB, 444.5, 0.05);
}

TEST(LessonMemory, TextStackIsAbout27B) {
  auto m = anchor();
  m.attention_output_gate = true;
  // SPEC.md: the text stack computes about 26.9 B of the 27.78 B total.
  EXPECT_NEAR(model::text_stack_params(m) / 1e9, 26.9, 0.2);
}

TEST(LessonComm, GradientAllReduceAndTensorParallel) {
  const double grads = 2.0 * model::total_params(anchor());
  EXPECT_NEAR(grads / GB, 55.6, 0.05);
  EXPECT_NEAR(model::ring_allreduce_bytes_per_gpu(grads, 8) / GB, 97.2, 0.05);
  EXPECT_NEAR(model::tp_bytes_per_gpu(anchor(), 4096, 8) / GB, 18.8, 0.05);
}

TEST(LessonComm, RingAndUlyssesBytesPerLayer) {
  const auto m = anchor();
  const double block = model::kv_block_bytes(131072 / 8, m.heads_kv, m.head_dim);
  EXPECT_NEAR(block / GB, 0.067, 0.0005);
  EXPECT_NEAR(7 * block / GB, 0.47, 0.005);
  const auto lesson = model::ulysses_bytes_lesson(m, 131072, 8);
  EXPECT_NEAR(lesson.q / GB, 0.176, 0.0005);
  EXPECT_NEAR(lesson.k / GB, 0.029, 0.0005);
  EXPECT_NEAR(lesson.total() / GB, 0.41, 0.005);
  const auto real = model::ulysses_bytes_replicated(m, 131072, 8);
  EXPECT_NEAR(real.k / GB, 0.059, 0.0005);
  EXPECT_NEAR(real.total() / GB, 0.47, 0.005);
}

TEST(LessonState, LinearAttentionStateIndependentOfLength) {
  EXPECT_DOUBLE_EQ(model::linear_state_numbers(anchor()), 786432.0);
}

TEST(Memory, VerdictNamesLargestTermsAndCapacity) {
  scenario::Scenario sc;
  sc.model = anchor();
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  sc.training.seq_len = 131072;
  sc.parallel.cp = 8;
  sc.parallel.zero_stage = 0;
  const auto est = model::estimate_memory(sc);
  // 27.8 B parameters with unsharded Adam states cannot fit one 80 GB GPU.
  EXPECT_FALSE(est.fits);
  EXPECT_NE(est.verdict.find("OOM"), std::string::npos);
  EXPECT_NE(est.verdict.find("optimizer states"), std::string::npos);
  EXPECT_DOUBLE_EQ(est.capacity_bytes, 80e9);
}

TEST(Memory, DoubleRingKeepsTwoMoreKvBlocksThanTheRing) {
  // The block being sent on over the outer ring during a whole outer step and the one arriving
  // for the next, besides the ring's two inner-ring buffers.
  scenario::Scenario sc;
  sc.model = anchor();
  sc.training.seq_len = 131072;
  sc.parallel.cp = 16;
  auto cp_buffers = [&](scenario::AttentionScheme scheme) {
    sc.parallel.attention.scheme = scheme;
    for (const auto& t : model::estimate_memory(sc).terms)
      if (t.name == "context-parallel buffers") return t.bytes;
    return -1.0;
  };
  const double block = model::kv_block_bytes(131072 / 16, sc.model.heads_kv, sc.model.head_dim);
  EXPECT_DOUBLE_EQ(cp_buffers(scenario::AttentionScheme::DoubleRing),
                   cp_buffers(scenario::AttentionScheme::Ring) + 2 * block);
  // One inner ring of all 16 ranks is the plain ring, buffers included.
  sc.parallel.attention.inner_ring = 16;
  EXPECT_DOUBLE_EQ(cp_buffers(scenario::AttentionScheme::DoubleRing),
                   cp_buffers(scenario::AttentionScheme::Ring));
}

}  // namespace CPSIM_TEST_TU
