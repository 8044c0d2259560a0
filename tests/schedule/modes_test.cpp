// Masks (full, sliding window), per-document sharding, forward-only prefill, the linear-attention
// all-to-all and the chunked loss in the task graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "model/transformer.hpp"
#include "schedule/attention.hpp"
#include "schedule/partition.hpp"
#include "schedule/step.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using scenario::AttentionMask;
using schedule::Documents;
using schedule::OpKind;
using schedule::Phase;
using schedule::TokenRun;

namespace {

/// Every token of a run, enumerated.
std::vector<int64_t> tokens_of(const TokenRun& r) {
  std::vector<int64_t> out;
  for (int64_t c = 0; c < r.count; ++c)
    for (int64_t k = 0; k < r.length; ++k) out.push_back(r.begin + c * r.stride + k);
  return out;
}

int64_t brute(const TokenRun& q, const TokenRun& kv, const Documents& d) {
  auto doc = [&](int64_t x) {
    size_t k = 0;
    while (k + 1 < d.starts.size() && d.starts[k + 1] <= x) ++k;
    return k;
  };
  int64_t n = 0;
  for (int64_t i : tokens_of(q))
    for (int64_t j : tokens_of(kv)) {
      if (doc(i) != doc(j)) continue;
      if (d.mask == AttentionMask::Full) n++;
      else if (d.mask == AttentionMask::Causal) n += j <= i;
      else n += j <= i && i - j < d.window;
    }
  return n;
}

TokenRun random_run(std::mt19937_64& rng, int64_t s) {
  TokenRun r;
  r.length = 1 + static_cast<int64_t>(rng() % 6);
  r.count = 1 + static_cast<int64_t>(rng() % 4);
  r.stride = r.count > 1 ? r.length + static_cast<int64_t>(rng() % 7) : 0;
  const int64_t span = (r.count - 1) * r.stride + r.length;
  r.begin = static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, s - span)));
  return r;
}

TEST(Masks, PairCountsMatchBruteForce) {
  std::mt19937_64 rng(7);
  for (int it = 0; it < 3000; ++it) {
    const int64_t s = 48;
    Documents d = Documents::single(s);
    if (rng() % 2) d = Documents::from_lengths({13, 7, 28});
    const AttentionMask masks[] = {AttentionMask::Causal, AttentionMask::Full, AttentionMask::SlidingWindow};
    d.mask = masks[rng() % 3];
    d.window = 1 + static_cast<int64_t>(rng() % 20);
    const TokenRun q = random_run(rng, s), kv = random_run(rng, s);
    ASSERT_EQ(schedule::count_pairs(q, kv, d), brute(q, kv, d))
        << "mask " << static_cast<int>(d.mask) << " window " << d.window << " q " << q.begin << "+"
        << q.length << "x" << q.count << "/" << q.stride << " kv " << kv.begin << "+" << kv.length << "x"
        << kv.count << "/" << kv.stride;
  }
}

TEST(Masks, TotalPairs) {
  Documents d = Documents::from_lengths({10, 3});
  d.mask = AttentionMask::Full;
  EXPECT_EQ(schedule::total_pairs(d), 100 + 9);
  d.mask = AttentionMask::SlidingWindow;
  d.window = 4;  // doc of 10: 1+2+3+4 + 6*4 = 34; doc of 3: 6
  EXPECT_EQ(schedule::total_pairs(d), 34 + 6);
  const TokenRun all{0, 13, 0, 1};
  EXPECT_EQ(schedule::count_pairs(all, all, d), 40);
}

// ---- per-document sharding ----

TEST(DocumentSharding, EachDocumentIn2NChunks) {
  const Documents d = Documents::from_lengths({16, 8, 40});
  const auto p = schedule::make_document_partition(d, 2);
  // Document [0,16): chunks of 4: rank 0 gets [0,4) and [12,16); rank 1 [4,8) and [8,12).
  ASSERT_EQ(p.chunks[0].size(), 6u);
  EXPECT_EQ(p.chunks[0][0].begin, 0);
  EXPECT_EQ(p.chunks[0][0].length, 4);
  EXPECT_EQ(p.chunks[0][1].begin, 12);
  EXPECT_EQ(p.chunks[1][0].begin, 4);
  EXPECT_EQ(p.chunks[1][1].begin, 8);
  // Document [16,24): chunks of 2; document [24,64): chunks of 10.
  EXPECT_EQ(p.chunks[0][2].begin, 16);
  EXPECT_EQ(p.chunks[0][3].begin, 22);
  EXPECT_EQ(p.chunks[1][4].begin, 34);
  EXPECT_EQ(p.chunks[1][5].begin, 44);
  EXPECT_EQ(p.tokens_of(0) + p.tokens_of(1), 64);
  // Every token exactly once.
  std::set<int64_t> seen;
  for (const auto& rank : p.chunks)
    for (const auto& r : rank)
      for (int64_t t : tokens_of(r)) EXPECT_TRUE(seen.insert(t).second);
  EXPECT_EQ(seen.size(), 64u);
}

TEST(DocumentSharding, BalancesALognormalMix) {
  // 128K tokens, cp 8, lognormal documents of mean 8K (seed 1): the packed sequence split as
  // one is far from balanced; per document it is balanced.
  const Documents d = Documents::random(131072, 8192, "lognormal", 1);
  const auto whole = schedule::make_partition(131072, 8, scenario::Layout::ZigZag);
  const auto per_doc = schedule::make_document_partition(d, 8);
  const double before = schedule::ring_table(whole, d).imbalance();
  const double after = schedule::ring_table(per_doc, d).imbalance();
  EXPECT_GT(before, 1.2);
  EXPECT_LT(after, 1.01);
  // The same pairs either way.
  int64_t a = 0, b = 0;
  for (auto v : schedule::ring_table(whole, d).per_rank) a += v;
  for (auto v : schedule::ring_table(per_doc, d).per_rank) b += v;
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, schedule::total_pairs(d));
}

// ---- graphs ----

scenario::Scenario small_scenario(int cp) {
  scenario::Scenario sc;
  sc.platform = fixtures::nvswitch_node(8, 100e9, 1e-6);
  sc.model = fixtures::anchor_model();
  sc.model.layers = 4;
  sc.model.total_params = 0;
  sc.training.seq_len = 16384;
  sc.parallel.cp = cp;
  sc.parallel.attention.scheme = scenario::AttentionScheme::Ring;
  sc.parallel.attention.layout = scenario::Layout::Contiguous;
  return sc;
}

struct Graph {
  schedule::TaskGraph g;
  schedule::BuildInfo info;
};

void build(Graph& out, const scenario::Scenario& sc) {
  static fixtures::PerPairCost cost(1e-12);
  model::Topology topo(sc.platform);
  schedule::Pricer pricer(cost);
  out.info = schedule::build_scenario(sc, topo, pricer, out.g);
  out.g.finalize();
}

constexpr int kFwd = static_cast<int>(Phase::Forward), kBwd = static_cast<int>(Phase::Backward);

int count_named(const schedule::TaskGraph& g, const std::string& name, int phase = -1) {
  int n = 0;
  for (const auto& op : g.ops())
    if (g.str(op.label.name) == name && (phase < 0 || static_cast<int>(op.label.phase) == phase)) ++n;
  return n;
}

TEST(Prefill, NoBackwardNoGradientReductionNoOptimizer) {
  for (auto scope : {scenario::Scope::AttentionLayer, scenario::Scope::Layer, scenario::Scope::Step}) {
    for (int pp : {1, 2}) {
      scenario::Scenario sc = small_scenario(2);
      sc.simulation.scope = scope;
      sc.parallel.pp = pp;
      sc.parallel.dp = 2;
      sc.training.micro_batches = 4;
      sc.parallel.zero_stage = 3;
      sc.training.recompute = scenario::Recompute::None;
      Graph train;
      build(train, sc);
      sc.mode = scenario::Mode::Prefill;
      Graph pre;
      build(pre, sc);
      int backward = 0, optimizer = 0, forward = 0, train_backward = 0;
      for (const auto& op : pre.g.ops()) {
        backward += op.label.phase == Phase::Backward;
        optimizer += op.label.phase == Phase::Optimizer;
        forward += op.label.phase == Phase::Forward;
        const std::string n = pre.g.str(op.label.name);
        EXPECT_EQ(n.find("dp_"), std::string::npos) << n;
        EXPECT_EQ(n.find("zero3"), std::string::npos) << n;
        EXPECT_EQ(n.find("cross_entropy"), std::string::npos) << n;
      }
      for (const auto& op : train.g.ops()) train_backward += op.label.phase == Phase::Backward;
      EXPECT_EQ(backward, 0);
      EXPECT_EQ(optimizer, 0);
      EXPECT_GT(forward, 0);
      EXPECT_GT(train_backward, 0);
      // The same attention forward kernels as the training step builds (no recomputation).
      EXPECT_EQ(count_named(pre.g, "attn_fwd"), count_named(train.g, "attn_fwd"));
      EXPECT_GT(train.info.model_flops, 2.5 * pre.info.model_flops);
    }
  }
}

TEST(Prefill, EverySchemeLayoutAndLinearScheme) {
  using AS = scenario::AttentionScheme;
  using L = scenario::Layout;
  using LS = scenario::LinearScheme;
  for (AS scheme : {AS::Ring, AS::DoubleRing, AS::AllGather, AS::Ulysses, AS::Usp})
    for (L layout : {L::Contiguous, L::ZigZag, L::Striped})
      for (LS lin : {LS::StateAllGather, LS::Relay, LS::AllToAll}) {
        scenario::Scenario sc = small_scenario(8);
        sc.model.heads_q = 8;
        sc.model.heads_kv = 8;
        sc.model.linear_heads_k = 8;
        sc.parallel.attention.scheme = scheme;
        sc.parallel.attention.layout = layout;
        sc.parallel.attention.ulysses_degree = 2;
        sc.parallel.attention.inner_ring = 4;
        sc.parallel.linear = lin;
        sc.training.documents = {4096, 8192, 4096};
        sc.mode = scenario::Mode::Prefill;
        Graph g;
        build(g, sc);
        int backward = 0, attention = 0, linear = 0;
        for (const auto& op : g.g.ops()) {
          backward += op.label.phase != Phase::Forward && op.label.phase != Phase::None;
          const std::string n = g.g.str(op.label.name);
          attention += n == "attn_fwd";
          // the op that leaves a rank's outputs: the whole chunk call (a2a) or, under FLA's
          // state-passing CP, the recurrence from the merged initial state
          linear += n == "gdn_chunk_fwd" || n == "gdn_recurrence_fwd";
        }
        EXPECT_EQ(backward, 0);
        EXPECT_GT(attention, 0);
        EXPECT_EQ(linear, 3 * 8);  // 3 linear layers of the 4, one kernel per CP rank
      }
}

TEST(SlidingWindow, AllGatherGathersOnlyTheWindow) {
  scenario::Scenario sc = small_scenario(8);
  sc.model.pattern = {scenario::LayerKind::FullAttention};
  sc.parallel.attention.scheme = scenario::AttentionScheme::AllGather;
  sc.simulation.scope = scenario::Scope::AttentionLayer;
  sc.mode = scenario::Mode::Prefill;
  auto gathered = [&] {
    Graph g;
    build(g, sc);
    double b = 0;
    for (const auto& op : g.g.ops())
      if (op.kind == OpKind::Transfer && g.g.str(op.label.name) == "allgather_kv" && op.peer == 0) b += op.bytes;
    return b;
  };
  const double causal = gathered();
  sc.model.attention_mask = AttentionMask::SlidingWindow;
  sc.model.window = 1024;
  // Contiguous blocks of 2K: 2K own + the 1K window before it, of the 16K.
  EXPECT_NEAR(gathered() / causal, 3072.0 / 16384, 1e-9);
  // Zig-zag chunks of 1K, two per rank: 2K own + 2 x 1K window.
  sc.parallel.attention.layout = scenario::Layout::ZigZag;
  EXPECT_NEAR(gathered() / causal, 4096.0 / 16384, 1e-9);
}

TEST(SlidingWindow, RingStepsOutsideTheWindowAreSkipped) {
  // Contiguous blocks of 2K over 8 ranks, a window of 2K: rank r needs its own block and the one
  // before; the ring stops after step 1, forward and backward.
  scenario::Scenario sc = small_scenario(8);
  sc.model.pattern = {scenario::LayerKind::FullAttention};
  sc.model.attention_mask = AttentionMask::SlidingWindow;
  sc.model.window = 2048;
  sc.simulation.scope = scenario::Scope::AttentionLayer;
  Graph g;
  build(g, sc);
  // Forward: 8 kernels at step 0, 7 at step 1 (rank 0 holds rank 7's block, all in its
  // future); K,V sent once per rank.
  EXPECT_EQ(count_named(g.g, "attn_fwd"), 15);
  EXPECT_EQ(count_named(g.g, "kv_p2p", kFwd), 8);
  // Backward: K,V sent once again; each block's dK,dV partial goes home once (rank 0's block
  // is also only its own partial plus rank 1's).
  EXPECT_EQ(count_named(g.g, "kv_p2p", kBwd), 8);
  EXPECT_EQ(count_named(g.g, "dkv_p2p", kBwd), 16);
  // Without the window: 7 steps of transfers.
  sc.model.attention_mask = AttentionMask::Causal;
  Graph c;
  build(c, sc);
  EXPECT_EQ(count_named(c.g, "kv_p2p", kFwd), 56);
  // A full (bidirectional) mask: every block against every block.
  sc.model.attention_mask = AttentionMask::Full;
  Graph f;
  build(f, sc);
  EXPECT_EQ(count_named(f.g, "attn_fwd"), 64);
}

TEST(SlidingWindow, SlidingPatternEntriesGetTheWindow) {
  scenario::Scenario sc = small_scenario(8);
  sc.model.layers = 2;
  sc.model.pattern = {scenario::LayerKind::FullAttention, scenario::LayerKind::FullAttention};
  sc.model.pattern_sliding = {1, 0};
  sc.model.window = 2048;
  sc.simulation.scope = scenario::Scope::Layer;
  sc.mode = scenario::Mode::Prefill;
  Graph g;
  build(g, sc);
  int l0 = 0, l1 = 0;
  for (const auto& op : g.g.ops())
    if (g.g.str(op.label.name) == "kv_p2p") (op.label.layer == 0 ? l0 : l1)++;
  EXPECT_EQ(l0, 8);   // sliding: one step of transfers
  EXPECT_EQ(l1, 56);  // causal: seven
}

TEST(LinearA2a, BytesAndHeadDivisibility) {
  const auto m = fixtures::anchor_model();  // 48 value heads, 16 key heads of 128
  const auto b = schedule::linear_a2a_bytes(m, 1, 8, 1000, 1);
  EXPECT_DOUBLE_EQ(b.inputs, 1000.0 * (2 * 16 * 128 + 48 * 128 + 2 * 48) * 2);
  EXPECT_DOUBLE_EQ(b.output, 1000.0 * 48 * 128 * 2);
  EXPECT_THROW(schedule::linear_a2a_bytes(m, 1, 32, 1000, 1), std::invalid_argument);
  EXPECT_NO_THROW(schedule::linear_a2a_bytes(m, 2, 8, 1000, 1));

  scenario::Scenario sc = small_scenario(8);
  sc.model.pattern = {scenario::LayerKind::LinearAttention};
  sc.parallel.linear = scenario::LinearScheme::AllToAll;
  sc.training.recompute = scenario::Recompute::None;
  sc.simulation.scope = scenario::Scope::Layer;
  sc.model.layers = 1;
  Graph g;
  build(g, sc);
  EXPECT_EQ(count_named(g.g, "state_allgather"), 0);
  EXPECT_GT(count_named(g.g, "a2a_qkv_gates", kFwd), 0);
  EXPECT_GT(count_named(g.g, "a2a_out", kFwd), 0);
  EXPECT_GT(count_named(g.g, "a2a_dout", kBwd), 0);
  EXPECT_GT(count_named(g.g, "a2a_dqkv_gates", kBwd), 0);
  // Each rank sends 7/8 of its inputs in the forward's first all-to-all.
  double sent = 0;
  for (const auto& op : g.g.ops())
    if (op.kind == OpKind::Transfer && g.g.str(op.label.name) == "a2a_qkv_gates" && op.rank == 0 && op.peer != 0)
      sent += op.bytes;
  EXPECT_NEAR(sent, schedule::linear_a2a_bytes(sc.model, 1, 8, 2048, 1).inputs * 7 / 8, 1);
}

TEST(ChunkedLoss, SameFlopsInChunks) {
  scenario::Scenario sc = small_scenario(1);
  sc.model.pattern = {scenario::LayerKind::FullAttention};
  sc.model.layers = 1;
  Graph m;
  build(m, sc);
  sc.training.loss = scenario::Loss::Chunked;
  Graph c;
  build(c, sc);
  const double chunk = model::loss_chunk_tokens(sc);
  // Liger: next_pow2(ceil(16384 / ceil(248320 / 5120))) = next_pow2(335) = 512.
  EXPECT_EQ(chunk, 512);
  EXPECT_EQ(count_named(m.g, "lm_head"), 1);
  EXPECT_EQ(count_named(c.g, "lm_head"), 16384 / 512);
  EXPECT_EQ(count_named(c.g, "cross_entropy"), 2 * 16384 / 512);
  EXPECT_DOUBLE_EQ(m.info.model_flops, c.info.model_flops);
}

}  // namespace

// Gated DeltaNet under FLA's state-passing CP: per rank the local kernels, the pre-process walk,
// the (state, transition) all-gather and the recurrence from the merged state; no correction
// GEMM. One GPU runs the whole call.
TEST(LinearAttentionCp, RunsTheKernelsFlaCpRuns) {
  scenario::Scenario sc = small_scenario(8);
  sc.parallel.linear = scenario::LinearScheme::StateAllGather;
  Graph g;
  build(g, sc);
  // One short convolution per linear layer pass per rank (layers x micro-batches x 8 ranks).
  const int passes = count_named(g.g, "short_conv", kFwd);
  ASSERT_GT(passes, 0);
  ASSERT_EQ(passes % 8, 0);
  for (const char* name : {"gdn_local_fwd", "gdn_cp_preprocess_fwd", "gdn_recurrence_fwd"})
    EXPECT_EQ(count_named(g.g, name, kFwd), passes) << name;
  for (const char* name : {"gdn_local_bwd", "gdn_cp_preprocess_bwd", "gdn_recurrence_bwd"})
    EXPECT_EQ(count_named(g.g, name, kBwd), count_named(g.g, "short_conv", kBwd)) << name;
  EXPECT_EQ(count_named(g.g, "state_correction"), 0);
  EXPECT_EQ(count_named(g.g, "gdn_chunk_fwd"), 0);
  // Forward: ranks 1..7 fold their preceding ranks' pairs (rank 0 has none).
  EXPECT_EQ(count_named(g.g, "state_fold", kFwd), passes / 8 * 7);
  // The recurrence waits for both its own pre-process and the exchange.
  const auto& ops = g.g.ops();
  for (size_t id = 0; id < ops.size(); ++id) {
    if (g.g.str(ops[id].label.name) != "gdn_recurrence_fwd") continue;
    const auto pv = g.g.preds(static_cast<schedule::OpId>(id));
    const schedule::OpId *b = pv.data(), *e = b + pv.size();
    bool after_pre = false, after_exchange = false;
    for (const auto* p = b; p != e; ++p) {
      const std::string n = g.g.str(ops[*p].label.name);
      after_pre |= n == "gdn_cp_preprocess_fwd";
      after_exchange |= n != "gdn_cp_preprocess_fwd";
    }
    EXPECT_TRUE(after_pre && after_exchange);
  }
  scenario::Scenario one = small_scenario(1);
  Graph g1;
  build(g1, one);
  EXPECT_EQ(count_named(g1.g, "gdn_chunk_fwd", kFwd), count_named(g1.g, "short_conv", kFwd));
  EXPECT_EQ(count_named(g1.g, "gdn_cp_preprocess_fwd"), 0);
  EXPECT_EQ(count_named(g1.g, "state_allgather"), 0);
}

}  // namespace CPSIM_TEST_TU
