// The perturb section: slow nodes, degraded links, rails down; what each reads into and the
// exact message for each bad value.
#include <gtest/gtest.h>

#include <string>

#include "scenario/load.hpp"
#include "support/scenario_error.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using scenario::InputError;

namespace {

const std::string kHead = "platform: dgx-h100\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\nparallel: {cp: 8}\n";
const std::string kCluster =
    "platform: {preset: h100-cluster, nodes: 2}\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"
    "parallel: {cp: 16}\n";


}  // namespace

TEST(Perturb, DefaultsAreNoPerturbation) {
  const auto s = scenario::parse_scenario(kHead, "s.yaml");
  EXPECT_FALSE(s.perturb.any());
  EXPECT_TRUE(s.perturb.links.empty());
  EXPECT_TRUE(s.perturb.rails_down.empty());
  EXPECT_TRUE(s.perturb.node_slowdown.empty());
}

TEST(Perturb, ReadsEveryKey) {
  const auto s = scenario::parse_scenario(
      kCluster +
          "perturb:\n"
          "  slow_gpus: {3: 1.2}\n"
          "  slow_nodes: {1: 1.1}\n"
          "  links:\n"
          "    - {gpu: 5, link: nvlink, bw_factor: 0.5}\n"
          "    - {gpu: 9, link: nic, direction: up, add_latency: 2us}\n"
          "  rails_down: [6, 2]\n",
      "s.yaml");
  const auto& p = s.perturb;
  EXPECT_DOUBLE_EQ(p.gpu_slowdown.at(3), 1.2);
  EXPECT_DOUBLE_EQ(p.node_slowdown.at(1), 1.1);
  ASSERT_EQ(p.links.size(), 2u);
  EXPECT_EQ(p.links[0].gpu, 5);
  EXPECT_EQ(p.links[0].link, scenario::PerturbLink::NVLink);
  EXPECT_EQ(p.links[0].direction, scenario::LinkDirection::Both);
  EXPECT_DOUBLE_EQ(p.links[0].bw_factor, 0.5);
  EXPECT_DOUBLE_EQ(p.links[0].add_latency_s, 0.0);
  EXPECT_EQ(p.links[1].link, scenario::PerturbLink::Nic);
  EXPECT_EQ(p.links[1].direction, scenario::LinkDirection::Up);
  EXPECT_DOUBLE_EQ(p.links[1].bw_factor, 1.0);
  EXPECT_NEAR(p.links[1].add_latency_s, 2e-6, 1e-18);
  EXPECT_EQ(p.rails_down, (std::vector<int>{2, 6}));
  EXPECT_TRUE(p.any());
}

TEST(Perturb, SlowNodesMultiplySlowGpus) {
  const auto s = scenario::parse_scenario(kCluster + "perturb: {slow_gpus: {9: 1.5}, slow_nodes: {1: 2}}\n", "s.yaml");
  const auto f = s.perturb.gpu_factors(s.platform.gpus_per_node);
  ASSERT_EQ(f.size(), 8u);  // GPUs 8..15
  EXPECT_EQ(f.begin()->first, 8);
  EXPECT_DOUBLE_EQ(f.at(8), 2.0);
  EXPECT_DOUBLE_EQ(f.at(9), 3.0);
  EXPECT_DOUBLE_EQ(f.at(15), 2.0);
}

TEST(Perturb, FactorsOfOneAreNothing) {
  const auto s = scenario::parse_scenario(
      kHead + "perturb: {slow_gpus: {3: 1}, slow_nodes: {0: 1.0}, jitter_cv: 0, gpu_variation_cv: 0, "
              "links: [{gpu: 2, link: nvlink, bw_factor: 1, add_latency: 0us}]}\n",
      "s.yaml");
  EXPECT_FALSE(s.perturb.any());
}

TEST(Perturb, OverridesReachTheNewKeys) {
  const auto s = scenario::parse_scenario(kCluster, "s.yaml");
  EXPECT_TRUE(s.perturb.rails_down.empty());
  const auto o = scenario::parse_scenario(
      kCluster, "s.yaml", {"perturb.rails_down=[3]", "perturb.links=[{gpu: 1, link: nvlink, bw_factor: 0.5}]"});
  EXPECT_EQ(o.perturb.rails_down, std::vector<int>{3});
  ASSERT_EQ(o.perturb.links.size(), 1u);
  EXPECT_DOUBLE_EQ(o.perturb.links[0].bw_factor, 0.5);
}

TEST(Perturb, JitterDistribution) {
  EXPECT_EQ(scenario::parse_scenario(kHead, "s.yaml").perturb.jitter_dist, scenario::JitterDist::Normal);
  EXPECT_EQ(scenario::parse_scenario(kHead + "perturb: {jitter_cv: 0.1, jitter_dist: lognormal}\n", "s.yaml")
                .perturb.jitter_dist,
            scenario::JitterDist::LogNormal);
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {jitter_dist: gamma}\n"),
            "s.yaml:5:24: error: perturb.jitter_dist: unknown value 'gamma'; allowed: normal, lognormal\n"
            "  perturb: {jitter_dist: gamma}\n"
            "                         ^");
}

TEST(PerturbErrors, SlowNodeOutsideThePlatform) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {slow_nodes: {1: 1.1}}\n"),
            "s.yaml:5:24: error: perturb.slow_nodes.1: node 1 is outside platform 'dgx-h100' with 1 node\n"
            "  perturb: {slow_nodes: {1: 1.1}}\n"
            "                         ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {slow_nodes: {0: 0}}\n"),
            "s.yaml:5:27: error: perturb.slow_nodes.0: must be > 0, got 0\n"
            "  perturb: {slow_nodes: {0: 0}}\n"
            "                            ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {slow_nodes: [0]}\n"),
            "s.yaml:5:23: error: perturb.slow_nodes: expected a mapping of node to slowdown factor such as "
            "{1: 1.1}, got a list\n"
            "  perturb: {slow_nodes: [0]}\n"
            "                        ^");
}

TEST(PerturbErrors, RailsDown) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {rails_down: [8]}\n"),
            "s.yaml:5:24: error: perturb.rails_down[0]: rail 8 is outside platform 'dgx-h100' with 8 NICs per "
            "node (rails 0..7)\n"
            "  perturb: {rails_down: [8]}\n"
            "                         ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {rails_down: [1, 1]}\n"),
            "s.yaml:5:27: error: perturb.rails_down[1]: rail 1 is given twice\n"
            "  perturb: {rails_down: [1, 1]}\n"
            "                            ^");
  EXPECT_EQ(cpsim::test::scenario_error("platform: l40s-pcie\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\nperturb: {rails_down: [0]}\n"),
            "s.yaml:4:24: error: perturb.rails_down[0]: platform 'l40s-pcie' has no rails (network.nics_per_node "
            "is 0)\n"
            "  perturb: {rails_down: [0]}\n"
            "                         ^");
}

TEST(PerturbErrors, Links) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {links: [{gpu: 8, link: nvlink}]}\n"),
            "s.yaml:5:25: error: perturb.links[0].gpu: GPU 8 is outside platform 'dgx-h100' with 8 GPUs\n"
            "  perturb: {links: [{gpu: 8, link: nvlink}]}\n"
            "                          ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {links: [{gpu: 1, link: pcie}]}\n"),
            "s.yaml:5:34: error: perturb.links[0].link: platform 'dgx-h100' joins its GPUs by NVSwitch, not PCIe; "
            "use link: nvlink\n"
            "  perturb: {links: [{gpu: 1, link: pcie}]}\n"
            "                                   ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {links: [{gpu: 1, link: nic}]}\n"),
            "s.yaml:5:34: error: perturb.links[0].link: platform 'dgx-h100' has no network links (nodes 1, "
            "nics_per_node 8)\n"
            "  perturb: {links: [{gpu: 1, link: nic}]}\n"
            "                                   ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {links: [{gpu: 1, link: nvlink, bw_factor: 0}]}\n"),
            "s.yaml:5:53: error: perturb.links[0].bw_factor: must be > 0, got 0\n"
            "  perturb: {links: [{gpu: 1, link: nvlink, bw_factor: 0}]}\n"
            "                                                      ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {links: [{gpu: 1, link: nvlink, direction: sideways}]}\n"),
            "s.yaml:5:53: error: perturb.links[0].direction: unknown value 'sideways'; allowed: up, down, both\n"
            "  perturb: {links: [{gpu: 1, link: nvlink, direction: sideways}]}\n"
            "                                                      ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {links: [{gpu: 1, lnk: nvlink}]}\n"),
            "s.yaml:5:28: error: perturb.links[0].lnk: unknown key 'lnk' (did you mean 'link'?)\n"
            "  perturb: {links: [{gpu: 1, lnk: nvlink}]}\n"
            "                             ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {links: {gpu: 1}}\n"),
            "s.yaml:5:18: error: perturb.links: expected a list of links such as [{gpu: 3, link: nvlink, "
            "bw_factor: 0.5}], got a mapping\n"
            "  perturb: {links: {gpu: 1}}\n"
            "                   ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "perturb: {links: [{gpu: 1, link: nvlink, add_latency: -1us}]}\n"),
            "s.yaml:5:55: error: perturb.links[0].add_latency: negative value '-1us' is not allowed\n"
            "  perturb: {links: [{gpu: 1, link: nvlink, add_latency: -1us}]}\n"
            "                                                        ^");
  EXPECT_EQ(cpsim::test::scenario_error("platform: l40s-pcie\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"
                "perturb: {links: [{gpu: 1, link: nvlink}]}\n"),
            "s.yaml:4:34: error: perturb.links[0].link: platform 'l40s-pcie' has no NVLink (its intra-node fabric "
            "is pcie); use link: pcie\n"
            "  perturb: {links: [{gpu: 1, link: nvlink}]}\n"
            "                                   ^");
}

}  // namespace CPSIM_TEST_TU
