// --set key.path=value: YAML values, created keys, presets turned into mappings.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scenario/load.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;

namespace {
const std::string kData = std::string(CPSIM_SOURCE_DIR) + "/tests/scenario/data/";
const std::string kBase = "platform: dgx-h100\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n";
}  // namespace

TEST(Overrides, ScalarValue) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"parallel.cp=8"});
  EXPECT_EQ(s.parallel.cp, 8);
}

TEST(Overrides, EnumValueCreatesNestedKeys) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"parallel.cp=8", "parallel.attention.scheme=ulysses"});
  EXPECT_EQ(s.parallel.attention.scheme, AttentionScheme::Ulysses);
}

TEST(Overrides, ListValue) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"training.documents=[64K,64K]"});
  EXPECT_EQ(s.training.documents, (std::vector<int64_t>{65536, 65536}));
}

TEST(Overrides, MappingValueReplaces) {
  const Scenario s =
      parse_scenario(kBase, "s.yaml", {"training={seq_len: 32K, micro_batches: 8}", "parallel={cp: 2}"});
  EXPECT_EQ(s.training.seq_len, 32768);
  EXPECT_EQ(s.training.micro_batches, 8);
  EXPECT_EQ(s.parallel.cp, 2);
}

TEST(Overrides, LaterWins) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"parallel.cp=2", "parallel.cp=4"});
  EXPECT_EQ(s.parallel.cp, 4);
}

TEST(Overrides, ReplacesFileValue) {
  const Scenario s = load_scenario(kData + "anchor-128k-ring.yaml",
                                   {"parallel.attention.layout=contiguous", "training.seq_len=256K",
                                    "training.documents=[256K]"});
  EXPECT_EQ(s.parallel.attention.layout, Layout::Contiguous);
  EXPECT_EQ(s.training.seq_len, 262144);
  EXPECT_EQ(s.training.documents, (std::vector<int64_t>{262144}));
}

TEST(Overrides, ListIndex) {
  const Scenario s = load_scenario(kData + "anchor-128k-ring.yaml", {"training.documents.0=64K",
                                                                      "training.documents.1=64K"});
  EXPECT_EQ(s.training.documents, (std::vector<int64_t>{65536, 65536}));
}

TEST(Overrides, PresetNameBecomesMapping) {
  // `platform: dgx-h100` + platform.nodes=2 -> {preset: dgx-h100, nodes: 2}
  const Scenario s = parse_scenario(kBase, "s.yaml", {"platform.nodes=2", "parallel.cp=16",
                                                      "parallel.attention.scheme=ring"});
  EXPECT_EQ(s.platform.name, "dgx-h100");
  EXPECT_EQ(s.platform.total_gpus(), 16);
  EXPECT_EQ(s.parallel.cp, 16);
}

TEST(Overrides, GpuFieldOfAPreset) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"platform.gpu.memory=141GB"});
  EXPECT_EQ(s.platform.gpu.name, "H100-SXM");
  EXPECT_DOUBLE_EQ(s.platform.gpu.memory_bytes, 141e9);
  EXPECT_DOUBLE_EQ(s.platform.gpu.peak_flops, 989e12);
}

TEST(Overrides, SwapPreset) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"platform=hgx-h200", "model=llama3-8b"});
  EXPECT_EQ(s.platform.name, "hgx-h200");
  EXPECT_EQ(s.model.name, "llama3-8b");
}

TEST(Overrides, QuotedStringValue) {
  const Scenario s = parse_scenario(kBase, "s.yaml", {"name='my run: 1'"});
  EXPECT_EQ(s.name, "my run: 1");
}

TEST(Overrides, NoOverridesIsTheFile) {
  const Scenario a = load_scenario(kData + "anchor-128k-ring.yaml");
  const Scenario b = load_scenario(kData + "anchor-128k-ring.yaml", {});
  EXPECT_EQ(a.parallel.cp, b.parallel.cp);
  EXPECT_EQ(a.training.seq_len, b.training.seq_len);
}

TEST(Overrides, PlatformParams) {
  const PlatformSpec p = load_platform("h100-cluster", {"nodes=4"});
  EXPECT_EQ(p.nodes, 4);
  EXPECT_EQ(p.total_gpus(), 32);
  const PlatformSpec q = load_platform("dgx-h100", {"gpu.memory=94GB", "network.spines=4"});
  EXPECT_DOUBLE_EQ(q.gpu.memory_bytes, 94e9);
  EXPECT_EQ(q.spines, 4);
}

TEST(Overrides, PlatformParamError) {
  try {
    load_platform("h100-cluster", {"nodes=0"});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "<param>:1:7: error: nodes: must be >= 1, got 0\n"
              "  nodes=0\n"
              "        ^");
  }
}

}  // namespace CPSIM_TEST_TU
