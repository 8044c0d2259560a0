// Per-GPU memory by rank class (sim/model/memory): the same terms as estimate_memory, split the
// way a 1F1B pipeline holds them.
#include "model/memory.hpp"

#include <gtest/gtest.h>

#include "support/fixtures.hpp"
#include "support/memory_terms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

scenario::Scenario anchor_128k(int cp, int pp, int micro_batches) {
  scenario::Scenario sc;
  sc.model = fixtures::anchor_model();
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  sc.training.seq_len = 131072;
  sc.training.micro_batches = micro_batches;
  sc.parallel.cp = cp;
  sc.parallel.pp = pp;
  sc.parallel.zero_stage = 3;
  return sc;
}

using test::term;

}  // namespace

TEST(MemoryByRankClass, WithoutPipelineOneClassEqualToTheEstimate) {
  const auto sc = anchor_128k(8, 1, 1);
  const auto classes = model::memory_by_rank_class(sc);
  ASSERT_EQ(classes.size(), 1u);
  EXPECT_EQ(classes[0].name, "every rank");
  const auto est = model::estimate_memory(sc);
  EXPECT_NEAR(classes[0].memory.peak_bytes, est.peak_bytes, 1.0);
  // Activations split by layer kind: 16 full-attention and 48 linear-attention layers.
  const auto& m = classes[0].memory;
  const double full = term(m, "activations: full-attention layers (16)");
  const double lin = term(m, "activations: linear-attention layers (48)");
  EXPECT_GT(full, 0);
  EXPECT_NEAR(lin, 3 * full, 1.0);
  EXPECT_NEAR(full + lin, term(est, "activations"), 1.0);
}

TEST(MemoryByRankClass, PipelineStagesHoldTheirMicroBatchesAndOnlyTheLastTheLogits) {
  const auto sc = anchor_128k(4, 4, 8);
  const auto classes = model::memory_by_rank_class(sc);
  ASSERT_EQ(classes.size(), 3u);
  EXPECT_EQ(classes[0].name, "first stage (pp 0)");
  EXPECT_EQ(classes[1].name, "middle stages (pp 1-2)");
  EXPECT_EQ(classes[2].name, "last stage (pp 3)");
  // Full recomputation: 2 s b h per layer per micro-batch in flight (1F1B: pp - k of them).
  // Stage 0: 16 layers x 4 in flight. One layer's 34 s b h being recomputed is held in a
  // block's backward only: a term of its working set where that moment peaks (stage 0, no
  // loss), none on the last stage, whose loss's buffers peak higher.
  const double sbh = 131072.0 / 4 * 5120;
  EXPECT_NEAR(term(classes[0].memory, "activations"), 2.0 * 16 * 4 * sbh, 1e3);
  EXPECT_NEAR(term(classes[2].memory, "activations"), 2.0 * 16 * 1 * sbh, 1e3);
  EXPECT_NEAR(term(classes[0].memory, "backward working set: activations of the block being recomputed"), 34 * sbh, 1e3);
  EXPECT_EQ(term(classes[2].memory, "backward working set: activations of the block being recomputed"), 0.0);
  EXPECT_EQ(term(classes[0].memory, "logits"), 0.0);
  EXPECT_GT(term(classes[2].memory, "logits"), 1e9);
  // The estimate charges every rank with both: it bounds every class from above.
  const double bound = model::estimate_memory(sc).peak_bytes;
  for (const auto& c : classes) EXPECT_LE(c.memory.peak_bytes, bound + 1);
  const auto peak = model::peak_rank_memory(sc);
  double most = 0;
  for (const auto& c : classes) most = std::max(most, c.memory.peak_bytes);
  EXPECT_DOUBLE_EQ(peak.peak_bytes, most);
  EXPECT_NE(peak.verdict.find("stage"), std::string::npos) << peak.verdict;
}

}  // namespace CPSIM_TEST_TU
