// `cpsim collective` as nccl-tests prints it, its JSON, and its refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;
namespace fs = std::filesystem;

TEST(CollectiveCli, PrintsTheNcclTestsTable) {
  const Output o = run(kCpsim + " collective --platform dgx-h100 --op allreduce -b 1M -e 4M -f 2 "
                                "--engine analytic");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("out-of-place"), std::string::npos);
  EXPECT_NE(o.text.find("in-place"), std::string::npos);
  for (const char* col : {"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"})
    EXPECT_NE(o.text.find(col), std::string::npos) << col;
  EXPECT_NE(o.text.find("# Avg bus bandwidth    : "), std::string::npos);
  // 1M, 2M, 4M: three rows of "size count float sum -1 ...".
  int rows = 0;
  for (size_t at = 0; (at = o.text.find(" float    sum     -1 ", at)) != std::string::npos; ++at) ++rows;
  EXPECT_EQ(rows, 3);
  EXPECT_NE(o.text.find("     1048576       262144    float    sum     -1"), std::string::npos) << o.text;
}

TEST(CollectiveCli, JsonHasOneObjectPerSize) {
  const fs::path out = fs::temp_directory_path() / ("cpsim-coll-" + std::to_string(::getpid()) + ".json");
  const Output o = run(kCpsim + " collective --platform dgx-h100 --op sendrecv --ranks 2 --sizes 1G,2G "
                                "--engine analytic --json " + out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  fs::remove(out);
  ASSERT_EQ(j.at("results").size(), 2u);
  const auto& r = j["results"][0];
  EXPECT_EQ(r.at("size_bytes").get<double>(), 1073741824.0);
  EXPECT_EQ(r.at("algo").get<std::string>(), "P2P");
  // dgx-h100's send/recv pair is capped at 180 GB/s (calibration.md).
  EXPECT_NEAR(r.at("busbw_GBps").get<double>(), 180, 5);
  for (const char* k : {"time_us", "algbw_GBps", "proto", "channels"}) EXPECT_TRUE(r.contains(k)) << k;
}

TEST(CollectiveCli, SizeErrorsExitTwoWithAMessage) {
  struct Case {
    const char* args;
    const char* says;
  } cases[] = {
      {"--sizes 0.4..1K", "less than one byte"},
      {"--sizes 1e20,1e23", "above the largest size"},
      {"-b 1K -e 8G -f 1", "must be above 1"},
      {"-b 1 -e 1T -f 1.01", "more than 64 sizes"},
      {"-b 8G -e 1K", "below -b"},
      {"--sizes 1K -b 1K", "one or the other"},
      {"-b x", "not a positive size"},
      {"-d float7 -b 1K", "--datatype"},
      {"--algo nvls -b 1G --platform-check", ""},
  };
  for (const auto& c : cases) {
    if (std::string(c.says).empty()) continue;
    const Output o = run(kCpsim + " collective --platform dgx-h100 --op allreduce " + c.args);
    EXPECT_EQ(o.rc, 2) << c.args << "\n" << o.text;
    EXPECT_NE(o.text.find(c.says), std::string::npos) << c.args << "\n" << o.text;
  }
  const Output nvls = run(kCpsim + " collective --platform dgx-a100 --op allreduce --algo nvls -b 1G");
  EXPECT_EQ(nvls.rc, 2) << nvls.text;
  EXPECT_NE(nvls.text.find("without NVLS"), std::string::npos) << nvls.text;
}

// Both engines give NCCL's NVLS-Tree all-reduce across 16 nodes the same bus bandwidth. The
// analytic engine once divided each transfer's NIC bandwidth by the flow count of its busiest
// link, a fat leaf-spine link that is never the bottleneck: 156 GB/s against SimGrid's 327.
TEST(CollectiveCli, EnginesAgreeAcrossALeafSpineFabric) {
  auto busbw = [](const std::string& engine) {
    const fs::path out = fs::temp_directory_path() /
                         ("cpsim-coll-" + engine + "-" + std::to_string(::getpid()) + ".json");
    const Output o = run(kCpsim + " collective --platform h100-cluster --param nodes=16 --op allreduce "
                                  "--ranks 128 -b 256M -e 256M --engine " + engine + " --json " + out.string());
    EXPECT_EQ(o.rc, 0) << o.text;
    std::ifstream in(out);
    const auto j = nlohmann::json::parse(in);
    fs::remove(out);
    EXPECT_EQ(j.at("results").at(0).at("algo").get<std::string>(), "NVLSTree");
    return j.at("results").at(0).at("busbw_GBps").get<double>();
  };
  const double sg = busbw("simgrid"), an = busbw("analytic");
  EXPECT_NEAR(an, sg, 0.02 * sg);
  EXPECT_GT(sg, 250);  // 8 rails x 47 GB/s through NVLS-Tree, not one NIC
}

TEST(CollectiveCli, PrintsTheAlgorithmsBoundUnderTheTable) {
  // NVLS-Tree on 4 H100 nodes: NCCL's double binary tree sends each node's buffer twice through
  // its 8 NICs (47 GB/s each), so a NIC bounds it at 2(n-1)/n x 8 x 47 / 2 = 364 GB/s.
  const fs::path out = fs::temp_directory_path() / ("cpsim-bound-" + std::to_string(::getpid()) + ".json");
  const Output o = run(kCpsim + " collective --platform h100-cluster --param nodes=4 --op allreduce "
                                "-b 8G -e 8G --json " + out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  const size_t at = o.text.find("# Bound at 8589934592 B (NVLSTree Simple, 8 channels): n");
  ASSERT_NE(at, std::string::npos) << o.text;
  EXPECT_NE(o.text.find(".nic", at), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("(nic, 47.0 GB/s)", at), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("busbw <= 364.25 GB/s", at), std::string::npos) << o.text;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  fs::remove(out);
  const auto& b = j.at("results").at(0).at("bound");
  EXPECT_EQ(b.at("class").get<std::string>(), "nic");
  EXPECT_NEAR(b.at("bytes").get<double>(), 8589934592.0 / 8 * 2, 1e3);
  // nccl-tests sendrecv inside a node: the p2p path's cap, not a link, bounds it.
  const Output p = run(kCpsim + " collective --platform dgx-h100 --op sendrecv --ranks 2 -b 1G -e 1G");
  ASSERT_EQ(p.rc, 0) << p.text;
  EXPECT_NE(p.text.find("p2p cap (software, 180.0 GB/s)"), std::string::npos) << p.text;
}

TEST(CollectiveCli, AllToAllIsBoundedAtAnySize) {
  // Pairs at once up to 128 ranks; past that auto pipelines it (16,384 ranks: 268 M pairs were
  // killed at 24 GB), and an explicit --collectives steps is refused with the count, exit 2.
  const Output refused = run(kCpsim + " collective --platform h100-cluster --param nodes=32 --op alltoall "
                                      "--collectives steps -b 1G -e 1G");
  EXPECT_EQ(refused.rc, 2) << refused.text;
  EXPECT_NE(refused.text.find("an all-to-all on 256 ranks is 65280 transfers at once"), std::string::npos)
      << refused.text;
  const fs::path out = fs::temp_directory_path() / ("cpsim-a2a-" + std::to_string(::getpid()) + ".json");
  const Output o = run(kCpsim + " collective --platform h100-cluster --param nodes=2048 --op alltoall "
                                "-b 1G -e 1G --json " + out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("collectives pipelined"), std::string::npos) << o.text;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  fs::remove(out);
  const auto& r = j.at("results").at(0);
  EXPECT_EQ(r.at("algo").get<std::string>(), "P2P");
  EXPECT_EQ(r.at("proto").get<std::string>(), "Simple");
  // NCCL's rule (nccl-tests #130): N/(N-1) x one NIC (47 GB/s) x (n-1)/n on N = 2,048 nodes.
  EXPECT_NEAR(r.at("busbw_GBps").get<double>(), 47.0 * 2048 / 2047 * 16383 / 16384, 0.01 * 47);
}

}  // namespace CPSIM_TEST_TU
