// A data-parallel replica copied from the first one's ops must be the very graph that building
// it gives, op for op and edge for edge (schedule/step.cpp, why_not_copy), with or without fleet
// noise; where the copy would not be exact it is refused and every replica is built.
#include <gtest/gtest.h>

#include "engine/replay.hpp"
#include "schedule/attention.hpp"
#include "schedule/step.hpp"
#include "support/built_step.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

/// CP 8 per replica (one DGX node each), 4 replicas, every replica built (symmetry off); two
/// replicas per leaf group, so that the copies' routes are checked across leaves too.
scenario::Scenario job() {
  scenario::Scenario sc = test::small_dp_job(scenario::Symmetry::Off);
  sc.platform.nodes_per_leaf = 2;
  return sc;
}

/// A step built and timed on the analytic engine, with what priced it.
struct Built : test::BuiltStep {
  explicit Built(const scenario::Scenario& sc)
      : BuiltStep(sc), pricing(pricer.sources()), pricing_time_s(pricer.times()), step_s(analytic_s()) {}
  schedule::Pricer::Sources pricing;
  schedule::Pricer::Times pricing_time_s;
  double step_s;
};

Built build(scenario::Scenario sc, bool copy) {
  sc.simulation.copy_replicas = copy;
  return Built(sc);
}

void expect_same_graph(const Built& a, const Built& b) {
  ASSERT_EQ(a.g.size(), b.g.size());
  ASSERT_EQ(a.g.num_edges(), b.g.num_edges());
  for (schedule::OpId id = 0; id < a.g.size(); ++id) {
    const auto &x = a.g.op(id), &y = b.g.op(id);
    // (The op named on failure only: a SCOPED_TRACE per op was most of this test under ASan.)
    ASSERT_EQ(x.kind, y.kind) << a.g.describe(id);
    ASSERT_EQ(x.rank, y.rank) << a.g.describe(id);
    ASSERT_EQ(x.peer, y.peer) << a.g.describe(id);
    ASSERT_EQ(x.stream, y.stream) << a.g.describe(id);
    ASSERT_EQ(x.peer_stream, y.peer_stream) << a.g.describe(id);
    ASSERT_EQ(x.unordered, y.unordered) << a.g.describe(id);
    ASSERT_EQ(x.interference_priced, y.interference_priced) << a.g.describe(id);
    ASSERT_EQ(x.noisy, y.noisy) << a.g.describe(id);
    ASSERT_EQ(x.sharers, y.sharers) << a.g.describe(id);
    ASSERT_EQ(x.duration_s, y.duration_s) << a.g.describe(id);
    ASSERT_EQ(x.flops, y.flops) << a.g.describe(id);
    ASSERT_EQ(x.bytes, y.bytes) << a.g.describe(id);
    ASSERT_EQ(x.max_rate_Bps, y.max_rate_Bps) << a.g.describe(id);
    ASSERT_EQ(x.extra_latency_s, y.extra_latency_s) << a.g.describe(id);
    ASSERT_EQ(a.g.describe(id), b.g.describe(id));  // name, scheme, layer, micro, step, chunks, phase
    ASSERT_EQ(a.g.str(x.label.category), b.g.str(y.label.category)) << a.g.describe(id);
    ASSERT_EQ(x.label.shape < 0, y.label.shape < 0) << a.g.describe(id);
    if (x.label.shape >= 0) {
      const auto &s = a.g.shapes()[static_cast<size_t>(x.label.shape)], &t = b.g.shapes()[static_cast<size_t>(y.label.shape)];
      ASSERT_EQ(s.q_len, t.q_len) << a.g.describe(id);
      ASSERT_EQ(s.kv_len, t.kv_len) << a.g.describe(id);
      ASSERT_EQ(s.mask, t.mask) << a.g.describe(id);
      ASSERT_EQ(s.unmasked_fraction, t.unmasked_fraction) << a.g.describe(id);
      ASSERT_EQ(s.heads_q, t.heads_q) << a.g.describe(id);
      ASSERT_EQ(s.batch, t.batch) << a.g.describe(id);
      ASSERT_EQ(s.backward, t.backward) << a.g.describe(id);
    }
    for (auto list : {&schedule::TaskGraph::preds, &schedule::TaskGraph::succs}) {
      ASSERT_EQ((a.g.*list)(id), (b.g.*list)(id)) << a.g.describe(id);
    }
    for (int side = 0; side < 2; ++side) {  // stream order: a copy's queues are its original's
      ASSERT_EQ(a.g.queue_next(id, side), b.g.queue_next(id, side)) << a.g.describe(id);
      ASSERT_EQ(a.g.queue_prev(id, side), b.g.queue_prev(id, side)) << a.g.describe(id);
    }
  }
  EXPECT_EQ(a.pricing, b.pricing);
  // A copied replica's ops count their priced time too (the summary's shares).
  ASSERT_EQ(a.pricing_time_s.size(), b.pricing_time_s.size());
  for (const auto& [kind, by_source] : a.pricing_time_s)
    for (const auto& [source, t] : by_source)
      EXPECT_NEAR(b.pricing_time_s.at(kind).at(source), t, 1e-9 * t) << kind << " " << source;
  EXPECT_EQ(a.info.full_layers_built, b.info.full_layers_built);
  EXPECT_EQ(a.step_s, b.step_s);
}

}  // namespace

TEST(ReplicaCopy, IsTheGraphBuildingEveryReplicaGives) {
  const Built copied = build(job(), true), built = build(job(), false);
  EXPECT_EQ(copied.info.replicas_copied, 3) << copied.info.why_not_copied;
  EXPECT_EQ(built.info.replicas_copied, 0);
  EXPECT_EQ(built.info.why_not_copied, "off");
  expect_same_graph(copied, built);
}

TEST(ReplicaCopy, CopiesAreNotStored) {
  // A copy stores neither its ops nor their edges and queue links: the graph holds the first replica
  // and the DP reduction only.
  const Built copied = build(job(), true), built = build(job(), false);
  EXPECT_EQ(built.g.stored_ops(), built.g.size());
  const size_t copies = copied.g.size() - copied.g.stored_ops();
  EXPECT_GT(copies, 0u);
  EXPECT_EQ(copies % 3, 0u);  // three replicas copied, none of their ops stored
}

TEST(ReplicaCopy, CopiedOpsReadTheirOriginalOnShiftedRanks) {
  schedule::TaskGraph g;
  schedule::OpLabel l;
  l.name = g.intern("k");
  g.add_priced(0, schedule::stream::kCompute, 1.0, l);
  g.add_transfer(0, schedule::stream::kCpSend, 1, schedule::stream::kCpRecv, 64, l);
  g.add_edge(0, 1);
  const schedule::OpId c1 = g.copy_ops(0, 2, 0, 1, 2);        // ops 2, 3 on ranks 2, 3
  const schedule::OpId c2 = g.copy_ops(c1, c1 + 2, 1, 1, 2);  // a copy of the copy (its edge is the copy's): ranks 4, 5
  const schedule::OpId after = g.add_compute(5, schedule::stream::kCompute, 2.0, l);
  EXPECT_EQ(c1, 2u);
  EXPECT_EQ(c2, 4u);
  EXPECT_EQ(after, 6u);
  EXPECT_EQ(g.size(), 7u);
  EXPECT_EQ(g.stored_ops(), 3u);
  EXPECT_EQ(g.num_ranks(), 6);
  EXPECT_EQ(g.op(3).rank, 2);
  EXPECT_EQ(g.op(3).peer, 3);
  EXPECT_EQ(g.op(5).rank, 4);
  EXPECT_EQ(g.op(5).peer, 5);
  EXPECT_TRUE(g.op(4).noisy);
  EXPECT_EQ(g.op(4).duration_s, 1.0);
  EXPECT_EQ(g.op(after).duration_s, 2.0);
  EXPECT_EQ(g.op(after).rank, 5);
  g.op_mut(after).duration_s = 3.0;  // a stored op after copies can still change
  EXPECT_EQ(g.op(after).duration_s, 3.0);
  EXPECT_THROW(g.op_mut(3), std::logic_error);
  g.add_edge(5, after);
  g.finalize();
  EXPECT_EQ(g.succs(4), std::vector<schedule::OpId>{5});
  int n = 0;
  for (const schedule::Op& op : g.ops()) n += op.kind == schedule::OpKind::Transfer;
  EXPECT_EQ(n, 3);
}

TEST(OpLimit, ACopiedOpCountsForItsWeight) {
  // `cpsim plan` weighs a copied op by its bytes (app/work_limit.cpp): it is not stored.
  schedule::TaskGraph g;
  g.set_op_limit(5, 0.5);
  schedule::OpLabel l;
  l.name = g.intern("k");
  g.add_compute(0, schedule::stream::kCompute, 1.0, l);
  g.add_compute(0, schedule::stream::kCompute, 1.0, l);
  g.copy_ops(0, 2, 0, 0, 1);
  g.copy_ops(0, 2, 0, 0, 2);                            // 2 stored + 0.5 x 4 copied = 4
  g.add_compute(3, schedule::stream::kCompute, 1.0, l);  // 5: at the limit, not past it
  EXPECT_THROW(g.copy_ops(0, 2, 0, 0, 4), schedule::OpLimitExceeded);  // 6
  EXPECT_THROW(g.add_compute(3, schedule::stream::kCompute, 1.0, l), schedule::OpLimitExceeded);
  EXPECT_EQ(g.size(), 7u);
}

TEST(ReplicaCopy, CopiesDrawTheirOwnNoiseAtReplay) {
  auto sc = job();
  sc.perturb.jitter_cv = 0.05;
  sc.perturb.gpu_variation_cv = 0.03;
  sc.perturb.gpu_slowdown[9] = 1.3;  // in replica 1, a copy
  const Built copied = build(sc, true), built = build(sc, false);
  EXPECT_EQ(copied.info.replicas_copied, 3) << copied.info.why_not_copied;
  expect_same_graph(copied, built);
  EXPECT_GT(copied.step_s, build(job(), true).step_s);  // the slow GPU in the copy counts
}

TEST(ReplicaCopy, RefusedWhereReplicasDifferOrMeetWhileBuilt) {
  struct Case {
    const char* why;
    scenario::Scenario sc;
  };
  std::vector<Case> cases;
  auto zero3 = job();
  zero3.parallel.zero_stage = 3;  // parameter all-gathers over the DP x CP group, built per layer
  cases.push_back({"replicas are joined while built", zero3});
  auto half = job();
  half.parallel.cp = 4;  // 8 replicas of half a node
  half.parallel.dp = 8;
  cases.push_back({"a replica is not whole nodes aligned with the NVLink domains", half});
  auto link = job();
  scenario::LinkPerturb l;
  l.gpu = 9;
  l.link = scenario::PerturbLink::NVLink;
  l.bw_factor = 0.5;
  link.perturb.links.push_back(l);
  cases.push_back({"a link is perturbed", link});
  auto rail = job();
  rail.perturb.rails_down = {1};
  cases.push_back({"a rail is down", rail});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    const Built copied = build(c.sc, true), built = build(c.sc, false);
    EXPECT_EQ(copied.info.replicas_copied, 0);
    EXPECT_EQ(copied.info.why_not_copied, c.why);
    expect_same_graph(copied, built);
  }
}

TEST(OpLimit, BuildStopsAtTheLimitWithItsOwnError) {
  // `cpsim plan` gives each child's build the ops its memory share holds; the build stops there
  // (copies included) instead of growing until the watchdog or the OOM killer ends it.
  const Built full = build(job(), true);
  auto sc = job();
  sc.simulation.max_ops = full.g.size() / 2;
  model::Topology topo(sc.platform, sc.perturb);
  auto cost = model::CostModel::roofline(sc.platform.gpu);
  schedule::Pricer pricer(*cost);
  schedule::TaskGraph g;
  try {
    schedule::build_scenario(sc, topo, pricer, g);
    FAIL() << "no exception";
  } catch (const schedule::OpLimitExceeded& e) {
    EXPECT_EQ(std::string(e.what()), "the task graph passed " + std::to_string(sc.simulation.max_ops) +
                                         " ops while being built");
  }
  // At most the limit: a copied range is refused whole when it would pass it (copy_ops), so the
  // build can stop a range short of the limit.
  EXPECT_LE(g.size(), sc.simulation.max_ops);
  EXPECT_GT(g.size(), 0u);
  sc.simulation.max_ops = full.g.size();  // exactly enough
  schedule::TaskGraph h;
  schedule::build_scenario(sc, topo, pricer, h);
  EXPECT_EQ(h.size(), full.g.size());
}

}  // namespace CPSIM_TEST_TU
