// Attention schedules: the lesson's byte figures and conservation of work and bytes.
#include "schedule/attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "model/transformer.hpp"
#include "schedule/step.hpp"
#include "support/platforms.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

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
  schedule::Pricer pricer(cost);
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

/// A double-ring inner ring size for N ranks: 0 (the node, here all N) or a divisor of N.
int random_inner_ring(std::mt19937_64& rng, int n) {
  std::vector<int> sizes{0};
  for (int d = 1; d <= n; ++d)
    if (n % d == 0) sizes.push_back(d);
  return sizes[rng() % sizes.size()];
}

/// A random scenario for the ring family: s, N (2, 4, 8), layout, packed documents or one.
scenario::Scenario random_ring_scenario(std::mt19937_64& rng, scenario::AttentionScheme scheme) {
  const scenario::Layout layouts[] = {scenario::Layout::Contiguous, scenario::Layout::ZigZag,
                                      scenario::Layout::Striped};
  const int n = 2 << (rng() % 3);
  const int64_t s = 2 * n * static_cast<int64_t>(1 + rng() % 12);
  scenario::Scenario sc;
  sc.model = anchor_full_attention();
  sc.model.heads_q = 8;
  sc.model.heads_kv = 2;
  sc.training.seq_len = s;
  sc.parallel.cp = n;
  sc.parallel.attention.scheme = scheme;
  sc.parallel.attention.layout = layouts[rng() % 3];
  sc.parallel.attention.inner_ring = random_inner_ring(rng, n);
  if (rng() % 2) {  // packed documents
    std::vector<int64_t> docs;
    for (int64_t left = s; left > 0;) {
      const int64_t len = std::min<int64_t>(left, 1 + static_cast<int64_t>(rng() % (s / 2 + 1)));
      docs.push_back(len);
      left -= len;
    }
    sc.training.documents = docs;
  }
  return sc;
}

/// Whether `from` happens before `to` through explicit edges.
bool happens_before(const schedule::TaskGraph& g, schedule::OpId from, schedule::OpId to) {
  std::vector<char> seen(g.size(), 0);
  std::vector<schedule::OpId> todo{to};
  while (!todo.empty()) {
    const schedule::OpId id = todo.back();
    todo.pop_back();
    const auto pv = g.preds(id);
    for (auto p = pv.begin(), end = pv.end(); p != end; ++p) {
      if (*p == from) return true;
      if (!seen[*p]) {
        seen[*p] = 1;
        todo.push_back(*p);
      }
    }
  }
  return false;
}

bool named(const schedule::TaskGraph& g, const schedule::Op& op, const char* name) {
  return g.str(op.label.name) == name;
}

/// Ring family, one phase: each rank's kernels cover exactly the source chunks its query chunk
/// has unmasked pairs with, once each; every K,V block reaches each other rank once, along
/// transfers that leave only after the block reached their sender; every kernel runs after its
/// block arrived.
void check_kv_flow(const schedule::TaskGraph& g, const schedule::Partition& part,
                   const schedule::Documents& docs, Phase ph) {
  const int n = static_cast<int>(part.chunks.size());
  std::map<std::pair<int, int>, schedule::OpId> arrived;  // (rank, block) -> transfer
  std::vector<std::map<int, int>> computed(static_cast<size_t>(n));
  for (schedule::OpId id = 0; id < g.size(); ++id) {
    const auto& op = g.op(id);
    if (op.label.phase != ph) continue;
    const bool kv = named(g, op, "kv_p2p") || named(g, op, "kv_outer_p2p");
    const bool kernel = op.kind == OpKind::Compute && op.label.shape >= 0;
    if (!kv && !kernel) continue;
    const int b = op.label.chunk_kv;
    SCOPED_TRACE(g.describe(id));
    if (op.rank != b) {  // the block must be here, and this op must wait for it
      ASSERT_TRUE(arrived.count({op.rank, b}));
      EXPECT_TRUE(happens_before(g, arrived[{op.rank, b}], id));
    }
    if (kernel) {
      computed[static_cast<size_t>(op.rank)][b]++;
    } else {
      EXPECT_NE(op.peer, b);
      EXPECT_FALSE(arrived.count({op.peer, b}));
      arrived[{op.peer, b}] = id;
    }
  }
  EXPECT_EQ(static_cast<int>(arrived.size()), n * (n - 1));
  for (int r = 0; r < n; ++r) {
    std::map<int, int> expected;
    for (int b = 0; b < n; ++b)
      if (schedule::block_work(part.chunks[static_cast<size_t>(r)],
                               part.chunks[static_cast<size_t>(b)], docs)
              .pairs > 0)
        expected[b] = 1;
    EXPECT_EQ(computed[static_cast<size_t>(r)], expected) << "rank " << r;
  }
}

/// Ring family, backward: every dK,dV contribution (one per kernel) reaches the owner of its
/// block exactly once, and every hop leaves after what it carries. A rank keeps two partials
/// per block, as the double ring's buffers do: the one travelling its inner ring (kernels add
/// to it, inner hops move it) and the one that came over the outer ring (an outer hop sends
/// both on, summed).
void check_dkv_flow(const schedule::TaskGraph& g, int n) {
  struct Partial {
    std::vector<int> contributors;
    std::vector<schedule::OpId> feeders;  // ops that put something into it
  };
  std::map<std::pair<int, int>, Partial> inner, outer;  // (rank, block)
  std::map<int, int> finals;
  auto move = [&](Partial& from, Partial& to, schedule::OpId via) {
    for (schedule::OpId f : from.feeders) EXPECT_TRUE(happens_before(g, f, via));
    to.contributors.insert(to.contributors.end(), from.contributors.begin(),
                           from.contributors.end());
    from = {};
  };
  std::map<int, std::vector<int>> expected;  // block -> ranks whose kernels contribute
  for (schedule::OpId id = 0; id < g.size(); ++id) {
    const auto& op = g.op(id);
    if (op.label.phase != Phase::Backward) continue;
    const int b = op.label.chunk_kv;
    SCOPED_TRACE(g.describe(id));
    if (op.kind == OpKind::Compute && op.label.shape >= 0) {
      auto& p = inner[{op.rank, b}];
      p.contributors.push_back(op.rank);
      p.feeders.push_back(id);
      expected[b].push_back(op.rank);
    } else if (named(g, op, "dkv_p2p")) {
      auto& to = inner[{op.peer, b}];
      move(inner[{op.rank, b}], to, id);
      to.feeders.push_back(id);
    } else if (named(g, op, "dkv_outer_p2p")) {
      Partial sum;
      move(inner[{op.rank, b}], sum, id);
      move(outer[{op.rank, b}], sum, id);
      auto& to = outer[{op.peer, b}];
      move(sum, to, id);
      to.feeders.push_back(id);
    } else if (named(g, op, "dkv_final")) {
      EXPECT_EQ(op.rank, b);
      Partial home;
      move(inner[{b, b}], home, id);
      move(outer[{b, b}], home, id);
      std::sort(home.contributors.begin(), home.contributors.end());
      std::sort(expected[b].begin(), expected[b].end());
      EXPECT_EQ(home.contributors, expected[b]) << "block " << b;
      finals[b]++;
    }
  }
  EXPECT_EQ(static_cast<int>(finals.size()), n);
  for (const auto& [b, c] : finals) EXPECT_EQ(c, 1);
  for (const auto* held : {&inner, &outer})
    for (const auto& [where, p] : *held) EXPECT_TRUE(p.contributors.empty());
}

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
      scenario::AttentionScheme::Ulysses, scenario::AttentionScheme::Usp,
      scenario::AttentionScheme::DoubleRing};
  for (int trial = 0; trial < 40; ++trial) {
    // s, N, layout, inner ring and documents as for the ring family; all heads for USP.
    scenario::Scenario sc = random_ring_scenario(rng, schemes[rng() % 5]);
    sc.model.heads_kv = 8;
    sc.parallel.attention.ulysses_degree = 2;
    const int n = sc.parallel.cp;
    const int64_t s = sc.training.seq_len;
    if (sc.parallel.attention.scheme == scenario::AttentionScheme::Usp &&
        sc.parallel.attention.layout != scenario::Layout::Contiguous && (s / 2) % n != 0)
      continue;
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
    EXPECT_EQ(k.mask, cpsim::scenario::Mask::Full);
    EXPECT_EQ(b.g.str(op.label.scheme), "ring-zigzag");
    EXPECT_NE(b.g.describe(id).find("step 3"), std::string::npos);
    found = true;
  }
  EXPECT_TRUE(found);
}

TEST(DoubleRing, SameChunkPairsAsTheRingWhateverTheInnerRing) {
  // Random (s, N, inner, layout, documents), ring and double ring: the kernels cover each
  // rank's unmasked (query chunk, key chunk) pairs once, K,V reach every kernel before it runs,
  // dK,dV reach every owner with every contribution once, bytes sent = bytes received.
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const auto scheme = trial % 4 == 0 ? scenario::AttentionScheme::Ring
                                       : scenario::AttentionScheme::DoubleRing;
    const scenario::Scenario sc = random_ring_scenario(rng, scheme);
    const int n = sc.parallel.cp;
    SCOPED_TRACE("trial " + std::to_string(trial) + " " +
                 schedule::scheme_name(sc.parallel.attention) + " s=" +
                 std::to_string(sc.training.seq_len) + " n=" + std::to_string(n) +
                 " inner=" + std::to_string(sc.parallel.attention.inner_ring));
    Built b;
    build(b, sc, n);
    const auto docs = schedule::scenario_documents(sc);
    // The builder's split: zig-zag with documents is per document by default.
    const auto part = schedule::cp_partition(sc, docs, n);
    for (Phase ph : {Phase::Forward, Phase::Backward}) {
      check_kv_flow(b.g, part, docs, ph);
      double sent = 0, received = 0;
      for (int r = 0; r < n; ++r) {
        sent += bytes(b.g, r, ph, false);
        received += bytes(b.g, r, ph, true);
      }
      EXPECT_DOUBLE_EQ(sent, received);
    }
    check_dkv_flow(b.g, n);
  }
}

TEST(DoubleRing, EachRankSendsOneBlockOverTheOuterRingPerOuterStep) {
  // Anchor, N = 8 as 2 inner rings of 4: forward, each rank sends 3 blocks in its inner ring
  // per outer step (6) and 1 over the outer ring; backward adds 8 inner dK,dV hops and 2 outer
  // ones (the last one home). Every outer transfer goes from (o, i) to (o + 1, i).
  auto sc = anchor_scenario(scenario::AttentionScheme::DoubleRing, scenario::Layout::ZigZag);
  sc.parallel.attention.inner_ring = 4;
  Built b;
  build(b, sc, 8);
  std::map<std::string, int> fwd, bwd;
  // Four streams, so that no transfer queues behind a slower one of another kind.
  const std::map<std::string, uint16_t> streams{
      {"kv_p2p", schedule::stream::kCpSend},
      {"kv_outer_p2p", schedule::stream::kCpOuterSend},
      {"dkv_p2p", schedule::stream::kCpGradSend},
      {"dkv_outer_p2p", schedule::stream::kCpOuterGradSend}};
  for (const auto& op : b.g.ops()) {
    if (op.kind != OpKind::Transfer || op.rank != 1) continue;
    (op.label.phase == Phase::Forward ? fwd : bwd)[b.g.str(op.label.name)]++;
    const std::string& name = b.g.str(op.label.name);
    EXPECT_EQ(op.peer, name.find("outer") != std::string::npos ? 5 : 2) << name;
    EXPECT_EQ(op.stream, streams.at(name)) << name;
  }
  EXPECT_EQ(fwd, (std::map<std::string, int>{{"kv_p2p", 6}, {"kv_outer_p2p", 1}}));
  EXPECT_EQ(bwd, (std::map<std::string, int>{
                     {"kv_p2p", 6}, {"kv_outer_p2p", 1}, {"dkv_p2p", 8}, {"dkv_outer_p2p", 2}}));
  // Same bytes per rank as the ring: N - 1 K,V blocks forward.
  EXPECT_NEAR(bytes(b.g, 1, Phase::Forward, false) / GB, 0.47, 0.005);
}

TEST(DoubleRing, InnerRingDefaultsToTheCpRanksOfOneNode) {
  static fixtures::PerPairCost cost(1e-12);
  model::Topology topo(test::dgx_h100(4));
  auto sc = anchor_scenario(scenario::AttentionScheme::DoubleRing, scenario::Layout::ZigZag);
  schedule::Pricer pricer(cost);
  schedule::TaskGraph g;
  schedule::AttentionCtx ctx{g, topo, pricer, sc, {}, 0, 0, {}, schedule::scenario_documents(sc)};
  for (int c = 0; c < 16; ++c) ctx.group.push_back(2 * c);  // TP 2 x CP 16: 4 CP ranks a node
  EXPECT_EQ(schedule::double_ring_inner(ctx), 4);
  ctx.group.clear();
  for (int c = 0; c < 16; ++c) ctx.group.push_back(c);  // CP 16 on 2 nodes
  EXPECT_EQ(schedule::double_ring_inner(ctx), 8);
  ctx.group.resize(4);  // inside one node: one inner ring, the plain ring
  EXPECT_EQ(schedule::double_ring_inner(ctx), 4);
  ctx.group = {0, 8, 16, 24};  // one CP rank per node: no inner ring to speak of
  EXPECT_EQ(schedule::double_ring_inner(ctx), 1);
  sc.parallel.attention.inner_ring = 2;
  EXPECT_EQ(schedule::double_ring_inner(ctx), 2);
  sc.parallel.attention.inner_ring = 3;
  EXPECT_THROW(schedule::double_ring_inner(ctx), std::invalid_argument);
}

}  // namespace CPSIM_TEST_TU
