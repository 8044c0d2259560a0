// Topology (sim/model/topology): links, routes, latencies and bottlenecks. The platforms are
// the engine tests' (tests/support/platforms.hpp), the class's main users.
#include "model/topology.hpp"

#include <gtest/gtest.h>

#include <set>

#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::model::LinkClass;
using cpsim::model::Topology;

namespace {
std::vector<std::string> names(const Topology& t, int a, int b) {
  std::vector<std::string> out;
  for (uint32_t l : t.route(a, b)) out.push_back(t.links()[l].name);
  return out;
}
}  // namespace

TEST(Topology, NvswitchNodeRoutesUpThenDown) {
  Topology t(cpsim::test::dgx_h100());
  EXPECT_EQ(t.gpus(), 8);
  EXPECT_EQ(t.links().size(), 16u);
  EXPECT_EQ(names(t, 0, 5), (std::vector<std::string>{"n0.gpu0.nvlink.up", "n0.gpu5.nvlink.down"}));
  EXPECT_TRUE(t.route(3, 3).empty());
  EXPECT_DOUBLE_EQ(t.route_latency_s(0, 5), 0.6e-6);
  EXPECT_DOUBLE_EQ(t.route_bw_Bps(0, 5), 450e9 * 0.824);
  EXPECT_EQ(t.route_class(0, 5), LinkClass::NVLink);
  const auto& up = t.links()[t.route(0, 5)[0]];
  EXPECT_DOUBLE_EQ(up.nominal_bw_Bps, 450e9);
  EXPECT_DOUBLE_EQ(up.bw_Bps, 450e9 * 0.824);
  EXPECT_THROW(t.route(0, 8), std::out_of_range);
}

TEST(Topology, SameRailSameLeafGoesNicToNic) {
  Topology t(cpsim::test::dgx_h100(2));
  EXPECT_EQ(names(t, 3, 11), (std::vector<std::string>{"n0.nic3.up", "n1.nic3.down"}));
  EXPECT_EQ(t.route_class(3, 11), LinkClass::Nic);
  // NIC link latency, plus one leaf traversal.
  EXPECT_NEAR(t.route_latency_s(3, 11), 2 * 1.27e-6 + 150e-9, 1e-15);
  EXPECT_DOUBLE_EQ(t.route_bw_Bps(3, 11), 50e9 * 0.94);
  // Intra-node traffic stays on NVLink.
  EXPECT_EQ(t.route_class(8, 15), LinkClass::NVLink);
}

TEST(Topology, CrossRailWithPxnStaysOnTheReceiversRail) {
  // NCCL's default PXN (paths.cc ncclTopoGetNetDev, P2P_PXN_LEVEL 2): GPU 7 of node 0 sends to
  // GPU 0 of node 1 through the NIC of its local GPU 0, reached over NVLink: rail 0 end to end,
  // no spine (a Megatron order that puts CP neighbours on other local ranks still stays on a
  // rail).
  Topology t(cpsim::test::dgx_h100(2));
  EXPECT_EQ(names(t, 7, 8), (std::vector<std::string>{"n0.gpu7.nvlink.up", "n0.gpu0.nvlink.down",
                                                      "n0.nic0.up", "n1.nic0.down"}));
  EXPECT_EQ(t.route_class(7, 8), LinkClass::Nic);
  // The same rail needs no proxy.
  EXPECT_EQ(names(t, 3, 11), (std::vector<std::string>{"n0.nic3.up", "n1.nic3.down"}));
}

TEST(Topology, CrossRailGoesThroughASpine) {
  auto spec = cpsim::test::dgx_h100(2);
  spec.nccl.pxn = false;  // NCCL_PXN_DISABLE=1
  Topology t(spec);
  auto r = names(t, 7, 8);  // rail 7 -> rail 0
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], "n0.nic7.up");
  EXPECT_EQ(r[1].rfind("rail7.leaf0.spine", 0), 0u);
  EXPECT_EQ(r[2].rfind("rail0.leaf0.spine", 0), 0u);
  EXPECT_EQ(r[3], "n1.nic0.down");
  EXPECT_EQ(t.route_class(7, 8), LinkClass::Spine);
  // leaf, spine, leaf: three switch traversals.
  EXPECT_NEAR(t.route_latency_s(7, 8), 4 * 1.27e-6 + 3 * 150e-9, 1e-15);
  EXPECT_EQ(t.route(7, 8), t.route(7, 8));  // deterministic
}

TEST(Topology, EcmpSpreadsPairsOverSpines) {
  auto spec = cpsim::test::dgx_h100(4);
  spec.nodes_per_leaf = 1;  // every node its own leaf: all inter-node traffic crosses a spine
  Topology t(spec);
  std::set<std::string> spines;
  for (int a = 0; a < 8; ++a)
    for (int b = 8; b < 32; b += 8) spines.insert(t.links()[t.route(a, b + a)[1]].name);
  EXPECT_GE(spines.size(), 4u);
}

TEST(Topology, UplinkBandwidthFollowsOversubscription) {
  auto spec = cpsim::test::dgx_h100(2);
  spec.nodes_per_leaf = 16;
  spec.spines = 4;
  spec.oversubscription = 2;
  spec.nccl.pxn = false;  // a cross-rail route that climbs to a spine
  Topology t(spec);
  const auto& up = t.links()[t.route(7, 8)[1]];
  EXPECT_EQ(up.cls, LinkClass::Spine);
  EXPECT_DOUBLE_EQ(up.nominal_bw_Bps, 16 * 50e9 / (2 * 4));
}

TEST(Topology, Nvl72DomainSpansNodes) {
  auto spec = cpsim::test::dgx_h100(18);
  spec.gpus_per_node = 4;
  spec.nics_per_node = 4;
  spec.nvlink_domain_gpus = 72;
  Topology t(spec);
  EXPECT_TRUE(t.same_nvlink_domain(0, 71));
  EXPECT_EQ(t.route(0, 71).size(), 2u);
  EXPECT_EQ(t.route_class(0, 71), LinkClass::NVLink);
  // Without NICs a single domain still works.
  spec.nics_per_node = 0;
  EXPECT_NO_THROW(Topology{spec});
  spec.nodes = 36;
  EXPECT_THROW(Topology{spec}, std::invalid_argument);
}

TEST(Topology, PcieTreeRoutesThroughLowestCommonAncestor) {
  Topology t(cpsim::test::pcie_box());
  EXPECT_EQ(t.route(0, 1).size(), 2u);  // same switch
  EXPECT_EQ(t.route(0, 2).size(), 4u);  // same CPU, other switch
  EXPECT_EQ(t.route(0, 5).size(), 5u);  // across the CPU link
  EXPECT_EQ(t.route_class(0, 1), LinkClass::PCIe);
  EXPECT_EQ(t.route_class(0, 5), LinkClass::CpuLink);
  // GPUs 0 and 1 share their switch's uplink when talking to the other switch.
  EXPECT_EQ(t.route(0, 2)[1], t.route(1, 3)[1]);
  EXPECT_EQ(t.links()[t.route(0, 2)[1]].name, "n0.sw0.uplink.up");
  EXPECT_DOUBLE_EQ(t.route_bw_Bps(0, 5), 31.5e9 * 0.8);  // the GPU links are the bottleneck
}

TEST(Topology, PcieNodesReachTheNicThroughTheirSwitch) {
  Topology t(cpsim::test::pcie_box(2));
  auto r = names(t, 1, 9);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.front(), "n0.gpu1.pcie.up");
  EXPECT_EQ(r[1], "n0.nic1.up");
  EXPECT_EQ(r.back(), "n1.gpu1.pcie.down");
}

TEST(Topology, MultiNodeWithoutNicsIsAnError) {
  auto spec = cpsim::test::dgx_h100(2);
  spec.nics_per_node = 0;
  EXPECT_THROW(Topology{spec}, std::invalid_argument);
}

}  // namespace CPSIM_TEST_TU
