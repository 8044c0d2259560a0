// torchtitan's activation checkpointing policies (model/activation_checkpoint.hpp): what the op
// and layer policies keep, and which layers they recompute.
#include "model/activation_checkpoint.hpp"

#include <gtest/gtest.h>

#include "model/transformer.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

scenario::Scenario llama70b(int tp) {
  scenario::Scenario sc;
  sc.model = fixtures::llama3_70b_model();
  sc.training.seq_len = 8192;
  sc.parallel.tp = tp;
  sc.training.recompute = scenario::Recompute::Selective;
  return sc;
}

}  // namespace

TEST(TorchtitanOpSac, SavesTheOddMatmulsSdpaAndReduceScatters) {
  auto sc = llama70b(1);
  sc.training.selective_ac = scenario::TrainingSpec::SelectiveAc::Op;
  const double s = 8192, h = 8192, kv = 1024, f = 28672, heads = 64;
  // Input, wq, wv, SDPA output (+ fp32 LSE), w1, w2: no reduce-scatter without TP.
  const double one = s * (2 * h + 2 * h + 2 * kv + 2 * h + 4 * heads + 2 * f + 2 * h);
  EXPECT_NEAR(model::op_sac_layer_bytes(sc), one, 1);
  const double full = 34 * s * h;
  EXPECT_NEAR(model::stage_activation_bytes(sc, 80, 1), 80 * one + (full - one), 1);
  // TP 8 with SP: the input and the reduce-scatter outputs are the rank's sequence shard, the
  // column-parallel outputs its heads, w2's partial sum the whole sequence.
  auto tp = llama70b(8);
  tp.training.selective_ac = scenario::TrainingSpec::SelectiveAc::Op;
  const double shard = s * (2 * h / 8 + 2 * h / 8 + 2 * 128 + 2 * h / 8 + 4 * 8 + 2 * f / 8 + 2 * h + 4 * h / 8);
  EXPECT_NEAR(model::op_sac_layer_bytes(tp), shard, 1);
  // It saves less than keeping everything, more than keeping inputs only.
  auto none = sc;
  none.training.recompute = scenario::Recompute::None;
  auto all = sc;
  all.training.recompute = scenario::Recompute::Full;
  EXPECT_LT(model::stage_activation_bytes(sc, 80, 1), model::stage_activation_bytes(none, 80, 1));
  EXPECT_GT(model::stage_activation_bytes(sc, 80, 1), model::stage_activation_bytes(all, 80, 1));
  // Every block reruns part of its forward; none reruns it whole.
  EXPECT_TRUE(model::layer_op_sac(sc, 0));
  EXPECT_FALSE(model::layer_recomputed(sc, 0));
  EXPECT_FALSE(model::core_attention_recomputed(sc, 0));
  EXPECT_DOUBLE_EQ(model::recomputed_fraction(sc), 0.0);
}

TEST(TorchtitanLayerSac, CheckpointsEveryNthBlockOfAStage) {
  auto sc = llama70b(1);
  sc.training.selective_ac = scenario::TrainingSpec::SelectiveAc::Layer;
  sc.training.selective_ac_every = 2;
  // torchtitan counts blocks from 1: the 2nd, 4th, ... are wrapped.
  EXPECT_FALSE(model::layer_recomputed(sc, 0));
  EXPECT_TRUE(model::layer_recomputed(sc, 1));
  EXPECT_FALSE(model::layer_recomputed(sc, 78));
  EXPECT_TRUE(model::layer_recomputed(sc, 79));
  EXPECT_DOUBLE_EQ(model::recomputed_fraction(sc), 0.5);
  EXPECT_FALSE(model::layer_op_sac(sc, 0));
  const double s = 8192, h = 8192;
  EXPECT_NEAR(model::stage_activation_bytes(sc, 80, 1), 40 * 2 * s * h + 40 * 34 * s * h + 34 * s * h, 1);
  // Under PP 4 (20 layers a stage) each stage counts its own: stage 1 starts at layer 20.
  sc.parallel.pp = 4;
  sc.training.selective_ac_every = 3;
  EXPECT_FALSE(model::layer_recomputed(sc, 20));
  EXPECT_TRUE(model::layer_recomputed(sc, 22));
  EXPECT_NEAR(model::recomputed_fraction(sc), 4 * 6 / 80.0, 1e-12);
  // Megatron's selective (core attention) recomputes no layer whole.
  sc.training.selective_ac = scenario::TrainingSpec::SelectiveAc::CoreAttention;
  EXPECT_FALSE(model::layer_recomputed(sc, 22));
}

}  // namespace CPSIM_TEST_TU
