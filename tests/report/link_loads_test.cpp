// The report reads products only (a Plan and a Trace): link loads and bytes per link class
// computed from a hand-made trace, without an engine.
#include <gtest/gtest.h>

#include "support/platforms.hpp"
#include "report/metrics.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

TEST(LinkLoads, OneTransferOverNvswitchLoadsTheSendersUpAndTheReceiversDownLink) {
  const model::Topology topo(test::dgx_h100());
  schedule::Plan p;
  schedule::OpLabel l;
  l.name = p.graph.intern("x");
  p.graph.add_transfer(0, schedule::stream::kCpSend, 1, schedule::stream::kCpRecv, 1e9, l);
  p.graph.finalize();
  schedule::Trace tr;
  tr.start_s = {0.0};
  tr.end_s = {0.004};
  tr.makespan_s = 0.004;
  const report::Result r = report::analyze(p, tr, topo, {});
  ASSERT_EQ(r.bytes_per_link_class.size(), 1u);
  EXPECT_EQ(r.bytes_per_link_class[0].first, "nvlink");
  EXPECT_DOUBLE_EQ(r.bytes_per_link_class[0].second, 2e9);  // up link and down link
  ASSERT_EQ(r.links.size(), 2u);
  for (const auto& link : r.links) {
    EXPECT_EQ(link.cls, "nvlink");
    EXPECT_DOUBLE_EQ(link.bytes, 1e9);
    EXPECT_NEAR(link.utilisation, 1e9 / link.bw_Bps / 0.004, 1e-12);
  }
  // The critical path is the one transfer.
  ASSERT_EQ(r.critical_path.ops.size(), 1u);
  EXPECT_DOUBLE_EQ(r.critical_path.length_s, 0.004);
}

}  // namespace CPSIM_TEST_TU
