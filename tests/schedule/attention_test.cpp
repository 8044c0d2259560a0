// Attention schedules: the lesson's byte figures and conservation of work and bytes.
#include "schedule/attention.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "model/transformer.hpp"
#include "schedule/step.hpp"
#include "support/fixtures.hpp"

using namespace cpsim;
using schedule::OpKind;
using schedule::Phase;

namespace {

/// The anchor model's full-attention geometry, four full-attention layers.
scenario::ModelSpec anchor_full_attention() {
  scenario::ModelSpec m = fixtures::anchor_model();
  m.layers = 4;
  m.pattern = {scenario::LayerKind::FullAttention};
  m.total_params = 0;
  return m;
}

struct Built {
  schedule::TaskGraph g;
  std::vector<schedule::OpId> exit_fwd, exit_bwd;
};

/// Builds one attention layer forward + backward for a CP group of `n` ranks.
void build(Built& b, const scenario::Scenario& sc, int n) {
  static fixtures::PerPairCost cost(1e-12);
  model::Topology topo(fixtures::nvswitch_node(n, 100e9, 1e-6));
  schedule::Pricer pricer(cost, sc, n);
  schedule::AttentionCtx ctx{b.g, topo, pricer, sc, {}, 0, 0, {}, schedule::scenario_documents(sc)};
  for (int i = 0; i < n; ++i) ctx.group.push_back(i);
  ctx.geo = {sc.model.heads_q, sc.model.heads_kv, sc.model.head_dim, 1};
  const std::vector<schedule::OpId> none(n, schedule::kNoOp);
  b.exit_fwd = schedule::attention_forward(ctx, none);
  b.exit_bwd = schedule::attention_backward(ctx, b.exit_fwd);
  b.g.finalize();
}

scenario::Scenario anchor_scenario(scenario::AttentionScheme scheme, scenario::Layout layout) {
  scenario::Scenario sc;
  sc.model = anchor_full_attention();
  sc.training.seq_len = 131072;
  sc.parallel.cp = 8;
  sc.parallel.attention.scheme = scheme;
  sc.parallel.attention.layout = layout;
  return sc;
}

/// Bytes a rank sends / receives from other ranks in one phase.
double bytes(const schedule::TaskGraph& g, int rank, Phase ph, bool received) {
  double s = 0;
  for (const auto& op : g.ops())
    if (op.kind == OpKind::Transfer && op.label.phase == ph && op.rank != op.peer &&
        (received ? op.peer : op.rank) == rank)
      s += op.bytes;
  return s;
}

/// Sum over forward attention kernels of pairs x query heads.
double pair_heads(const schedule::TaskGraph& g, Phase ph) {
  double s = 0;
  for (const auto& op : g.ops()) {
    if (op.kind != OpKind::Compute || op.label.shape < 0 || op.label.phase != ph) continue;
    const auto& k = g.shapes()[static_cast<size_t>(op.label.shape)];
    s += static_cast<double>(k.q_len) * static_cast<double>(k.kv_len) * k.unmasked_fraction *
         k.heads_q;
  }
  return s;
}

constexpr double GB = 1e9;

}  // namespace

TEST(RingBytes, AnchorSendsOneKvBlockPerStepSevenPerLayer) {
  Built b;
  build(b, anchor_scenario(scenario::AttentionScheme::Ring, scenario::Layout::ZigZag), 8);
  int steps = 0;
  for (const auto& op : b.g.ops())
    if (op.kind == OpKind::Transfer && op.rank == 0 && op.label.phase == Phase::Forward) {
      EXPECT_NEAR(op.bytes / GB, 0.067, 0.0005);
      ++steps;
    }
  EXPECT_EQ(steps, 7);
  EXPECT_NEAR(bytes(b.g, 0, Phase::Forward, false) / GB, 0.47, 0.005);
}

TEST(UlyssesBytes, ScheduleMovesTheReplicatedFigure) {
  Built b;
  build(b, anchor_scenario(scenario::AttentionScheme::Ulysses, scenario::Layout::Contiguous), 8);
  // Q 0.176 + K 0.059 + V 0.059 + O 0.176 received per GPU, KV heads replicated to 8 GPUs.
  EXPECT_NEAR(bytes(b.g, 3, Phase::Forward, true) / GB, 0.47, 0.005);
  // The lesson's accounting (no replication) is reported by the model: 0.41 GB.
  EXPECT_NEAR(model::ulysses_bytes_lesson(anchor_full_attention(), 131072, 8).total() / GB, 0.41,
              0.005);
}

TEST(UlyssesHeads, DegreeMustDivideQueryHeads) {
  auto sc = anchor_scenario(scenario::AttentionScheme::Ulysses, scenario::Layout::Contiguous);
  Built b;
  EXPECT_THROW(build(b, sc, 16), std::invalid_argument);  // 24 heads over 16 ranks
}

TEST(Conservation, EverySchemeComputesAllCausalPairsForwardAndBackward) {
  std::mt19937_64 rng(7);
  const scenario::AttentionScheme schemes[] = {
      scenario::AttentionScheme::Ring, scenario::AttentionScheme::AllGather,
      scenario::AttentionScheme::Ulysses, scenario::AttentionScheme::Usp};
  const scenario::Layout layouts[] = {scenario::Layout::Contiguous, scenario::Layout::ZigZag,
                                      scenario::Layout::Striped};
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 2 << (rng() % 3);  // 2, 4, 8
    const int64_t s = 2 * n * static_cast<int64_t>(1 + rng() % 12);
    scenario::Scenario sc;
    sc.model = anchor_full_attention();
    sc.model.heads_q = 8;
    sc.model.heads_kv = 8;
    sc.training.seq_len = s;
    sc.parallel.cp = n;
    sc.parallel.attention.scheme = schemes[rng() % 4];
    sc.parallel.attention.layout = layouts[rng() % 3];
    sc.parallel.attention.ulysses_degree = 2;
    if (sc.parallel.attention.scheme == scenario::AttentionScheme::Usp &&
        sc.parallel.attention.layout != scenario::Layout::Contiguous && (s / 2) % n != 0)
      continue;
    if (rng() % 2) {  // packed documents
      std::vector<int64_t> docs;
      int64_t left = s;
      while (left > 0) {
        const int64_t len = std::min<int64_t>(left, 1 + static_cast<int64_t>(rng() % (s / 2 + 1)));
        docs.push_back(len);
        left -= len;
      }
      sc.training.documents = docs;
    }
    Built b;
    build(b, sc, n);
    const double expected =
        static_cast<double>(schedule::total_pairs(schedule::scenario_documents(sc))) *
        sc.model.heads_q;
    SCOPED_TRACE("trial " + std::to_string(trial) + " s=" + std::to_string(s) +
                 " n=" + std::to_string(n));
    EXPECT_NEAR(pair_heads(b.g, Phase::Forward), expected, 1e-6 * expected + 0.5);
    EXPECT_NEAR(pair_heads(b.g, Phase::Backward), expected, 1e-6 * expected + 0.5);
    // Every byte sent is received once: per phase, bytes sent by all = bytes received by all.
    double sent = 0, received = 0;
    for (int r = 0; r < n; ++r) {
      sent += bytes(b.g, r, Phase::Forward, false) + bytes(b.g, r, Phase::Backward, false);
      received += bytes(b.g, r, Phase::Forward, true) + bytes(b.g, r, Phase::Backward, true);
    }
    EXPECT_DOUBLE_EQ(sent, received);
  }
}

TEST(RingKv, EveryRankReceivesEveryOtherBlockOnce) {
  Built b;
  build(b, anchor_scenario(scenario::AttentionScheme::Ring, scenario::Layout::Contiguous), 4);
  // Forward: N-1 KV blocks arrive per rank; their kernels cover the N source chunks exactly once.
  for (int r = 0; r < 4; ++r) {
    std::map<int, int> seen;
    for (const auto& op : b.g.ops())
      if (op.kind == OpKind::Compute && op.rank == r && op.label.phase == Phase::Forward &&
          op.label.shape >= 0)
        seen[op.label.chunk_kv]++;
    // Contiguous: rank r computes against blocks 0..r, each once; later blocks are masked.
    EXPECT_EQ(static_cast<int>(seen.size()), r + 1);
    for (const auto& [k, c] : seen) EXPECT_EQ(c, 1);
  }
}

TEST(Labels, KernelOpsCarryShapeStepAndScheme) {
  Built b;
  build(b, anchor_scenario(scenario::AttentionScheme::Ring, scenario::Layout::ZigZag), 8);
  bool found = false;
  for (schedule::OpId id = 0; id < b.g.size(); ++id) {
    const auto& op = b.g.op(id);
    if (op.label.shape < 0 || op.label.step != 3) continue;
    const auto& k = b.g.shapes()[static_cast<size_t>(op.label.shape)];
    // Zig-zag after step 0: exactly half a block (L x L/2 or L/2 x L), unmasked.
    EXPECT_EQ(k.q_len * k.kv_len, 16384LL * 8192LL);
    EXPECT_EQ(k.mask, 0);
    EXPECT_EQ(b.g.str(op.label.scheme), "ring-zigzag");
    EXPECT_NE(b.g.describe(id).find("step 3"), std::string::npos);
    found = true;
  }
  EXPECT_TRUE(found);
}
