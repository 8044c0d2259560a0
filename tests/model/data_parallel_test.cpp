// Framework data-parallel figures (model/data_parallel.hpp) and the memory they decide.
#include "model/data_parallel.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "model/memory.hpp"
#include "model/moe.hpp"
#include "model/offload.hpp"
#include "model/transformer.hpp"
#include "support/memory_terms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

using test::term;

scenario::Scenario llama8b(int dp, int pp, int zero) {
  scenario::Scenario sc;
  sc.model.name = "llama3-8b";
  sc.model.layers = 32;
  sc.model.hidden = 4096;
  sc.model.heads_q = 32;
  sc.model.heads_kv = 8;
  sc.model.head_dim = 128;
  sc.model.ffn_hidden = 14336;
  sc.model.vocab = 128256;
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  sc.training.seq_len = 8192;
  sc.parallel.dp = dp;
  sc.parallel.pp = pp;
  sc.parallel.zero_stage = zero;
  return sc;
}

}  // namespace

TEST(DpBucket, MegatronDefaults) {
  scenario::ParallelSpec p;
  // Off by default: one bucket after the whole backward.
  EXPECT_TRUE(std::isinf(model::dp_bucket_bytes(p, 0)));
  p.overlap_grad_reduce = true;
  p.dp = 8;  // max(40M, 8M) parameters of fp32 gradients
  EXPECT_DOUBLE_EQ(model::dp_bucket_bytes(p, 0), 40e6 * 4);
  p.dp = 64;  // max(40M, 64M)
  EXPECT_DOUBLE_EQ(model::dp_bucket_bytes(p, 0), 64e6 * 4);
  p.grad_reduce_fp32 = false;
  EXPECT_DOUBLE_EQ(model::dp_bucket_bytes(p, 0), 64e6 * 2);
  p.dp_bucket_bytes = 25e6;
  EXPECT_DOUBLE_EQ(model::dp_bucket_bytes(p, 0), 25e6);
  // Pipeline stages after the first: one bucket.
  EXPECT_TRUE(std::isinf(model::dp_bucket_bytes(p, 1)));
  // FSDP: a bucket per block.
  p.zero_stage = 3;
  EXPECT_EQ(model::dp_bucket_bytes(p, 0), 0);
}

TEST(FsdpReshard, TorchtitanDefaultPolicy) {
  scenario::ParallelSpec p;
  p.zero_stage = 3;
  EXPECT_TRUE(model::fsdp_reshards(p, 0, 32));
  EXPECT_FALSE(model::fsdp_reshards(p, 31, 32));  // the last block: prefetched back at once
  p.pp = 4;
  EXPECT_FALSE(model::fsdp_reshards(p, 0, 32));   // PP: no block reshards
  p.reshard_after_forward = scenario::ParallelSpec::Reshard::Always;
  EXPECT_TRUE(model::fsdp_reshards(p, 31, 32));
  p.reshard_after_forward = scenario::ParallelSpec::Reshard::Never;
  EXPECT_FALSE(model::fsdp_reshards(p, 0, 32));
}

TEST(DpMemory, MegatronKeepsFp32MainGrads) {
  // Megatron's distributed optimizer: 6 + 12 / d bytes per parameter with fp32 gradients
  // (dist_optimizer.md); 4 + 12 / d when reduced in bf16.
  auto sc = llama8b(8, 1, 1);
  const double n = model::total_params(sc.model);
  const auto est = model::estimate_memory(sc);
  EXPECT_NEAR(term(est, "weights"), 2 * n, 1);
  EXPECT_NEAR(term(est, "gradients (fp32 main grads)"), 4 * n, 1);
  EXPECT_NEAR(term(est, "optimizer states"), 12 * n / 8, 1);
  sc.parallel.grad_reduce_fp32 = false;
  EXPECT_NEAR(term(model::estimate_memory(sc), "gradients (bf16)"), 2 * n, 1);
}

TEST(DpMemory, FsdpUnderPipelineKeepsTheStagesWeightsGathered) {
  // FSDP2 (torchtitan): 16 B per parameter over d, plus the gathered bf16 blocks.
  auto sc = llama8b(8, 1, 3);
  const double n = model::total_params(sc.model);
  const auto flat = model::estimate_memory(sc);
  EXPECT_NEAR(term(flat, "weights (fp32 shards)") + term(flat, "gradients (fp32 shards)") +
                  term(flat, "optimizer states"),
              16 * n / 8, 1);
  const double block = model::full_attention_layer_params(sc.model) + model::layer_ffn_replicated_params(sc.model, 0);
  // Without PP: the last block kept, two in use.
  EXPECT_NEAR(term(flat, "gathered weights"), 2 * 3 * block, 1);
  // Under PP 4: each stage's 8 blocks stay gathered.
  sc.parallel.pp = 4;
  const auto staged = model::memory_by_rank_class(sc);
  EXPECT_NEAR(term(staged[0].memory, "gathered weights"), 2 * 8 * block, 1);
  EXPECT_GT(term(staged[0].memory, "gathered root (embedding"), 0);
  EXPECT_EQ(term(staged[1].memory, "gathered root"), 0);
  // PP 5 over 32 layers: 7 per stage, the last stage 4.
  sc.parallel.pp = 5;
  const auto five = model::memory_by_rank_class(sc);
  EXPECT_NEAR(term(five.back().memory, "gathered weights (bf16, 4 blocks kept)"), 2 * 4 * block, 1);
}

TEST(DpMemory, HsdpShardsOverTheShardGroupOnly) {
  // HSDP 2 x 8 over dp 16: the 16 B per parameter over the shard degree 8, not 16; the
  // gathered blocks are whole either way.
  auto sc = llama8b(16, 1, 3);
  const double n = model::total_params(sc.model);
  auto states = [](const model::MemoryEstimate& e) {
    return term(e, "weights (fp32 shards)") + term(e, "gradients (fp32 shards)") + term(e, "optimizer states");
  };
  const auto fsdp = model::estimate_memory(sc);
  EXPECT_NEAR(states(fsdp), 16 * n / 16, 1);
  sc.parallel.dp_replicate = 2;
  const auto hsdp = model::estimate_memory(sc);
  EXPECT_NEAR(states(hsdp), 16 * n / 8, 1);
  EXPECT_NEAR(term(hsdp, "gathered weights"), term(fsdp, "gathered weights"), 1);
  // The replicate group is a communicator of its own, with its NCCL buffers.
  bool replicate_comm = false;
  for (const auto& t : hsdp.terms) replicate_comm |= t.name.find("DP replicate") != std::string::npos;
  EXPECT_TRUE(replicate_comm);
  sc.parallel.dp_replicate = 16;  // pure replication: every rank holds the whole states
  EXPECT_NEAR(states(model::estimate_memory(sc)), 16 * n, 1);
  // CP ranks shard with their shard group: dp 16 = 2 x 8, cp 2 -> over 16.
  sc.parallel.dp_replicate = 2;
  sc.parallel.cp = 2;
  EXPECT_NEAR(states(model::estimate_memory(sc)), 16 * n / 16, 1);
}

TEST(PartialRecompute, BlockAndUniformAsMegatronCheckpoints) {
  auto sc = llama8b(1, 1, 1);
  sc.training.recompute = scenario::Recompute::Full;
  const double s = 8192, h = 4096;
  const double input = 2 * s * h, full = 34 * s * h;
  // Uniform, N = 1: every layer's input plus one layer recomputed.
  EXPECT_NEAR(model::stage_activation_bytes(sc, 32, 1), 32 * input + full, 1);
  // Uniform, N = 4: 8 groups' inputs plus one group of 4 layers recomputed.
  sc.training.recompute_layers = 4;
  EXPECT_NEAR(model::stage_activation_bytes(sc, 32, 1), 8 * input + 4 * full, 1);
  EXPECT_TRUE(model::layer_recomputed(sc, 31));
  // Block, N = 4: the first 4 layers checkpointed, the other 28 keep everything.
  sc.training.recompute_method = scenario::TrainingSpec::RecomputeMethod::Block;
  EXPECT_NEAR(model::stage_activation_bytes(sc, 32, 1), 4 * input + 28 * full + full, 1);
  EXPECT_TRUE(model::layer_recomputed(sc, 3));
  EXPECT_FALSE(model::layer_recomputed(sc, 4));
  // Under PP 4 each stage's chunk of 8 layers checkpoints its own first 4.
  sc.parallel.pp = 4;
  EXPECT_TRUE(model::layer_recomputed(sc, 8));
  EXPECT_TRUE(model::layer_recomputed(sc, 11));
  EXPECT_FALSE(model::layer_recomputed(sc, 12));
  EXPECT_FALSE(model::layer_recomputed(sc, 31));
}

TEST(ActivationOffload, OffloadedLayersLeaveOneInTransit) {
  auto sc = llama8b(1, 1, 1);
  sc.training.recompute = scenario::Recompute::None;
  const double full = 34.0 * 8192 * 4096;
  EXPECT_NEAR(model::stage_activation_bytes(sc, 32, 1), 32 * full, 1);
  sc.training.offload_layers = 8;
  EXPECT_NEAR(model::stage_activation_bytes(sc, 32, 1), (24 + 1) * full, 1);
  EXPECT_NEAR(model::offload_layer_bytes(sc), full, 1);
  // PCIe Gen5 x16 at 57.6 GB/s.
  EXPECT_NEAR(model::host_copy_seconds(57.6e9), 1.0, 0.001);
}

}  // namespace CPSIM_TEST_TU
