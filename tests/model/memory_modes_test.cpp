// Prefill memory (KV cache, no gradients or optimizer states) and the chunked loss's logits.
#include <gtest/gtest.h>

#include <string>

#include "model/backward_peak.hpp"
#include "model/transformer.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

scenario::Scenario small() {
  scenario::Scenario sc;
  sc.platform = fixtures::nvswitch_node(8, 100e9, 1e-6);
  auto& m = sc.model;
  m.name = "small";
  m.layers = 4;
  m.hidden = 1024;
  m.heads_q = 8;
  m.heads_kv = 4;
  m.head_dim = 128;
  m.ffn_hidden = 4096;
  m.vocab = 32000;
  m.pattern = {scenario::LayerKind::LinearAttention, scenario::LayerKind::FullAttention};
  m.linear_heads_v = 8;
  m.linear_heads_k = 4;
  sc.training.seq_len = 32768;
  sc.parallel.tp = 2;
  sc.parallel.cp = 4;
  sc.mode = scenario::Mode::Prefill;
  return sc;
}

double term(const model::MemoryEstimate& e, const std::string& prefix) {
  double b = -1;
  for (const auto& t : e.terms)
    if (t.name.rfind(prefix, 0) == 0) b = t.bytes;
  return b;
}

TEST(PrefillMemory, KvCacheExact) {
  scenario::Scenario sc = small();
  const auto kv = model::kv_cache_per_rank(sc);
  // 2 full layers x 8192 tokens per rank x 2 KV heads per TP rank x 128 x (K, V) x 2 B.
  EXPECT_DOUBLE_EQ(kv.full_bytes, 2.0 * 8192 * 2 * 128 * 2 * 2);
  // 2 linear layers x (fp32 state 4 heads x 128 x 128 x 4 B + conv tail 3 x (2 x 2 x 128 +
  // 4 x 128) x 2 B).
  EXPECT_DOUBLE_EQ(kv.linear_bytes, 2.0 * (4.0 * 128 * 128 * 4 + 3.0 * (2 * 2 * 128 + 4 * 128) * 2));
  EXPECT_DOUBLE_EQ(kv.sliding_bytes, 0);
  // Ulysses over 4: the whole sequence for 2 / 4 KV heads -> one replicated head.
  sc.parallel.attention.scheme = scenario::AttentionScheme::Ulysses;
  EXPECT_DOUBLE_EQ(model::kv_cache_per_rank(sc).full_bytes, 2.0 * 32768 * 1 * 128 * 2 * 2);
  // A sliding window keeps at most its window.
  sc.parallel.attention.scheme = scenario::AttentionScheme::Ring;
  sc.model.attention_mask = scenario::AttentionMask::SlidingWindow;
  sc.model.window = 1024;
  const auto sw = model::kv_cache_per_rank(sc);
  EXPECT_DOUBLE_EQ(sw.full_bytes, 0);
  EXPECT_DOUBLE_EQ(sw.sliding_bytes, 2.0 * 1024 * 2 * 128 * 2 * 2);
  // Linear a2a over cp 2: half the heads of the TP rank.
  sc.parallel.cp = 2;
  sc.parallel.linear = scenario::LinearScheme::AllToAll;
  EXPECT_DOUBLE_EQ(model::kv_cache_per_rank(sc).linear_bytes,
                   2.0 * (2.0 * 128 * 128 * 4 + 3.0 * (2 * 1 * 128 + 2 * 128) * 2));
  // Every sequence of the batch keeps its cache.
  sc = small();
  sc.training.micro_batches = 3;
  EXPECT_DOUBLE_EQ(model::kv_cache_per_rank(sc).full_bytes, 3 * 2.0 * 8192 * 2 * 128 * 2 * 2);
}

TEST(PrefillMemory, NoGradientsNoOptimizerAndTheKvCache) {
  scenario::Scenario sc = small();
  const auto pre = model::estimate_memory(sc);
  EXPECT_LT(term(pre, "gradients"), 0);
  EXPECT_LT(term(pre, "optimizer"), 0);
  EXPECT_DOUBLE_EQ(term(pre, "KV cache (full-attention layers)"), model::kv_cache_per_rank(sc).full_bytes);
  EXPECT_DOUBLE_EQ(term(pre, "weights"), 2.0 * model::total_params(sc.model) / 2);
  sc.mode = scenario::Mode::Train;
  const auto train = model::estimate_memory(sc);
  EXPECT_GT(term(train, "gradients"), 0);
  EXPECT_GT(term(train, "optimizer"), 0);
  EXPECT_LT(term(train, "KV cache"), 0);
  EXPECT_LT(pre.peak_bytes, train.peak_bytes);
}

TEST(ChunkedLoss, LogitsTermIsOneChunk) {
  scenario::Scenario sc;
  sc.platform = fixtures::nvswitch_node(8, 100e9, 1e-6);
  sc.model = fixtures::anchor_model();
  sc.training.seq_len = 131072;
  sc.parallel.cp = 8;
  const auto full = model::estimate_memory(sc);
  // The anchor's 16K tokens per rank x 248320 x (2 + 4) B = 24.4 GB.
  EXPECT_NEAR(term(full, "logits"), 16384.0 * 248320 * 6, 1);
  sc.training.loss = scenario::Loss::Chunked;
  const auto chunked = model::estimate_memory(sc);
  // Liger's chunk: next_pow2(ceil(16384 / ceil(248320 / 5120))) = 512 tokens.
  EXPECT_DOUBLE_EQ(model::loss_chunk_tokens(sc), 512);
  EXPECT_NEAR(model::backward_peak(sc).loss.bytes, 512.0 * 248320 * 6, 1);
  // One chunk is under a block's backward working set (with the recomputed block's
  // activations): the peak is the block's, the loss's buffers are not held with it.
  const double block = model::backward_peak(sc).block_bytes +
                       model::recomputing_activation_bytes(sc, (sc.model.layers + sc.parallel.pp - 1) / sc.parallel.pp);
  ASSERT_GT(block, 512.0 * 248320 * 6);
  EXPECT_EQ(term(chunked, "logits"), -1.0);
  double working_set = 0;
  for (const auto& t : chunked.terms)
    if (t.name.rfind("backward working set", 0) == 0) working_set += t.bytes;
  EXPECT_NEAR(working_set, block, 1);
  // Through an allocator without fragmentation (expandable segments: blocks only), whose 512 B
  // rounding these sizes already meet, the peak falls by exactly the difference.
  sc.memory.allocator = {1, 0.0};
  const auto chunked_es = model::estimate_memory(sc);
  sc.training.loss = scenario::Loss::Materialized;
  const auto full_es = model::estimate_memory(sc);
  EXPECT_NEAR(full_es.peak_bytes - chunked_es.peak_bytes, 16384.0 * 248320 * 6 - block, 1);
}

}  // namespace

}  // namespace CPSIM_TEST_TU
