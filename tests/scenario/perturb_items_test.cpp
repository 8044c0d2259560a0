// The perturbations the fault what-if prices one at a time: every kind listed, nothing that
// changes nothing, each with exactly itself removed, in the order a capped what-if takes them.
#include <gtest/gtest.h>

#include <string>

#include "scenario/perturb_items.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using scenario::PerturbItem;
using scenario::PerturbSpec;

namespace {

PerturbSpec every_kind() {
  PerturbSpec p;
  p.rails_down = {0, 3};
  p.links.push_back({21, scenario::PerturbLink::Nic, scenario::LinkDirection::Both, 0.5, 2e-6});
  p.links.push_back({2, scenario::PerturbLink::NVLink, scenario::LinkDirection::Up, 0.25, 0});
  p.links.push_back({5, scenario::PerturbLink::NVLink, scenario::LinkDirection::Both, 1, 0});  // nothing
  p.node_slowdown = {{1, 1.1}, {2, 1.0}};
  p.gpu_slowdown = {{3, 1.2}, {7, 1.5}};
  p.gpu_variation_cv = 0.05;
  p.jitter_cv = 0.02;
  p.interference = 0.3;
  return p;
}

}  // namespace

TEST(PerturbItems, EveryKindOnceEachMostSevereOfEachKindInTurn) {
  const auto items = scenario::perturb_items(every_kind());
  std::vector<std::string> labels;
  for (const PerturbItem& i : items) labels.push_back(i.label);
  EXPECT_EQ(labels, (std::vector<std::string>{
                        "rail 0 down on every node", "NVLink of GPU 2 (up) at 0.25x bandwidth",
                        "node 1 slowed x1.1", "GPU 7 slowed x1.5", "GPU speed variation (cv 0.05)",
                        "kernel jitter (cv 0.02, normal)",
                        // second round: what is left of each kind
                        "rail 3 down on every node", "NIC of GPU 21 at 0.5x bandwidth, +2 us latency",
                        "GPU 3 slowed x1.2"}));
  EXPECT_TRUE(items[0].network);
  EXPECT_TRUE(items[1].network);
  EXPECT_FALSE(items[2].network);
  EXPECT_FALSE(items[4].network);
}

TEST(PerturbItems, EachRemovesItselfAlone) {
  const PerturbSpec p = every_kind();
  const auto items = scenario::perturb_items(p);
  ASSERT_EQ(items.size(), 9u);
  // rail 0
  EXPECT_EQ(items[0].without.rails_down, std::vector<int>{3});
  EXPECT_EQ(items[0].without.links.size(), 3u);
  // NVLink of GPU 2: the other two links stay
  ASSERT_EQ(items[1].without.links.size(), 2u);
  EXPECT_EQ(items[1].without.links[0].gpu, 21);
  EXPECT_EQ(items[1].without.links[1].gpu, 5);
  EXPECT_EQ(items[1].without.rails_down, p.rails_down);
  // node 1, GPU 7
  EXPECT_EQ(items[2].without.node_slowdown.count(1), 0u);
  EXPECT_EQ(items[2].without.gpu_slowdown, p.gpu_slowdown);
  EXPECT_EQ(items[3].without.gpu_slowdown.count(7), 0u);
  EXPECT_EQ(items[3].without.gpu_slowdown.count(3), 1u);
  // the noise
  EXPECT_EQ(items[4].without.gpu_variation_cv, 0);
  EXPECT_EQ(items[4].without.jitter_cv, 0.02);
  EXPECT_EQ(items[5].without.jitter_cv, 0);
  EXPECT_EQ(items[5].without.gpu_variation_cv, 0.05);
  for (const PerturbItem& i : items) {
    EXPECT_TRUE(i.without.any()) << i.label;  // the others are still there
    EXPECT_EQ(i.without.interference, 0.3) << i.label;
  }
}

TEST(PerturbItems, NothingPerturbedListsNothingAndAllRemovedIsNominal) {
  PerturbSpec p;
  p.gpu_slowdown = {{3, 1.0}};
  p.interference = 0.1;
  EXPECT_TRUE(scenario::perturb_items(p).empty());
  const PerturbSpec none = scenario::without_all(every_kind());
  EXPECT_FALSE(none.any());
  EXPECT_TRUE(scenario::perturb_items(none).empty());
  EXPECT_EQ(none.interference, 0.3);  // a platform property, not a fault
}

}  // namespace CPSIM_TEST_TU
