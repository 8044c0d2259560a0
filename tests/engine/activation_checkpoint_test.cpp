// Activation checkpointing policies in the graph and in time: torchtitan's op policy reruns
// part of each block's forward, its layer policy every Nth block whole, Megatron's selective
// policy the core attention's forward; under FSDP2 a recomputed block is gathered once for
// its backward.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "support/built_step.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

struct Built {
  std::set<std::string> recomputed;  ///< names of the ops labelled _recompute
  std::set<int> recomputed_layers;
  int sp_allgathers = 0;             ///< SP all-gather ops (each rank's share of each collective)
  int attention_fwd = 0;             ///< forward attention kernels (every ring step's)
  int zero3_gathers = 0;             ///< ZeRO-3 weight all-gather ops, any pass
  int zero3_fwd_gathers = 0;         ///< of which labelled with the forward
  double step_s = 0;
};

Built run(const scenario::Scenario& sc) {
  const test::BuiltStep step(sc);
  const schedule::TaskGraph& g = step.g;
  Built r;
  for (schedule::OpId id = 0; id < g.size(); ++id) {
    const std::string n = g.str(g.op(id).label.name);
    if (n.size() > 10 && n.compare(n.size() - 10, 10, "_recompute") == 0) {
      r.recomputed.insert(n);
      r.recomputed_layers.insert(g.op(id).label.layer);
    }
    if (n == "sp_allgather") ++r.sp_allgathers;
    const auto& l = g.op(id).label;
    if (g.str(l.category) == "attention" && l.phase == schedule::Phase::Forward) ++r.attention_fwd;
    if (n == "zero3_allgather_params") {
      ++r.zero3_gathers;
      if (l.phase == schedule::Phase::Forward) ++r.zero3_fwd_gathers;
    }
  }
  r.step_s = step.analytic_s();
  return r;
}

/// A Llama-shaped dense model (GQA, SwiGLU) on one node at TP 8 with sequence parallelism.
scenario::Scenario dense_tp8() {
  auto sc = test::llama8b_tp8_job();
  sc.training.seq_len = 8192;
  sc.training.micro_batches = 1;
  sc.parallel.dp = 1;
  sc.platform = test::dgx_h100(1);
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  return sc;
}

}  // namespace

TEST(TorchtitanOpSacTime, RerunsTheEvenMatmulsAndTheAllGathersNotAttention) {
  auto sc = dense_tp8();
  sc.training.recompute = scenario::Recompute::None;
  const Built none = run(sc);
  sc.training.recompute = scenario::Recompute::Full;
  const Built full = run(sc);
  sc.training.recompute = scenario::Recompute::Selective;
  sc.training.selective_ac = scenario::TrainingSpec::SelectiveAc::Op;
  const Built op = run(sc);
  // wk, wo and w3 run again; wq, wv, w1, w2 and SDPA are replayed from what was saved.
  EXPECT_EQ(op.recomputed, (std::set<std::string>{"k_proj_recompute", "out_proj_recompute", "mlp_gate_recompute"}));
  EXPECT_EQ(op.recomputed_layers, (std::set<int>{0, 1, 2, 3}));
  EXPECT_TRUE(none.recomputed.empty());
  // Two SP all-gathers per block rerun (not in torchtitan's save list); full recompute reruns them too.
  EXPECT_EQ(op.sp_allgathers, full.sp_allgathers);
  EXPECT_GT(op.sp_allgathers, none.sp_allgathers);
  // Dearer than keeping everything, cheaper than rerunning the whole forward with attention.
  EXPECT_GT(op.step_s, none.step_s);
  EXPECT_LT(op.step_s, full.step_s);
}

TEST(TorchtitanLayerSacTime, RecomputesEveryNthBlockWhole) {
  auto sc = dense_tp8();
  sc.training.recompute = scenario::Recompute::Selective;
  sc.training.selective_ac = scenario::TrainingSpec::SelectiveAc::Layer;
  sc.training.selective_ac_every = 2;
  const Built half = run(sc);
  EXPECT_EQ(half.recomputed_layers, (std::set<int>{1, 3}));
  EXPECT_TRUE(half.recomputed.count("qkv_proj_recompute"));
  sc.training.recompute = scenario::Recompute::Full;
  const Built full = run(sc);
  EXPECT_LT(half.step_s, full.step_s);
}

TEST(MegatronSelectiveTime, RerunsTheCoreAttentionForwardOnly) {
  // TP 4 x CP 2 ring: the rerun is every ring step's forward kernel again.
  auto sc = dense_tp8();
  sc.parallel.tp = 4;
  sc.parallel.cp = 2;
  sc.training.recompute = scenario::Recompute::None;
  const Built none = run(sc);
  sc.training.recompute = scenario::Recompute::Selective;
  const Built sel = run(sc);
  sc.training.recompute = scenario::Recompute::Full;
  const Built full = run(sc);
  ASSERT_GT(none.attention_fwd, 0);
  EXPECT_EQ(sel.attention_fwd, 2 * none.attention_fwd);
  EXPECT_EQ(sel.attention_fwd, full.attention_fwd);
  // No projection, norm or SP collective runs again.
  EXPECT_TRUE(sel.recomputed.empty());
  EXPECT_EQ(sel.sp_allgathers, none.sp_allgathers);
  // Dearer than keeping everything by the attention forwards, cheaper than rerunning all.
  EXPECT_GT(sel.step_s, none.step_s);
  EXPECT_LT(sel.step_s, full.step_s);
}

TEST(Fsdp2RecomputeGather, OneGatherPerBlockForItsRecomputeAndBackward) {
  auto sc = test::small_dp_job(scenario::Symmetry::Auto);
  sc.platform = test::dgx_h100(1);
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  sc.parallel.cp = 2;
  sc.parallel.dp = 4;
  sc.parallel.zero_stage = 3;
  sc.training.recompute = scenario::Recompute::None;
  const Built none = run(sc);
  sc.training.recompute = scenario::Recompute::Full;
  const Built full = run(sc);
  sc.training.recompute = scenario::Recompute::Selective;
  sc.training.selective_ac = scenario::TrainingSpec::SelectiveAc::Op;
  const Built op = run(sc);
  ASSERT_GT(none.zero3_gathers, 0);
  // A forward gather and (but for the last block, which keeps its weights) a backward gather
  // per block and micro-batch, recomputed or not: the rerun happens inside the backward, after
  // FSDP2's pre-backward unshard.
  EXPECT_EQ(full.zero3_gathers, none.zero3_gathers);
  EXPECT_EQ(op.zero3_gathers, none.zero3_gathers);
  EXPECT_EQ(full.zero3_fwd_gathers, none.zero3_fwd_gathers);
  EXPECT_LT(none.zero3_fwd_gathers, none.zero3_gathers);
}

}  // namespace CPSIM_TEST_TU
