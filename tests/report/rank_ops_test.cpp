// RankOps (report/rank_ops.cpp) indexes each rank's ops in id order, a chunk of ranks at a time,
// each chunk loaded by several threads over slices of the ops and skipping copied ranges away
// from its ranks. Held against the index written out by hand, for every chunk size and thread
// count, on a graph of copies, a copy of a copy, and transfers between them.
#include <gtest/gtest.h>

#include <vector>

#include "report/rank_ops.hpp"
#include "schedule/task_graph.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using schedule::OpId;

namespace {

schedule::TaskGraph graph() {
  schedule::TaskGraph g;
  schedule::OpLabel l;
  l.name = g.intern("k");
  l.category = g.intern("attention");
  g.add_compute(3, schedule::stream::kCompute, 1.0, l);  // stored, on a copy's rank
  const OpId first = static_cast<OpId>(g.size());
  g.add_compute(0, schedule::stream::kCompute, 1.0, l);
  g.add_transfer(0, schedule::stream::kCpSend, 1, schedule::stream::kCpRecv, 1e6, l);
  g.add_compute(1, schedule::stream::kCompute, 2.0, l);
  const OpId last = static_cast<OpId>(g.size());
  const OpId c1 = g.copy_ops(first, last, 0, 0, 2);
  g.copy_ops(c1, c1 + (last - first), 0, 0, 2);  // ranks 4-5
  g.add_transfer(5, schedule::stream::kDpSend, 0, schedule::stream::kDpRecv, 1e6, l);
  g.add_compute(2, schedule::stream::kCompute, 1.0, l);
  g.finalize();
  return g;
}

}  // namespace

TEST(RankOps, EveryChunkAndThreadCountIndexesEachRanksOpsInIdOrder) {
  const schedule::TaskGraph g = graph();
  std::vector<std::vector<OpId>> want(static_cast<size_t>(g.num_ranks()));
  g.for_each_op([&](OpId id, const schedule::Op& op) {
    want[static_cast<size_t>(op.rank)].push_back(id);
    if (op.kind == schedule::OpKind::Transfer) want[static_cast<size_t>(op.peer)].push_back(id);
  });
  ASSERT_EQ(want.size(), 6u);
  for (size_t max_entries : {1u, 2u, 3u, 5u, 100u})
    for (unsigned threads : {1u, 2u, 3u, 7u}) {
      SCOPED_TRACE(testing::Message() << max_entries << " entries, " << threads << " threads");
      report::RankOps ro(g, max_entries, threads);
      std::vector<std::vector<OpId>> got(want.size());
      int chunks = 0;
      ro.for_each_chunk([&](int r0, int r1) {
        ++chunks;
        for (int r = r0; r < r1; ++r)
          for (size_t i = ro.begin(r); i < ro.end(r); ++i) {
            got[static_cast<size_t>(r)].push_back(ro.ids()[i]);
            const bool transfer = g.op(ro.ids()[i]).kind == schedule::OpKind::Transfer;
            EXPECT_EQ((ro.flags()[i] & report::RankOps::kTransfer) != 0, transfer);
            EXPECT_EQ((ro.flags()[i] & report::RankOps::kAttention) != 0, !transfer);
          }
      });
      EXPECT_EQ(got, want);
      if (max_entries == 1) {
        EXPECT_EQ(chunks, 6);
      }
    }
}

}  // namespace CPSIM_TEST_TU
