// RouteBundles (engine/route_bundles.hpp) on its own: the max-min shares of transfers of one
// route, worked out by hand, and the queued ends that are current and those that are stale.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/route_bundles.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::engine::detail::RouteBundles;
using cpsim::schedule::OpId;

namespace {

/// The latest end queued per member.
struct Ends {
  std::map<OpId, double> at;
  auto sink() {
    return [this](OpId id, double end) { at[id] = end; };
  }
};

}  // namespace

// Route of narrowest link 100 B/s. a (cap 10), b (cap 60) and c (no cap) share it:
// water-filling gives a 10, then b min(60, 90 / 2) = 45, then c the 45 left.
TEST(RouteBundles, WaterFillingUnderEachCap) {
  const uint32_t links[] = {3, 7};
  RouteBundles rb(10);
  Ends e;
  const uint32_t g = rb.open(0, 1, 100.0, links, links + 2);
  EXPECT_EQ(rb.on_link(3), g);
  EXPECT_EQ(rb.on_link(7), g);
  EXPECT_EQ(rb.on_link(4), RouteBundles::kNone);
  rb.join(g, 1, 100.0, 10.0, 0.0, e.sink());  // alone: its cap
  EXPECT_DOUBLE_EQ(e.at[1], 10.0);
  rb.join(g, 2, 90.0, 60.0, 0.0, e.sink());  // a 10, b 60 (under 90)
  EXPECT_DOUBLE_EQ(e.at[1], 10.0);
  EXPECT_DOUBLE_EQ(e.at[2], 1.5);
  rb.join(g, 3, 45.0, 0.0, 0.5, e.sink());  // at 0.5: a 10, b 45, c 45
  EXPECT_DOUBLE_EQ(e.at[1], 10.0);                   // 95 left at 10 B/s
  EXPECT_DOUBLE_EQ(e.at[2], 0.5 + (90.0 - 30.0) / 45.0);
  EXPECT_DOUBLE_EQ(e.at[3], 0.5 + 1.0);
  // c ends at 1.5: b had 60 - 45 = 15 left, now at 60 (its cap) until 1.75.
  const double stale = e.at[2];
  rb.finish(3, 1.5, e.sink());
  EXPECT_FALSE(rb.current(2, stale));  // queued before c ended, at another time
  EXPECT_TRUE(rb.current(2, e.at[2]));
  EXPECT_FALSE(rb.current(3, e.at[3]));
  EXPECT_DOUBLE_EQ(e.at[2], 1.5 + 15.0 / 60.0);
  EXPECT_DOUBLE_EQ(e.at[1], 10.0);
  rb.finish(2, 1.75, e.sink());
  rb.finish(1, 10.0, e.sink());
  EXPECT_EQ(rb.on_link(3), RouteBundles::kNone);  // closed with its last member
  EXPECT_FALSE(rb.current(1, e.at[1]));
}

// Another flow reaches the group: every member leaves with its bytes left, and the group's
// links are free for a new one (which reuses its slot).
TEST(RouteBundles, DissolveHandsOverBytesLeft) {
  const uint32_t links[] = {2};
  RouteBundles rb(4);
  Ends e;
  const uint32_t g = rb.open(5, 6, 40.0, links, links + 1);
  rb.join(g, 10, 100.0, 0.0, 0.0, e.sink());
  rb.join(g, 11, 100.0, 0.0, 1.0, e.sink());  // 10 sent 40 alone, then both at 20
  EXPECT_TRUE(rb.same(g, 5, 6));
  EXPECT_FALSE(rb.same(g, 6, 5));
  std::map<OpId, double> left;
  rb.dissolve(g, 2.0, [&](OpId id, double bytes) { left[id] = bytes; });
  EXPECT_DOUBLE_EQ(left.at(10), 100.0 - 40.0 - 20.0);
  EXPECT_DOUBLE_EQ(left.at(11), 100.0 - 20.0);
  EXPECT_FALSE(rb.current(10, e.at[10]));
  EXPECT_EQ(rb.on_link(2), RouteBundles::kNone);
  EXPECT_EQ(rb.open(5, 6, 40.0, links, links + 1), g);
}

}  // namespace CPSIM_TEST_TU
