// Conservation: what a scheme sends is what its peers receive, and a rank's CP bytes are the
// scheme's closed form (/work/shared/data/cp-schedules.md; docs/lesson.md): a ring (contiguous,
// zig-zag, striped, double) sends N - 1 K,V blocks of 2 x L x H_kv x d x 2 bytes per rank in
// the forward; all-gather moves the same N - 1 blocks per rank (NCCL's ring all-gather);
// Ulysses' all-to-alls send (N - 1) / N of the rank's Q, K, V and of its output; USP sends
// (u - 1) / u of those in its Ulysses group and N / u - 1 K,V blocks on its ring.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "invariants/cases.hpp"
#include "schedule/attention.hpp"
#include "schedule/step.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using invariants::WorkCase;
using schedule::Phase;

namespace {

/// Builds one attention layer's forward and backward for `sc` on one NVSwitch node.
void build_layer(schedule::TaskGraph& g, const scenario::Scenario& sc) {
  static fixtures::PerPairCost cost(1e-12);
  const int n = sc.parallel.cp;
  model::Topology topo(fixtures::nvswitch_node(n, 100e9, 1e-6));
  schedule::Pricer pricer(cost);
  schedule::AttentionCtx ctx{g, topo, pricer, sc, {}, 0, 0, {},
                             schedule::layer_documents(sc.model, schedule::scenario_documents(sc), 0)};
  for (int i = 0; i < n; ++i) ctx.group.push_back(i);
  ctx.geo = {sc.model.heads_q, sc.model.heads_kv, sc.model.head_dim, 1};
  const std::vector<schedule::OpId> none(n, schedule::kNoOp);
  schedule::attention_backward(ctx, schedule::attention_forward(ctx, none));
}

/// The forward's CP bytes a rank sends, in closed form.
double closed_form_forward(const WorkCase& c) {
  const double n = c.cp, l = static_cast<double>(c.seq) / c.cp;
  const double kv_block = 2 * l * invariants::kHeads * invariants::kHeadDim * 2;  // K and V, bf16
  const double q_bytes = l * invariants::kHeads * invariants::kHeadDim * 2;
  using scenario::AttentionScheme;
  switch (c.scheme) {
    case AttentionScheme::Ring:
    case AttentionScheme::DoubleRing:
    case AttentionScheme::AllGather: return (n - 1) * kv_block;
    case AttentionScheme::Ulysses: return (n - 1) / n * (2 * q_bytes + kv_block);  // Q, K, V; O back
    case AttentionScheme::Usp: {
      const double u = c.ulysses, r = n / u;
      return (u - 1) / u * (2 * q_bytes + kv_block) + (r - 1) * kv_block;
    }
  }
  return -1;
}

}  // namespace

TEST(InvariantConservation, SentEqualsReceivedAndClosedForms) {
  int checked = 0, failures = 0;
  auto fail = [&](const WorkCase& c, const std::string& what) {
    if (++failures <= 10) ADD_FAILURE() << "case: " << c.str() << "\n  " << what;
  };
  for (const WorkCase& c : invariants::work_cases()) {
    // Equal chunks on every rank: the layouts' partitions (per-document shards differ in size).
    if (!c.docs.empty() && c.per_document && c.layout == scenario::Layout::ZigZag) continue;
    if (c.mask == scenario::AttentionMask::SlidingWindow) continue;  // a windowed gather moves less
    const scenario::Scenario sc = invariants::work_scenario(c);
    schedule::TaskGraph g;
    try {
      build_layer(g, sc);
    } catch (const std::invalid_argument&) {
      continue;
    }
    ++checked;
    // (rank, phase, kind) -> bytes sent / received.
    using Key = std::tuple<int, Phase, std::string>;
    std::map<Key, double> sent, received;
    std::map<std::pair<int, Phase>, double> sent_phase;
    for (const auto& op : g.ops()) {
      if (op.kind != schedule::OpKind::Transfer || op.rank == op.peer) continue;
      const std::string kind = g.str(op.label.name);
      sent[{op.rank, op.label.phase, kind}] += op.bytes;
      received[{op.peer, op.label.phase, kind}] += op.bytes;
      sent_phase[{op.rank, op.label.phase}] += op.bytes;
    }
    // Every rank receives, per kind and phase, what it sends: equal chunks travel a ring, a
    // symmetric collective moves equal shares.
    std::map<Key, double> keys = sent;
    keys.insert(received.begin(), received.end());
    for (const auto& [key, unused] : keys) {
      const double s = sent[key], v = received[key];
      if (std::fabs(s - v) > 1e-9 * std::max(s, v))
        fail(c, "rank " + std::to_string(std::get<0>(key)) +
                    (std::get<1>(key) == Phase::Forward ? " forward " : " backward ") +
                    std::get<2>(key) + ": sends " + std::to_string(s) + " B, receives " +
                    std::to_string(v) + " B");
    }
    const double want = closed_form_forward(c);
    for (int r = 0; r < c.cp; ++r) {
      const double s = sent_phase[{r, Phase::Forward}];
      if (std::fabs(s - want) > 1e-9 * want)
        fail(c, "rank " + std::to_string(r) + " forward sends " + std::to_string(s) +
                    " B, the closed form " + std::to_string(want) + " B");
    }
  }
  EXPECT_GT(checked, 100);
  std::printf("conservation cases checked: %d\n", checked);
}

}  // namespace CPSIM_TEST_TU
