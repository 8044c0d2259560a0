// The SimGrid platform's capped (GPU, cap) pairs (engine/simgrid_platform.hpp capped_pairs) read a
// copied range's original once for all its copies: held here against every op read in order, on
// a graph with copies, a copy of a copy, stored ops between and after, and a transfer to itself.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "engine/simgrid_platform.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::schedule;

TEST(CappedPairs, AreEveryOpsInTheOrderTheyFirstCome) {
  TaskGraph g;
  OpLabel l;
  l.name = g.intern("x");
  auto capped = [&](int from, int to, double cap) {
    g.add_transfer(from, stream::kCpSend, to, stream::kCpRecv, 1e6, l, cap);
  };
  capped(3, 0, 5e9);  // stored, before the copies, on a rank a copy also caps
  const size_t e = g.num_edges();
  const OpId first = static_cast<OpId>(g.size());
  capped(0, 1, 1e9);
  capped(1, 0, 2e9);
  g.add_transfer(0, stream::kCpSend, 1, stream::kCpRecv, 1e6, l);  // uncapped
  capped(0, 1, 1e9);                                                // again: once
  capped(1, 1, 3e9);                                                // to itself: none
  const OpId last = static_cast<OpId>(g.size());
  const OpId c1 = g.copy_ops(first, last, e, e, 2);
  capped(7, 6, 1e9);  // stored, between the copies
  g.copy_ops(c1, c1 + (last - first), e, e, 2);
  g.copy_ops(first, last, e, e, 3);  // ranks 3-4: (3, 1e9) new, (4, 2e9) new
  capped(5, 4, 2e9);                 // stored, after: a copy's pair already
  g.finalize();

  std::vector<std::pair<int, double>> want;
  std::set<std::pair<int, double>> seen;
  g.for_each_op([&](OpId, const Op& op) {
    if (op.kind == OpKind::Transfer && op.max_rate_Bps > 0 && op.rank != op.peer &&
        seen.insert({op.rank, op.max_rate_Bps}).second)
      want.emplace_back(op.rank, op.max_rate_Bps);
  });
  EXPECT_EQ(cpsim::engine::detail::capped_pairs(g), want);
  EXPECT_EQ(want.size(), 10u);
}

}  // namespace CPSIM_TEST_TU
