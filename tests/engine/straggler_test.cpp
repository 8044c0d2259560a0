// Stragglers and faults on synthetic platforms whose expected numbers follow from mechanisms: a
// slow GPU in a compute-bound ring, a halved link in a balanced ring, perturbations of nothing,
// rails down (PXN re-routing, impossible runs), and what the analysis says about each.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "app/child_replay.hpp"
#include "engine/replay.hpp"
#include "report/metrics.hpp"
#include "schedule/attention.hpp"
#include "schedule/compute_noise.hpp"
#include "schedule/step.hpp"
#include "support/fixtures.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

constexpr double kPairSeconds = 1e-6;

/// One attention layer (forward and backward) of a zig-zag ring over 8 GPUs of one NVSwitch
/// node; attention costs 1 us per pair, everything else is free.
scenario::Scenario ring8(double bw_Bps) {
  scenario::Scenario sc;
  sc.name = "ring8";
  sc.model.name = "tiny";
  sc.model.layers = 1;
  sc.model.hidden = 64;
  sc.model.heads_q = 1;
  sc.model.heads_kv = 1;
  sc.model.head_dim = 64;
  sc.model.ffn_hidden = 128;
  sc.model.vocab = 100;
  sc.training.seq_len = 256;
  sc.parallel.cp = 8;
  sc.parallel.attention.layout = scenario::Layout::ZigZag;
  sc.simulation.scope = scenario::Scope::AttentionLayer;
  sc.simulation.engine = scenario::EngineKind::Analytic;
  sc.platform = fixtures::nvswitch_node(8, bw_Bps, 0.0);
  return sc;
}

struct Outcome {
  engine::Trace trace;
  report::Result result;
};

Outcome run(const scenario::Scenario& sc, bool in_child = false) {
  fixtures::PerPairCost cost(kPairSeconds);
  model::Topology topo(sc.platform, sc.perturb);
  const auto p = schedule::plan(sc, topo, cost);
  Outcome r;
  r.trace = in_child ? app::replay_in_child(p.graph, topo, sc.simulation.engine)
                     : engine::replay(p.graph, topo, sc.simulation.engine);
  r.result = report::analyze(p, r.trace, topo, model::estimate_memory(sc));
  return r;
}

}  // namespace

TEST(Straggler, SlowGpuLengthensAComputeBoundRingByItsComputeShare) {
  auto sc = ring8(1e18);  // communication is free: the ring is compute-bound
  const Outcome base = run(sc);
  sc.perturb.gpu_slowdown[3] = 1.2;
  const Outcome slow = run(sc);
  // Every ring step waits for its slowest rank: the step grows by 20 % of the compute on the
  // critical path, which is all of it here.
  const double share = base.result.critical_path.by_category.at("attention") / base.result.step_time_s;
  EXPECT_GT(share, 0.99);
  EXPECT_NEAR(slow.result.step_time_s - base.result.step_time_s, 0.2 * share * base.result.step_time_s,
              0.01 * base.result.step_time_s);
  // The analysis names GPU 3: the critical path's straggler, and the rank its ring successor
  // waits on.
  EXPECT_EQ(slow.result.straggler_rank, 3);
  EXPECT_EQ(slow.result.ranks[4].top_releaser.rank, 3);
  EXPECT_GT(slow.result.ranks[4].waited_on.at(3), 0.5 * (slow.result.step_time_s - base.result.step_time_s));
  // GPU 3 itself hardly waits.
  for (const auto& m : slow.result.ranks)
    if (m.rank != 3) {
      EXPECT_GT(m.wait_s, slow.result.ranks[3].wait_s);
    }
  // Removing its perturbation gives back the unperturbed step exactly (the what-if).
  sc.perturb.gpu_slowdown[3] = 1.0;
  EXPECT_EQ(run(sc).result.step_time_s, base.result.step_time_s);
}

TEST(Straggler, WaitsAndComputeAddUpToTheStep) {
  auto sc = ring8(2e6);
  sc.perturb.gpu_slowdown[5] = 1.3;
  const Outcome r = run(sc);
  for (const auto& m : r.result.ranks) {
    EXPECT_NEAR(m.compute_s + m.wait_s, r.result.step_time_s, 1e-12 * r.result.step_time_s) << m.rank;
    double by_rank = 0;
    for (const auto& [k, w] : m.waited_on) by_rank += w;
    EXPECT_NEAR(by_rank, m.wait_s, 1e-12 * r.result.step_time_s) << m.rank;
    EXPECT_LE(m.top_releaser.wait_s, m.wait_s + 1e-15);
    if (m.wait_s > 0) {
      EXPECT_FALSE(m.top_releaser.op.empty());
    }
  }
}

TEST(Straggler, HalvedLinkMakesABalancedRingCommunicationBoundAndIsNamed) {
  // The link is sized so that a forward KV block takes 90 % of a forward ring step's compute
  // (backward steps cost 2.5 times more and send dK, dV too): balanced, the transfers hidden
  // but for the first.
  const Outcome free = run(ring8(1e18));
  const double kv_bytes = 2.0 * (256 / 8) * 64 * 2;  // K and V of 32 tokens, 1 head, 64 dims, bf16
  const double step_compute = 2.0 * 16 * 16 * kPairSeconds;  // two 16-token chunks against two
  const double bw = kv_bytes / (0.9 * step_compute);
  auto sc = ring8(bw);
  const Outcome balanced = run(sc);
  EXPECT_LT(balanced.result.step_time_s, 1.05 * free.result.step_time_s);
  EXPECT_LT(balanced.result.exposed_comm_s, 0.05 * balanced.result.step_time_s);

  sc.perturb.links.push_back({3, scenario::PerturbLink::NVLink, scenario::LinkDirection::Both, 0.5, 0.0});
  const Outcome halved = run(sc);
  // Transfers into and out of GPU 3 now take 1.8 steps of compute: the ring waits on them.
  EXPECT_GT(halved.result.step_time_s, 1.15 * balanced.result.step_time_s);
  EXPECT_GT(halved.result.exposed_comm_s, 0.1 * halved.result.step_time_s);
  // The analysis names the link: GPU 3's NVLink carries as many bytes as any other at half the
  // bandwidth, so it is the busiest.
  ASSERT_GE(halved.result.links.size(), 2u);
  const auto& top = halved.result.links[0];
  EXPECT_EQ(top.name.rfind("n0.gpu3.nvlink.", 0), 0u) << top.name;
  EXPECT_EQ(top.cls, "nvlink");
  EXPECT_DOUBLE_EQ(top.bw_Bps, 0.5 * bw);
  EXPECT_DOUBLE_EQ(top.busy_s, top.bytes / top.bw_Bps);
  EXPECT_NEAR(top.utilisation, top.busy_s / halved.result.step_time_s, 1e-12);
  const auto other = std::find_if(halved.result.links.begin(), halved.result.links.end(),
                                  [](const report::LinkLoad& l) { return l.name.find("gpu3") == std::string::npos; });
  ASSERT_NE(other, halved.result.links.end());
  EXPECT_NEAR(top.busy_s, 2 * other->busy_s, 1e-9 * top.busy_s);
}

TEST(Straggler, ZeroPerturbationReproducesTheUnperturbedRunBitForBit) {
  for (auto kind : {scenario::EngineKind::Analytic, scenario::EngineKind::SimGrid}) {
    auto sc = ring8(2e6);
    sc.simulation.engine = kind;
    const Outcome plain = run(sc, true);
    sc.perturb.gpu_slowdown[3] = 1.0;
    sc.perturb.jitter_cv = 0;
    sc.perturb.gpu_variation_cv = 0;
    sc.perturb.links.push_back({2, scenario::PerturbLink::NVLink, scenario::LinkDirection::Both, 1.0, 0.0});
    EXPECT_FALSE(sc.perturb.any());
    const Outcome zero = run(sc, true);
    EXPECT_EQ(zero.trace.start_s, plain.trace.start_s);
    EXPECT_EQ(zero.trace.end_s, plain.trace.end_s);
    EXPECT_EQ(zero.result.step_time_s, plain.result.step_time_s);
  }
}

TEST(Straggler, LinkPerturbationScalesOnlyTheNamedLinks) {
  scenario::PerturbSpec p;
  p.links.push_back({3, scenario::PerturbLink::NVLink, scenario::LinkDirection::Up, 0.5, 2e-6});
  p.links.push_back({3, scenario::PerturbLink::NVLink, scenario::LinkDirection::Up, 0.5, 0.0});
  p.links.push_back({9, scenario::PerturbLink::Nic, scenario::LinkDirection::Down, 0.25, 0.0});
  const model::Topology plain(test::dgx_h100(2));
  const model::Topology t(test::dgx_h100(2), p);
  ASSERT_EQ(t.links().size(), plain.links().size());
  for (size_t i = 0; i < t.links().size(); ++i) {
    const auto& a = plain.links()[i];
    const auto& b = t.links()[i];
    if (b.name == "n0.gpu3.nvlink.up") {
      EXPECT_DOUBLE_EQ(b.bw_Bps, 0.25 * a.bw_Bps);
      EXPECT_DOUBLE_EQ(b.latency_s, a.latency_s + 2e-6);
    } else if (b.name == "n1.nic1.down") {
      EXPECT_DOUBLE_EQ(b.bw_Bps, 0.25 * a.bw_Bps);
    } else {
      EXPECT_EQ(b.bw_Bps, a.bw_Bps) << b.name;
      EXPECT_EQ(b.latency_s, a.latency_s) << b.name;
    }
  }
  scenario::PerturbSpec pcie;
  pcie.links.push_back({0, scenario::PerturbLink::PCIe, scenario::LinkDirection::Both, 0.5, 0.0});
  EXPECT_THROW(model::Topology(test::dgx_h100(), pcie), std::invalid_argument);
  scenario::PerturbSpec nic;
  nic.links.push_back({0, scenario::PerturbLink::Nic, scenario::LinkDirection::Both, 0.5, 0.0});
  EXPECT_THROW(model::Topology(test::dgx_h100(1), nic), std::invalid_argument);
}

namespace {
std::vector<std::string> names(const model::Topology& t, int a, int b) {
  std::vector<std::string> out;
  for (uint32_t l : t.route(a, b)) out.push_back(t.links()[l].name);
  return out;
}
}  // namespace

TEST(RailsDown, TrafficHopsOverNvlinkToTheNextHealthyRail) {
  scenario::PerturbSpec p;
  p.rails_down = {3, 4};
  auto spec = test::dgx_h100(2);
  spec.nccl.pxn = false;  // (with PXN a cross-rail send first hops to the receiver's rail)
  const model::Topology t(spec, p);
  // Healthy rails are untouched.
  EXPECT_EQ(names(t, 1, 9), (std::vector<std::string>{"n0.nic1.up", "n1.nic1.down"}));
  // GPU 3 -> GPU 11 (rail 3 on both ends): NVLink to GPU 5 (rails 3 and 4 down), rail 5, NVLink
  // from GPU 13 to GPU 11.
  EXPECT_EQ(names(t, 3, 11), (std::vector<std::string>{"n0.gpu3.nvlink.up", "n0.gpu5.nvlink.down", "n0.nic5.up",
                                                        "n1.nic5.down", "n1.gpu5.nvlink.up", "n1.gpu3.nvlink.down"}));
  // GPU 2 -> GPU 12: leaves on rail 2, arrives on rail 5 (spine), hops to GPU 12.
  const auto r = names(t, 2, 12);
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0], "n0.nic2.up");
  EXPECT_EQ(r[1].rfind("rail2.leaf0.spine", 0), 0u);
  EXPECT_EQ(r[2].rfind("rail5.leaf0.spine", 0), 0u);
  EXPECT_EQ(r[3], "n1.nic5.down");
  EXPECT_EQ(r[4], "n1.gpu5.nvlink.up");
  EXPECT_EQ(r[5], "n1.gpu4.nvlink.down");
  // Intra-node traffic never uses a rail.
  EXPECT_EQ(names(t, 3, 4), (std::vector<std::string>{"n0.gpu3.nvlink.up", "n0.gpu4.nvlink.down"}));
  EXPECT_TRUE(t.rail_up(2));
  EXPECT_FALSE(t.rail_up(3));
}

TEST(RailsDown, WrapsAroundAndWorksOnPcieNodes) {
  scenario::PerturbSpec p;
  p.rails_down = {3};
  const model::Topology t(test::pcie_box(2), p);  // 4 NICs: GPU g uses rail g % 4
  // GPU 3 (switch 1, CPU 0) -> GPU 8 + 3: up to GPU 0's switch (rail 0, wrapping around),
  // across the CPU complex, out on rail 0, then down the other node's tree to GPU 11.
  const auto r = names(t, 3, 11);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.front(), "n0.gpu3.pcie.up");
  EXPECT_NE(std::find(r.begin(), r.end(), "n0.nic0.up"), r.end());
  EXPECT_NE(std::find(r.begin(), r.end(), "n1.nic0.down"), r.end());
  EXPECT_EQ(r.back(), "n1.gpu3.pcie.down");
  for (const auto& n : r) EXPECT_EQ(n.find("gpu0.pcie"), std::string::npos) << n;  // NIC on the switch
}

TEST(RailsDown, EveryRailDownMakesAMultiNodeRunImpossible) {
  scenario::PerturbSpec p;
  p.rails_down = {0, 1, 2, 3, 4, 5, 6, 7};
  try {
    model::Topology t(test::dgx_h100(2), p);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "perturb.rails_down: every rail of platform dgx-h100-test (8 used of 8 NICs per node) is down, "
                 "so its 2 nodes cannot reach each other: the run is impossible");
  }
  // One node needs no rail.
  EXPECT_NO_THROW(model::Topology(test::dgx_h100(1), p));
  // A platform without NICs has nothing to route inter-node traffic over at all.
  auto none = test::dgx_h100(2);
  none.nics_per_node = 0;
  EXPECT_THROW(model::Topology{none}, std::invalid_argument);
}

TEST(RailsDown, SlowsAMultiNodeRingAndNamesTheDoubledNic) {
  // A CP ring over 16 GPUs on two nodes: with rail 0 down, GPU 8's traffic crowds rail 1.
  auto sc = ring8(1e18);
  sc.parallel.cp = 16;
  sc.training.seq_len = 512;
  sc.platform = test::dgx_h100(2);
  const Outcome healthy = run(sc);
  sc.perturb.rails_down = {0};
  const Outcome down = run(sc);
  EXPECT_GE(down.result.step_time_s, healthy.result.step_time_s);
  ASSERT_FALSE(down.result.links.empty());
  EXPECT_EQ(down.result.links[0].cls, "nic");
  EXPECT_NE(down.result.links[0].name.find(".nic1."), std::string::npos) << down.result.links[0].name;
}

TEST(ComputeNoise, NeutralRankRunsNominalWhileTheOthersKeepTheirDraws) {
  auto sc = ring8(1e18);
  sc.perturb.gpu_slowdown[3] = 1.2;
  sc.perturb.gpu_variation_cv = 0.05;
  sc.perturb.jitter_cv = 0.1;
  auto neutral = sc;
  neutral.perturb.neutral_rank = 3;
  const schedule::ComputeNoise a(sc, 8), b(neutral, 8), c = a.with_neutral(3);
  EXPECT_DOUBLE_EQ(b.rank_factor(3), 1.0);
  EXPECT_DOUBLE_EQ(c.rank_factor(3), 1.0);
  EXPECT_GT(a.rank_factor(3), 1.0);
  for (uint32_t id = 0; id < 64; ++id) {
    const int rank = static_cast<int>(id % 8);
    if (rank == 3) {
      EXPECT_EQ(b.scale(id, rank), 1.0);
      EXPECT_EQ(c.scale(id, rank), 1.0);
      EXPECT_NE(a.scale(id, rank), 1.0);
    } else {
      EXPECT_EQ(a.scale(id, rank), b.scale(id, rank)) << id;
      EXPECT_EQ(a.scale(id, rank), c.scale(id, rank)) << id;
    }
  }
}

TEST(ComputeNoise, DrawsDependOnTheSeedAndTheOpNotOnOrder) {
  auto sc = ring8(1e18);
  sc.perturb.jitter_cv = 0.1;
  const schedule::ComputeNoise a(sc, 8);
  const double later = a.jitter(1000);
  EXPECT_EQ(a.jitter(7), a.jitter(7));
  EXPECT_EQ(later, a.jitter(1000));
  EXPECT_NE(a.jitter(7), a.jitter(8));
  sc.simulation.seed += 1;
  const schedule::ComputeNoise b(sc, 8);
  EXPECT_NE(a.jitter(7), b.jitter(7));
  sc.perturb.jitter_cv = 0;
  EXPECT_EQ(schedule::ComputeNoise(sc, 8).jitter(7), 1.0);
  EXPECT_FALSE(schedule::ComputeNoise(sc, 8).any());
}

/// Mean, coefficient of variation and minimum of n draws.
struct Moments {
  double mean = 0, cv = 0, lo = 1e300;
};
Moments jitter_moments(const schedule::ComputeNoise& n, uint32_t count) {
  double sum = 0, sum2 = 0;
  Moments m;
  for (uint32_t i = 0; i < count; ++i) {
    const double t = n.jitter(i);
    sum += t;
    sum2 += t * t;
    m.lo = std::min(m.lo, t);
  }
  m.mean = sum / count;
  m.cv = std::sqrt(sum2 / count - m.mean * m.mean) / m.mean;
  return m;
}

TEST(ComputeNoise, LognormalJitterHasMeanOneAndTheGivenSpread) {
  auto sc = ring8(1e18);
  sc.perturb.jitter_cv = 0.3;
  sc.perturb.jitter_dist = scenario::JitterDist::LogNormal;
  const Moments m = jitter_moments(schedule::ComputeNoise(sc, 8), 200000);
  EXPECT_NEAR(m.mean, 1.0, 0.005);
  EXPECT_NEAR(m.cv, 0.3, 0.01);
  EXPECT_GT(m.lo, 0.0);
  EXPECT_LT(m.lo, 0.5);  // no floor at 0.5 as the normal's
}

TEST(ComputeNoise, NormalJitterHasMeanOneTheGivenSpreadAndAFloor) {
  auto sc = ring8(1e18);
  sc.perturb.jitter_cv = 0.1;
  const Moments m = jitter_moments(schedule::ComputeNoise(sc, 8), 200000);
  EXPECT_NEAR(m.mean, 1.0, 0.002);
  EXPECT_NEAR(m.cv, 0.1, 0.002);
  EXPECT_GE(m.lo, 0.5);
}

}  // namespace CPSIM_TEST_TU
