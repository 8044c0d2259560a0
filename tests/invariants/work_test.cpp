// Work: every scheme computes exactly the (i, j) pairs `cpsim partition` counts for the same
// sequence, CP degree, layout, mask and documents: per rank (the ring schemes and all-gather),
// per ring step (the ring), per Ulysses head share (Ulysses, USP). A pair computed twice or
// skipped changes a rank's sum. And every kernel's shape covers its pairs: the tiles the cost
// model prices hold at least the pairs the kernel computes.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>

#include "invariants/cases.hpp"
#include "model/tile_cost.hpp"
#include "schedule/attention.hpp"
#include "schedule/partition.hpp"
#include "schedule/step.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using invariants::WorkCase;
using schedule::Phase;

namespace {

constexpr int kHeads = invariants::kHeads;

scenario::Scenario scenario_of(const WorkCase& c) { return invariants::work_scenario(c); }

/// What one case's graph computes: pairs x query heads per rank and phase, and per forward
/// ring step.
struct Computed {
  std::map<std::pair<int, Phase>, int64_t> per_rank;
  std::map<std::pair<int, int>, int64_t> per_step;  ///< (rank, step), forward
  std::string uncovered;                            ///< a kernel whose tiles hold fewer pairs
};

Computed build(const scenario::Scenario& sc, const schedule::Documents& docs) {
  static fixtures::PerPairCost cost(1e-12);
  schedule::TaskGraph g;
  const int n = sc.parallel.cp;
  model::Topology topo(fixtures::nvswitch_node(n, 100e9, 1e-6));
  schedule::Pricer pricer(cost);
  schedule::AttentionCtx ctx{g, topo, pricer, sc, {}, 0, 0, {}, docs};
  for (int i = 0; i < n; ++i) ctx.group.push_back(i);
  ctx.geo = {sc.model.heads_q, sc.model.heads_kv, sc.model.head_dim, 1};
  const std::vector<schedule::OpId> none(n, schedule::kNoOp);
  schedule::attention_backward(ctx, schedule::attention_forward(ctx, none));
  Computed out;
  for (const auto& op : g.ops()) {
    if (op.kind != schedule::OpKind::Compute || op.label.shape < 0) continue;
    const model::AttentionCall& k = g.shapes()[static_cast<size_t>(op.label.shape)];
    const double area = static_cast<double>(k.q_len) * static_cast<double>(k.kv_len);
    const int64_t pairs = std::llround(area * k.unmasked_fraction);
    out.per_rank[{op.rank, op.label.phase}] += pairs * k.heads_q;
    if (op.label.phase == Phase::Forward && op.label.step >= 0)
      out.per_step[{op.rank, op.label.step}] += pairs * k.heads_q;
    const model::TileShape t =
        model::tile_shape(scenario::AttnImpl::Fa3, k.head_dim, k.backward, k.mask != scenario::Mask::Full);
    const model::TileWork w = model::count_tiles(k, t);
    if ((w.full + w.partial) * t.m * t.n < static_cast<double>(pairs) && out.uncovered.empty())
      out.uncovered = "rank " + std::to_string(op.rank) + " kernel " + std::to_string(k.q_len) +
                      " x " + std::to_string(k.kv_len) + " mask " + std::to_string(static_cast<int>(k.mask)) +
                      " fraction " + std::to_string(k.unmasked_fraction) + ": tiles hold " +
                      std::to_string((w.full + w.partial) * t.m * t.n) + " pairs, computes " +
                      std::to_string(pairs);
  }
  return out;
}

/// Expected pairs x heads per group member: partition's per-GPU pairs (ring family and
/// all-gather), the whole sequence's pairs over the head share (Ulysses), the ring partition's
/// pairs of the member's ring position over the head share (USP).
std::vector<int64_t> expected(const scenario::Scenario& sc, const schedule::Documents& docs) {
  const int n = sc.parallel.cp;
  const auto& a = sc.parallel.attention;
  std::vector<int64_t> e(static_cast<size_t>(n));
  if (a.scheme == scenario::AttentionScheme::Ulysses) {
    for (auto& v : e) v = schedule::total_pairs(docs) * (kHeads / n);
    return e;
  }
  if (a.scheme == scenario::AttentionScheme::Usp) {
    const int u = a.ulysses_degree, r = n / u;
    const auto t = schedule::ring_table(schedule::cp_partition(sc, docs, r), docs);
    const bool intra = a.ulysses_placement == scenario::UlyssesPlacement::IntraNode;
    for (int i = 0; i < n; ++i) {
      const int k = intra ? i / u : i % r;
      e[static_cast<size_t>(i)] = t.per_rank[static_cast<size_t>(k)] * (kHeads / u);
    }
    return e;
  }
  const auto t = schedule::ring_table(schedule::cp_partition(sc, docs, n), docs);
  for (int i = 0; i < n; ++i) e[static_cast<size_t>(i)] = t.per_rank[static_cast<size_t>(i)] * kHeads;
  return e;
}

}  // namespace

TEST(InvariantWork, EverySchemeComputesPartitionsPairs) {
  const auto cases = invariants::work_cases();
  int checked = 0, failures = 0;
  for (const WorkCase& c : cases) {
    const scenario::Scenario sc = scenario_of(c);
    const schedule::Documents docs =
        schedule::layer_documents(sc.model, schedule::scenario_documents(sc), 0);
    Computed got;
    try {
      got = build(sc, docs);
    } catch (const std::invalid_argument&) {
      continue;  // a combination the scheme refuses (sliding window on a ring, ...): an error, not work
    }
    ++checked;
    const auto want = expected(sc, docs);
    for (int r = 0; r < c.cp && failures < 10; ++r)
      for (Phase ph : {Phase::Forward, Phase::Backward}) {
        const int64_t v = got.per_rank[{r, ph}];
        if (v != want[static_cast<size_t>(r)]) {
          ++failures;
          ADD_FAILURE() << "case: " << c.str() << "\n  rank " << r
                        << (ph == Phase::Forward ? " forward" : " backward") << " computes " << v
                        << " pair-heads, partition counts " << want[static_cast<size_t>(r)];
          break;
        }
      }
    if (c.scheme == scenario::AttentionScheme::Ring) {
      const auto t = schedule::ring_table(schedule::cp_partition(sc, docs, c.cp), docs);
      for (int step = 0; step < c.cp; ++step)
        for (int r = 0; r < c.cp; ++r) {
          const int64_t want_step = t.per_step[static_cast<size_t>(step)][static_cast<size_t>(r)] * kHeads;
          const auto it = got.per_step.find({r, step});
          const int64_t v = it == got.per_step.end() ? 0 : it->second;
          if (v != want_step && failures < 10) {
            ++failures;
            ADD_FAILURE() << "case: " << c.str() << "\n  ring step " << step << " rank " << r
                          << " computes " << v << " pair-heads, partition's table " << want_step;
          }
        }
    }
  }
  // Most combinations build: a generator that produced only refused cases would check nothing.
  EXPECT_GT(checked, static_cast<int>(cases.size()) / 2) << checked << " of " << cases.size();
  std::printf("work cases checked: %d of %zu generated (the rest a scheme refuses)\n", checked, cases.size());
}

TEST(InvariantWork, KernelTilesHoldTheirPairs) {
  int failures = 0, checked = 0;
  for (const WorkCase& c : invariants::work_cases()) {
    const scenario::Scenario sc = scenario_of(c);
    const schedule::Documents docs =
        schedule::layer_documents(sc.model, schedule::scenario_documents(sc), 0);
    Computed got;
    try {
      got = build(sc, docs);
    } catch (const std::invalid_argument&) {
      continue;
    }
    ++checked;
    if (!got.uncovered.empty() && ++failures <= 10)
      ADD_FAILURE() << "case: " << c.str() << "\n  " << got.uncovered;
  }
  EXPECT_EQ(failures, 0) << "of " << checked << " cases";
}

}  // namespace CPSIM_TEST_TU
