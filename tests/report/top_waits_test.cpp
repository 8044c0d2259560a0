// The summary's top waits (report::top_waits): a kind of op that every rank of a ring waits on
// is one line, named by the rank that waited on it most; kinds ranked by that wait, ties by
// rank then op, whatever order the ranks come in; ranks that compute nothing are left out.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "report/metrics.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using report::RankMetrics;

namespace {

RankMetrics::Releaser rel(const std::string& what, int from, int to, double wait) {
  RankMetrics::Releaser r;
  r.what = what;
  r.op = what + " [r" + std::to_string(from) + "->r" + std::to_string(to) + "]";
  r.rank = from;
  r.wait_s = wait;
  r.longest_s = wait / 4;
  r.layer = 12;
  r.step = 4;
  return r;
}

std::vector<RankMetrics> ring() {
  // An 8-rank ring: rank k waits on k-1's K,V; rank 5 the longest, ranks 2 and 6 alike after
  // it. Ranks 0 and 1 also wait on an all-reduce; rank 3 on the optimizer at the end.
  std::vector<RankMetrics> ranks(9);
  for (int k = 0; k < 8; ++k) {
    ranks[k].rank = k;
    ranks[k].compute_s = 1;
    const double w = k == 5 ? 0.8 : (k == 2 || k == 6) ? 0.5 : 0.1 * (k + 1) / 10;
    ranks[k].top_releasers.push_back(rel("fwd ring-zigzag kv_p2p", (k + 7) % 8, k, w));
  }
  ranks[0].top_releasers.push_back(rel("bwd dp allreduce", 1, 0, 0.6));
  ranks[1].top_releasers.push_back(rel("bwd dp allreduce", 0, 1, 0.6));
  ranks[3].top_releasers.push_back(rel("opt adam", 3, -1, 0.6));
  ranks[3].top_releasers.back().op = "opt adam [r3]";
  ranks[4].top_releasers.push_back(rel("fwd tp allgather", 5, 4, 0));  // no wait: never listed
  // Rank 8 computes nothing (a replica the symmetry shortcut stands in for): its step-long
  // wait is not a finding.
  ranks[8].rank = 8;
  ranks[8].top_releasers.push_back(rel("bwd norm_attn_bwd", 0, -1, 9.0));
  ranks[8].top_releasers.push_back(rel("fwd ring-zigzag kv_p2p", 7, 8, 9.0));
  return ranks;
}

}  // namespace

TEST(TopWaits, OneLinePerKindByItsLongestWaitTiesByRank) {
  const auto top = report::top_waits(ring(), 5);
  ASSERT_EQ(top.size(), 3u);
  // The ring: rank 5 waited longest; the 7 others are summed up.
  EXPECT_EQ(top[0].rank, 5);
  EXPECT_EQ(top[0].releaser.op, "fwd ring-zigzag kv_p2p [r4->r5]");
  EXPECT_DOUBLE_EQ(top[0].releaser.wait_s, 0.8);
  EXPECT_EQ(top[0].releaser.layer, 12);
  EXPECT_EQ(top[0].other_ranks, 7);
  EXPECT_DOUBLE_EQ(top[0].others_max_s, 0.5);
  EXPECT_DOUBLE_EQ(top[0].others_min_s, 0.01);
  // Equal waits of 0.6 s: the all-reduce's rank 0 before the optimizer's rank 3.
  EXPECT_EQ(top[1].rank, 0);
  EXPECT_EQ(top[1].releaser.what, "bwd dp allreduce");
  EXPECT_EQ(top[1].other_ranks, 1);
  EXPECT_EQ(top[2].rank, 3);
  EXPECT_EQ(top[2].other_ranks, 0);
}

TEST(TopWaits, SameAnswerWhateverTheRanksOrderAndCapped) {
  auto ranks = ring();
  const auto a = report::top_waits(ranks, 5);
  std::reverse(ranks.begin(), ranks.end());
  const auto b = report::top_waits(ranks, 5);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].rank, b[i].rank) << i;
    EXPECT_EQ(a[i].releaser.op, b[i].releaser.op) << i;
    EXPECT_EQ(a[i].other_ranks, b[i].other_ranks) << i;
  }
  // Ties inside a kind: ranks 2 and 6 both waited 0.5 s; without rank 5, rank 2 names the ring.
  ranks.erase(std::remove_if(ranks.begin(), ranks.end(), [](const RankMetrics& m) { return m.rank == 5; }),
              ranks.end());
  const auto c = report::top_waits(ranks, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].rank, 0);  // the all-reduce's 0.6 s now leads
  const auto d = report::top_waits(ranks, 5);
  const auto ring_line = std::find_if(d.begin(), d.end(), [](const report::TopWait& t) {
    return t.releaser.what == "fwd ring-zigzag kv_p2p";
  });
  ASSERT_NE(ring_line, d.end());
  EXPECT_EQ(ring_line->rank, 2);
  EXPECT_TRUE(report::top_waits({}, 5).empty());
}

}  // namespace CPSIM_TEST_TU
