// The backward's transient peak (sim/model/backward_peak): the loss's buffers or one block's
// working set, term by term, and which of them a rank class holds at its peak.
#include "model/backward_peak.hpp"

#include <gtest/gtest.h>

#include "model/memory.hpp"
#include "support/fixtures.hpp"
#include "support/memory_terms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

/// Llama 3 8B's geometry at 8K tokens, one sequence per GPU, FSDP over 8 H100.
scenario::Scenario llama3_8b(scenario::Stack stack) {
  scenario::Scenario sc;
  auto& m = sc.model;
  m.name = "llama3-8b";
  m.layers = 32;
  m.hidden = 4096;
  m.heads_q = 32;
  m.heads_kv = 8;
  m.head_dim = 128;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  sc.platform = fixtures::nvswitch_node(8, 450e9, 1e-6);
  sc.platform.gpu = {"H100", 989e12, 795e12, 3.35e12, 80e9};
  sc.training.seq_len = 8192;
  sc.training.stack = stack;
  sc.parallel.dp = 8;
  sc.parallel.zero_stage = 3;
  return sc;
}

using test::term;

constexpr double kTokens = 8192, kVocab = 128256;

}  // namespace

TEST(BackwardPeak, EagerCrossEntropyHoldsThreeFp32LogitBuffers) {
  // log_softmax's saved fp32 output, nll_loss_backward's fp32 gradient and
  // _log_softmax_backward_data's: 12 B per logit.
  const auto eager = model::backward_peak(llama3_8b(scenario::Stack::TorchEager));
  EXPECT_DOUBLE_EQ(eager.loss.bytes, kTokens * kVocab * 12);
  // Megatron's cross-entropy writes the gradient into its fp32 softmax: 2 + 4 B.
  const auto mcore = model::backward_peak(llama3_8b(scenario::Stack::MegatronTe));
  EXPECT_DOUBLE_EQ(mcore.loss.bytes, kTokens * kVocab * 6);
}

TEST(BackwardPeak, Fa2BlockWorkingSetIsTheAttentionsFp32DqAccumulatorAndGradients) {
  auto sc = llama3_8b(scenario::Stack::TorchEager);
  sc.cost.attention_kernel = scenario::AttnImpl::Fa2;
  const auto bp = model::backward_peak(sc);
  // dY and dX of the block, bf16.
  const double grads = 2 * kTokens * 4096 * 2;
  // FA2's dq_accum + softmax_d (fp32, 8192 rows x 32 heads x (128 + 1)).
  const double fp32 = kTokens * 32 * (128 + 1) * 4;
  // dO, dQ at 32 heads; repeat_kv makes dK, dV 32 heads too, then sums them to 8.
  const double bf16 = 2 * kTokens * 32 * 128 * 2 + 2 * kTokens * 32 * 128 * 2 + 2 * kTokens * 8 * 128 * 2;
  EXPECT_DOUBLE_EQ(bp.attention_bytes, fp32 + bf16);
  // SwiGLU: three 14336-wide bf16 tensors.
  EXPECT_DOUBLE_EQ(bp.mlp_bytes, 3 * kTokens * 14336 * 2);
  // The MLP's 705 MB beat the attention's 436 MB: the block's peak is the MLP's.
  EXPECT_DOUBLE_EQ(bp.block_bytes, grads + bp.mlp_bytes);
  ASSERT_EQ(bp.block.size(), 2u);
  EXPECT_NE(bp.block[1].name.find("SwiGLU"), std::string::npos);
  // A narrow MLP leaves the peak to the attention, its fp32 accumulator named apart.
  sc.model.ffn_hidden = 1024;
  const auto narrow = model::backward_peak(sc);
  EXPECT_DOUBLE_EQ(narrow.block_bytes, grads + fp32 + bf16);
  model::MemoryEstimate named;
  named.terms = narrow.block;
  EXPECT_DOUBLE_EQ(term(named, "backward working set: attention dQ accumulator (fp32)"), fp32);
}

TEST(BackwardPeak, Fa3UnderGqaAccumulatesDkDvInFp32AtTheKvHeads) {
  auto sc = llama3_8b(scenario::Stack::MegatronTe);
  sc.cost.attention_kernel = scenario::AttnImpl::Fa3;
  sc.model.ffn_hidden = 1024;
  const auto bp = model::backward_peak(sc);
  const double fp32 = kTokens * 32 * (128 + 2) * 4 + 2 * kTokens * 8 * 128 * 4;
  const double bf16 = 2 * kTokens * 32 * 128 * 2 + 2 * kTokens * 8 * 128 * 2;
  EXPECT_DOUBLE_EQ(bp.attention_bytes, fp32 + bf16);
}

TEST(BackwardPeak, TheRankThatHoldsTheLossPeaksThereOthersInABlock) {
  auto sc = llama3_8b(scenario::Stack::TorchEager);
  sc.training.recompute = scenario::Recompute::Full;
  // Without pipeline parallelism the loss's 12.6 GB beat a block's 1.0 GB.
  const auto one = model::memory_by_rank_class(sc);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_DOUBLE_EQ(term(one[0].memory, "logits"), kTokens * kVocab * 12);
  EXPECT_EQ(term(one[0].memory, "backward working set"), 0.0);
  // At the loss no block is being recomputed: the activations are every layer's input only.
  const double recomputed = model::recomputing_activation_bytes(sc, 32);
  EXPECT_GT(recomputed, 0);
  EXPECT_NEAR(term(one[0].memory, "activations"), model::stage_activation_bytes(sc, 32, 1) - recomputed, 1);
  // Under PP 2 the first stage has no loss: it peaks in a block's backward.
  sc.parallel.pp = 2;
  sc.parallel.dp = 4;
  sc.training.micro_batches = 4;
  const auto two = model::memory_by_rank_class(sc);
  ASSERT_EQ(two.size(), 2u);
  // A block's moment holds its working set and the activations of the block it recomputed.
  const double block = model::backward_peak(sc).block_bytes + model::recomputing_activation_bytes(sc, 16);
  EXPECT_EQ(term(two[0].memory, "logits"), 0.0);
  EXPECT_DOUBLE_EQ(term(two[0].memory, "backward working set"), block);
  EXPECT_DOUBLE_EQ(term(two[1].memory, "logits"), kTokens * kVocab * 12);
  EXPECT_EQ(term(two[1].memory, "backward working set"), 0.0);
  // The chunked loss's one chunk is under a block's working set: the last stage peaks in a block.
  sc.training.loss = scenario::Loss::Chunked;
  const auto chunked = model::memory_by_rank_class(sc);
  EXPECT_EQ(term(chunked[1].memory, "logits"), 0.0);
  EXPECT_DOUBLE_EQ(term(chunked[1].memory, "backward working set"), block);
}

TEST(BackwardPeak, FsdpGradientAccumulationAddsTheReduceScatterOutput) {
  auto sc = llama3_8b(scenario::Stack::TorchEager);
  const double one = term(model::estimate_memory(sc), "unsharded block gradients");
  sc.training.micro_batches = 2;
  const double two = term(model::estimate_memory(sc), "unsharded block gradients");
  // The block's fp32 shard over 8 ranks beside its 2 + 4 B unsharded gradients.
  EXPECT_NEAR(two / one, (2 + 4 + 4.0 / 8) / 6, 1e-12);
}

}  // namespace CPSIM_TEST_TU
