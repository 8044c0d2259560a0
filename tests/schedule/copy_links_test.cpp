// A copied range (TaskGraph::copy_ops) holds no edges or queue links of its own: it reads its
// original's, shifted, and keeps only those that leave it (task_graph_links.cpp). Held here
// against the same graph with every op added by hand: stored ops on the copies' queues before
// and after them, edges added to the copies later, a copy of a copy, unordered transfers.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "schedule/task_graph.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::schedule;

namespace {

/// The range copied: four ops on ranks base..base+1, an edge inside, a transfer, an unordered one.
void add_range(TaskGraph& g, int base, bool edges) {
  OpLabel l;
  l.name = g.intern("r");
  const OpId a = g.add_compute(base, stream::kCompute, 1.0, l);
  const OpId t = g.add_transfer(base, stream::kCpSend, base + 1, stream::kCpRecv, 1e6, l);
  const OpId b = g.add_compute(base + 1, stream::kCompute, 2.0, l);
  g.add_transfer(base + 1, stream::kDpSend, base, stream::kDpRecv, 1e6, l, 0, 0, /*unordered=*/true);
  const OpId c = g.add_compute(base, stream::kCompute, 0.5, l);
  if (edges) {
    g.add_edge(a, t);
    g.add_edge(t, b);
    g.add_edge(a, c);
  }
}

/// Ranks 0-1 hold the original; `copy` builds ranks 2-3 and 4-5 as copies or by hand.
TaskGraph build(bool copy) {
  TaskGraph g;
  OpLabel l;
  l.name = g.intern("s");
  const OpId before = g.add_compute(2, stream::kCompute, 1.0, l);  // on a copy's queue, before it
  const size_t e0 = g.num_edges();
  const OpId first = static_cast<OpId>(g.size());
  add_range(g, 0, true);
  const OpId last = static_cast<OpId>(g.size());
  const size_t e1 = g.num_edges();
  OpId c1, c2;
  if (copy) {
    c1 = g.copy_ops(first, last, e0, e1, 2);
    c2 = g.copy_ops(c1, c1 + (last - first), e1, e1, 2);  // a copy of the copy (its edges are its original's)
  } else {
    c1 = static_cast<OpId>(g.size());
    add_range(g, 2, true);
    c2 = static_cast<OpId>(g.size());
    add_range(g, 4, true);
  }
  // Stored ops after the copies on their queues, and edges added to the copies later.
  const OpId after = g.add_compute(2, stream::kCompute, 1.0, l);
  const OpId recv = g.add_transfer(5, stream::kCpSend, 3, stream::kCpRecv, 1e6, l);
  g.add_edge(before, c1);
  g.add_edge(c1 + 4, after);
  g.add_edge(c2 + 2, recv);
  g.add_edge(c1 + 1, c2);  // between two copies
  g.finalize();
  return g;
}

}  // namespace

TEST(CopyLinks, ACopyHasTheLinksBuildingItGives) {
  const TaskGraph copied = build(true), built = build(false);
  ASSERT_LT(copied.stored_ops(), built.stored_ops());
  ASSERT_EQ(copied.size(), built.size());
  EXPECT_EQ(copied.num_edges(), built.num_edges());
  for (OpId id = 0; id < copied.size(); ++id) {
    SCOPED_TRACE(built.describe(id));
    EXPECT_EQ(copied.op(id).rank, built.op(id).rank);
    EXPECT_EQ(copied.succs(id), built.succs(id));
    EXPECT_EQ(copied.preds(id), built.preds(id));
    for (int side = 0; side < 2; ++side) {
      EXPECT_EQ(copied.queue_next(id, side), built.queue_next(id, side)) << "side " << side;
      EXPECT_EQ(copied.queue_prev(id, side), built.queue_prev(id, side)) << "side " << side;
    }
    EXPECT_EQ(copied.waits_on(id), built.waits_on(id));
    std::vector<OpId> a, b;
    copied.for_each_successor(id, [&](OpId s) { a.push_back(s); });
    built.for_each_successor(id, [&](OpId s) { b.push_back(s); });
    EXPECT_EQ(a, b);
  }
  std::vector<OpId> ids;
  copied.for_each_op([&](OpId id, const Op& op) {
    ids.push_back(id);
    EXPECT_EQ(op.rank, built.op(id).rank);
    EXPECT_EQ(op.peer, built.op(id).peer);
    EXPECT_EQ(op.duration_s, built.op(id).duration_s);
  });
  EXPECT_EQ(ids.size(), copied.size());
}

TEST(CopyLinks, AWalkOverSomeOpsSeesWhatTheWholeWalkSeesThere) {
  // for_each_op_in splits passes across threads (report/rank_ops.cpp) and skips copies away
  // from a set of ranks: every [lo, hi) must see exactly the whole walk's ops there, and with
  // ranks, at least every op on them.
  const TaskGraph g = build(true);
  std::vector<std::pair<OpId, Op>> all;
  g.for_each_op([&](OpId id, const Op& op) { all.emplace_back(id, op); });
  const auto n = static_cast<OpId>(g.size());
  for (OpId lo = 0; lo <= n; ++lo)
    for (OpId hi = lo; hi <= n + 1; ++hi) {
      std::vector<OpId> seen;
      g.for_each_op_in(lo, hi, [&](OpId id, const Op& op) {
        seen.push_back(id);
        EXPECT_EQ(op.rank, all[id].second.rank);
        EXPECT_EQ(op.peer, all[id].second.peer);
      });
      std::vector<OpId> want;
      for (OpId id = lo; id < std::min(hi, n); ++id) want.push_back(id);
      EXPECT_EQ(seen, want) << "[" << lo << ", " << hi << ")";
      for (int r0 = 0; r0 < 6; ++r0) {
        std::vector<OpId> near, need;
        g.for_each_op_in(lo, hi, [&](OpId id, const Op&) { near.push_back(id); }, r0, r0 + 1);
        for (OpId id : want)
          if (all[id].second.rank == r0 || all[id].second.peer == r0) need.push_back(id);
        for (OpId id : need) EXPECT_NE(std::find(near.begin(), near.end(), id), near.end()) << "rank " << r0;
        EXPECT_TRUE(std::is_sorted(near.begin(), near.end()));
      }
    }
  // Ranks 0-1 are the original's: both copies (ranks 2-5) are skipped for them.
  size_t on_01 = 0;
  g.for_each_op_in(0, n, [&](OpId, const Op&) { ++on_01; }, 0, 2);
  EXPECT_EQ(on_01, g.stored_ops());
}

TEST(CopyLinks, EdgesThatACopyWouldMissAreRefused) {
  TaskGraph g;
  OpLabel l;
  l.name = g.intern("k");
  add_range(g, 0, true);
  // The edge range must be every edge inside the copied range.
  EXPECT_THROW(g.copy_ops(0, 5, 0, 2, 2), std::logic_error);
  const OpId c = g.copy_ops(0, 5, 0, 3, 2);
  // Once copied, an edge inside the original would be missing from the copy.
  EXPECT_THROW(g.add_edge(0, 4), std::logic_error);
  g.add_edge(c, c + 4);  // inside a copy: that copy's own
  // A range that cuts a copy cannot be copied.
  EXPECT_THROW(g.copy_ops(c + 1, c + 5, 4, 4, 4), std::logic_error);
  g.finalize();
  EXPECT_EQ(g.succs(c), (std::vector<OpId>{c + 1, c + 4, c + 4}));
  EXPECT_EQ(g.succs(0), (std::vector<OpId>{1, 4}));
}

// Copies longer than range_of's index blocks (2^14 ids), a stored op between them and after,
// and a copy of a copy: every id resolves to its own original, shifted by its ranges' offsets.
TEST(CopyLinks, LongCopiesResolveEveryIdToItsOriginal) {
  TaskGraph g;
  OpLabel l;
  l.name = g.intern("long");
  constexpr OpId n = 40000;
  for (OpId i = 0; i < n; ++i) g.add_compute(0, stream::kCompute, 1.0 + i, l);
  const size_t e = g.num_edges();
  const OpId c1 = g.copy_ops(0, n, e, e, 1);
  const OpId mid = g.add_compute(9, stream::kCompute, -1.0, l);
  const OpId c2 = g.copy_ops(c1, c1 + n, e, e, 2);
  const OpId tail = g.add_compute(8, stream::kCompute, -2.0, l);
  g.finalize();
  auto expect = [&](OpId id, int rank, double duration) {
    int32_t shift = -1;
    const Op& stored = g.stored_op(id, shift);
    EXPECT_EQ(stored.rank + shift, rank) << id;
    EXPECT_EQ(stored.duration_s, duration) << id;
    EXPECT_EQ(g.op(id).rank, rank) << id;
  };
  for (OpId i = 0; i < n; i += 997) {
    expect(i, 0, 1.0 + i);
    expect(c1 + i, 1, 1.0 + i);
    expect(c2 + i, 3, 1.0 + i);
  }
  for (const OpId i : {OpId{16383}, OpId{16384}, n - 1}) {
    expect(c1 + i, 1, 1.0 + i);
    expect(c2 + i, 3, 1.0 + i);
  }
  expect(mid, 9, -1.0);
  expect(tail, 8, -2.0);
  // Each copy's ops follow one another on its rank's queue, as the original's do.
  EXPECT_EQ(g.queue_next(c2 + 16383, 0), c2 + 16384);
  EXPECT_EQ(g.queue_prev(c1 + 16384, 0), c1 + 16383);
}

}  // namespace CPSIM_TEST_TU
