// Behaviour that follows from the mechanisms, replayed on synthetic platforms: ring time with
// free communication, the contiguous / zig-zag ratio, exposed communication when transfers are
// slower than compute, the pipeline bubble emerging from a 1F1B replay, and the double ring.
#include <gtest/gtest.h>

#include "app/child_replay.hpp"
#include "engine/replay.hpp"
#include "support/platforms.hpp"
#include "report/metrics.hpp"
#include "schedule/attention.hpp"
#include "schedule/step.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

constexpr double kPairSeconds = 1e-6;

scenario::Scenario tiny(int64_t s, int n, scenario::Layout layout, int head_dim = 8) {
  scenario::Scenario sc;
  sc.model.name = "tiny";
  sc.model.layers = 1;
  sc.model.hidden = 64;
  sc.model.heads_q = 1;
  sc.model.heads_kv = 1;
  sc.model.head_dim = head_dim;
  sc.model.ffn_hidden = 128;
  sc.model.vocab = 100;
  sc.training.seq_len = s;
  sc.parallel.cp = n;
  sc.parallel.attention.layout = layout;
  return sc;
}

/// Replays one ring forward; returns the makespan.
double ring_forward_time(const scenario::Scenario& sc, double bw_Bps, bool simgrid = false) {
  const int n = sc.parallel.cp;
  fixtures::PerPairCost cost(kPairSeconds);
  model::Topology topo(fixtures::nvswitch_node(n, bw_Bps, 0.0));
  schedule::Pricer pricer(cost);
  schedule::TaskGraph g;
  schedule::AttentionCtx ctx{g, topo, pricer, sc, {}, 0, 0, {}, schedule::scenario_documents(sc)};
  for (int i = 0; i < n; ++i) ctx.group.push_back(i);
  ctx.geo = {1, 1, sc.model.head_dim, 1};
  const auto part = schedule::make_partition(sc.training.seq_len, n, sc.parallel.attention.layout);
  schedule::ring_pass(ctx, part, false, std::vector<schedule::OpId>(n, schedule::kNoOp), "ring");
  g.finalize();
  // In a child: SimGrid allows one engine per process, and other tests here replay too.
  return app::replay_in_child(g, topo, simgrid ? scenario::EngineKind::SimGrid
                                                  : scenario::EngineKind::Analytic)
      .makespan_s;
}

}  // namespace

TEST(RingFreeComm, TimeIsSumOfSlowestRankPerStep) {
  // Lesson, s = 16, N = 4: contiguous 10 + 16 + 16 + 16 = 58 pair-times, zig-zag 34.
  const double contiguous = ring_forward_time(tiny(16, 4, scenario::Layout::Contiguous), 1e18);
  const double zigzag = ring_forward_time(tiny(16, 4, scenario::Layout::ZigZag), 1e18);
  EXPECT_NEAR(contiguous, 58 * kPairSeconds, 1e-12);
  EXPECT_NEAR(zigzag, 34 * kPairSeconds, 1e-12);
  EXPECT_NEAR(contiguous / zigzag, 58.0 / 34.0, 1e-9);
}

TEST(RingFreeComm, ContiguousOverZigZagTendsTo58Over34AtS32N8) {
  // s = 32, N = 8 zig-zag: 66 pairs per rank, balanced.
  const double zigzag = ring_forward_time(tiny(32, 8, scenario::Layout::ZigZag), 1e18);
  EXPECT_NEAR(zigzag, 66 * kPairSeconds, 1e-12);
}

TEST(RingOverlap, TransferFasterThanComputeIsHidden) {
  // s = 64, N = 4, zig-zag: step 0 = 2*8*9/2*... computed pairs; per-step compute >= 128 us.
  // KV block = 2 x 16 tokens x 1 head x 8 dims x 2 B = 512 B; at 512 MB/s one transfer = 1 us.
  const auto sc = tiny(64, 4, scenario::Layout::ZigZag);
  const double free = ring_forward_time(sc, 1e18);
  const double slow_link = ring_forward_time(sc, 512e6);
  EXPECT_NEAR(slow_link, free, 1e-12);
}

TEST(RingOverlap, TransferSlowerThanComputeExposesTheDifferencePerStep) {
  // Zig-zag s = 64, N = 4: every step after the first computes 2 * 8 * 8 = 128 pairs = 128 us.
  // A 512 B block at 1 MB/s takes 512 us: each of the 3 transfers exposes 512 - C_prev.
  const auto sc = tiny(64, 4, scenario::Layout::ZigZag);
  const double t = 512e-6;
  const double last_step = 128 * kPairSeconds;
  const double got = ring_forward_time(sc, 1e6);
  EXPECT_NEAR(got, 3 * t + last_step, 1e-9);
  const double free = ring_forward_time(sc, 1e18);
  // Exposed communication grows by (transfer - compute) per step.
  const double step0 = 8 * 9 / 2 * 2 + 64;  // two causal diagonals + one full chunk pair
  EXPECT_NEAR(free, (step0 + 3 * 128) * kPairSeconds, 1e-12);
  EXPECT_NEAR(got - free, (t - step0 * kPairSeconds) + 2 * (t - 128 * kPairSeconds), 1e-9);
}

TEST(RingEngines, SimGridAgreesWithAnalyticWithoutContention) {
  // A ring has one flow per link direction: no sharing, so both engines must agree.
  const auto sc = tiny(64, 4, scenario::Layout::ZigZag);
  const double analytic = ring_forward_time(sc, 1e6, false);
  const double simgrid = ring_forward_time(sc, 1e6, true);
  EXPECT_NEAR(simgrid, analytic, 1e-3 * analytic);
}

TEST(Pipeline, OneFOneBBubbleEmergesFromReplay) {
  // p = 8 stages of equal cost, m = 32 micro-batches, free communication: the idle time per
  // stage relative to its compute is (p - 1) / m = 21.9 %.
  auto sc = tiny(64, 1, scenario::Layout::Contiguous);
  sc.model.layers = 8;
  sc.parallel.pp = 8;
  sc.training.micro_batches = 32;
  sc.training.recompute = scenario::Recompute::None;
  sc.simulation.scope = scenario::Scope::Step;
  sc.platform = fixtures::nvswitch_node(8, 1e18, 0.0);
  fixtures::PerPairCost cost(kPairSeconds);
  model::Topology topo(sc.platform);
  const auto p = schedule::plan(sc, topo, cost);
  const auto& g = p.graph;
  const auto tr = engine::replay_analytic(g, topo);
  const auto r = report::analyze(p, tr, topo, model::estimate_memory(sc));
  EXPECT_NEAR(r.bubble_ratio, 7.0 / 32.0, 1e-9);
  EXPECT_NEAR(100 * r.bubble_ratio, 21.9, 0.05);
}

TEST(Pipeline, InterleavedScheduleDividesTheBubbleByVirtualStages) {
  // p = 4 stages x v = 2 virtual chunks, m = 8 micro-batches, equal chunk costs, free
  // communication: Megatron's interleaved 1F1B bubble is (p - 1) / (v m) = 3/16.
  auto sc = tiny(64, 1, scenario::Layout::Contiguous);
  sc.model.layers = 8;
  sc.parallel.pp = 4;
  sc.parallel.virtual_stages = 2;
  sc.training.micro_batches = 8;
  sc.training.recompute = scenario::Recompute::None;
  sc.simulation.scope = scenario::Scope::Step;
  sc.platform = fixtures::nvswitch_node(4, 1e18, 0.0);
  fixtures::PerPairCost cost(kPairSeconds);
  model::Topology topo(sc.platform);
  const auto p = schedule::plan(sc, topo, cost);
  const auto& g = p.graph;
  const auto r = report::analyze(p, engine::replay_analytic(g, topo), topo, model::estimate_memory(sc));
  EXPECT_NEAR(r.bubble_ratio, 3.0 / 16.0, 1e-9);
}

TEST(Breakdown, ComputeByLayerTypeAddsUpToCompute) {
  // A hybrid model (3 linear-attention layers then 1 full) on 2 GPUs: the per-layer-type
  // compute adds up to the total compute time of the step.
  auto sc = tiny(64, 2, scenario::Layout::ZigZag);
  sc.model.layers = 4;
  sc.model.pattern = {scenario::LayerKind::LinearAttention, scenario::LayerKind::LinearAttention,
                      scenario::LayerKind::LinearAttention, scenario::LayerKind::FullAttention};
  sc.model.linear_heads_v = 2;
  sc.model.linear_heads_k = 1;
  sc.model.linear_key_dim = 8;
  sc.model.linear_value_dim = 8;
  sc.simulation.scope = scenario::Scope::Step;
  sc.platform = fixtures::nvswitch_node(2, 1e11, 1e-6);
  auto cost = model::CostModel::roofline(sc.platform.gpu);
  model::Topology topo(sc.platform);
  const auto p = schedule::plan(sc, topo, *cost);
  const auto& g = p.graph;
  const auto r = report::analyze(p, engine::replay_analytic(g, topo), topo, model::estimate_memory(sc));
  double sum = 0;
  for (const auto& [k, v] : r.compute_by_layer_kind) sum += v;
  EXPECT_GT(r.compute_by_layer_kind.at("full-attention"), 0);
  EXPECT_GT(r.compute_by_layer_kind.at("linear-attention"), 0);
  EXPECT_NEAR(sum, r.compute_s, 1e-9 * r.compute_s);
}

// Double ring (LoongTrain): with one inner ring it is the plain ring; over several nodes with a
// slow network it hides the inter-node transfers the plain ring exposes.
namespace {

/// One attention layer (forward + backward) of tiny() with `scheme`, CP over `nodes` DGX-like
/// nodes of 8 GPUs, each GPU with its own NIC rail of `nic_Bps`.
scenario::Scenario attention_layer(scenario::AttentionScheme scheme, int nodes, int cp, int64_t s,
                                   double nic_Bps, int inner_ring = 0) {
  auto sc = tiny(s, cp, scenario::Layout::ZigZag);
  sc.model.pattern = {scenario::LayerKind::FullAttention};
  sc.parallel.attention.scheme = scheme;
  sc.parallel.attention.inner_ring = inner_ring;
  sc.simulation.scope = scenario::Scope::AttentionLayer;
  sc.platform = test::dgx_h100(nodes);
  sc.platform.nic.bw_Bps = nic_Bps;
  return sc;
}

struct Replayed {
  schedule::Plan p;
  report::Result r;
};

void run(Replayed& out, const scenario::Scenario& sc, scenario::EngineKind engine) {
  fixtures::PerPairCost cost(kPairSeconds);
  model::Topology topo(sc.platform);
  out.p = schedule::plan(sc, topo, cost);
  const auto tr = app::replay_in_child(out.p.graph, topo, engine);
  out.r = report::analyze(out.p, tr, topo, model::estimate_memory(sc));
}

}  // namespace

TEST(DoubleRing, OneInnerRingOfAllRanksIsThePlainRing) {
  // inner_ring = N: the same kernels and transfers in the same order, the same times.
  const auto ring = attention_layer(scenario::AttentionScheme::Ring, 2, 16, 512, 5e6);
  const auto dring = attention_layer(scenario::AttentionScheme::DoubleRing, 2, 16, 512, 5e6, 16);
  Replayed a, b;
  run(a, ring, scenario::EngineKind::Analytic);
  run(b, dring, scenario::EngineKind::Analytic);
  ASSERT_EQ(a.p.graph.size(), b.p.graph.size());
  for (schedule::OpId id = 0; id < a.p.graph.size(); ++id) {
    const auto& x = a.p.graph.op(id);
    const auto& y = b.p.graph.op(id);
    SCOPED_TRACE(a.p.graph.describe(id));
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.peer, y.peer);
    EXPECT_EQ(x.stream, y.stream);
    EXPECT_EQ(a.p.graph.str(x.label.name), b.p.graph.str(y.label.name));
    EXPECT_EQ(x.label.step, y.label.step);
    EXPECT_EQ(x.label.chunk_q, y.label.chunk_q);
    EXPECT_EQ(x.label.chunk_kv, y.label.chunk_kv);
    EXPECT_EQ(x.duration_s, y.duration_s);
    EXPECT_EQ(x.bytes, y.bytes);
  }
  EXPECT_EQ(a.p.graph.num_edges(), b.p.graph.num_edges());
  EXPECT_DOUBLE_EQ(a.r.step_time_s, b.r.step_time_s);
  EXPECT_DOUBLE_EQ(a.r.attention.exposed_comm_s, b.r.attention.exposed_comm_s);
}

TEST(DoubleRing, OnOneNodeTheDefaultInnerRingIsThePlainRing) {
  Replayed a, b;
  run(a, attention_layer(scenario::AttentionScheme::Ring, 1, 8, 256, 5e6),
      scenario::EngineKind::Analytic);
  run(b, attention_layer(scenario::AttentionScheme::DoubleRing, 1, 8, 256, 5e6),
      scenario::EngineKind::Analytic);
  EXPECT_EQ(a.p.graph.size(), b.p.graph.size());
  EXPECT_DOUBLE_EQ(a.r.step_time_s, b.r.step_time_s);
}

namespace {

/// Zig-zag, s = 512 over CP 16 on 2 nodes: 32 tokens per rank, and every step after the first
/// computes 2 x 16 x 16 = 512 pairs, 0.512 ms forward (1.28 ms backward). A K,V block (and a
/// dK,dV partial) is 2 x 32 x 8 x 2 B = 1 KiB; at 0.5 MB/s per NIC it takes ~2.2 ms to cross
/// nodes, while NVLink inside a node is instant.
///
/// Plain ring: at every step the two ranks at the node boundaries (7 -> 8, 15 -> 0) send over
/// the network, and since every rank waits for its next block, every step lasts a network
/// transfer (forward and backward): the layer takes more than twice its compute.
/// Double ring (inner ring = the 8 ranks of a node, outer ring of 2): each rank sends one block
/// over the network per outer step, every rank on its own NIC rail (8 transfers in parallel,
/// no link shared), and the block has a whole inner ring of 8 block computations (4 ms forward,
/// 10 ms backward) to arrive in; the dK,dV sums of an inner ring cross nodes during the next
/// outer step likewise. What stays exposed is the last dK,dV hop home, one network transfer.
void expect_double_ring_hides_the_network(scenario::EngineKind engine) {
  Replayed ring, dring;
  run(ring, attention_layer(scenario::AttentionScheme::Ring, 2, 16, 512, 0.5e6), engine);
  run(dring, attention_layer(scenario::AttentionScheme::DoubleRing, 2, 16, 512, 0.5e6), engine);
  const double block = 1024, hop = block / (0.5e6 * 0.94);  // one block over a NIC
  // The same work. The same bytes, but for the dK,dV partials: a block's partial goes round
  // each of the 2 inner rings it visits (8 NVLink hops each) and then 2 hops over the outer
  // ring, N + 2 hops, where the ring's takes N (2 of them over the network too).
  EXPECT_NEAR(dring.r.compute_s, ring.r.compute_s, 1e-9 * ring.r.compute_s);
  EXPECT_DOUBLE_EQ(dring.r.attention.bytes_sent_per_rank,
                   ring.r.attention.bytes_sent_per_rank + 2 * block);
  // The ring is network-bound.
  EXPECT_GT(ring.r.step_time_s, 2 * ring.r.compute_s);
  // The double ring: its compute plus one exposed network transfer, on every rank.
  EXPECT_NEAR(dring.r.step_time_s - dring.r.compute_s, hop, 0.02 * hop);
  EXPECT_NEAR(dring.r.attention.exposed_comm_s, hop, 0.02 * hop);
  EXPECT_LT(dring.r.attention.exposed_comm_s, 0.25 * ring.r.attention.exposed_comm_s);
}

}  // namespace

TEST(DoubleRing, HidesASlowInterNodeNetworkThatThePlainRingExposes) {
  expect_double_ring_hides_the_network(scenario::EngineKind::Analytic);
}

TEST(DoubleRing, HidesASlowInterNodeNetworkUnderSimGridToo) {
  expect_double_ring_hides_the_network(scenario::EngineKind::SimGrid);
}

}  // namespace CPSIM_TEST_TU
