// Every bundled preset loads, with the calibration.md figures it cites.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "scenario/load.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;

TEST(Presets, EveryPlatformFileLoads) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/platforms")) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() != ".yaml" || stem == "gpus") continue;
    SCOPED_TRACE(stem);
    const PlatformSpec p = load_platform(stem);
    EXPECT_EQ(p.name, stem);
    EXPECT_GT(p.total_gpus(), 0);
    EXPECT_GT(p.gpu.peak_flops, 0);
    ++n;
  }
  EXPECT_EQ(n, 7);
}

TEST(Presets, EveryModelFileLoads) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/scenarios/models")) {
    if (e.path().extension() != ".yaml") continue;
    const std::string stem = e.path().stem().string();
    SCOPED_TRACE(stem);
    const ModelSpec m = load_model(stem);
    EXPECT_EQ(m.name, stem);
    ++n;
  }
  EXPECT_EQ(n, 9);  // + qwen3-30b-a3b, glm-4.5-air, deepseek-v3, mixtral-8x7b
}

TEST(Presets, EveryGpuLoads) {
  for (const char* gpu : {"a100-sxm", "h100-sxm", "h800-sxm", "h200-sxm", "b200", "gb200", "l40s"}) {
    SCOPED_TRACE(gpu);
    const PlatformSpec p = load_platform("dgx-h100", {std::string("gpu=") + gpu});
    EXPECT_GT(p.gpu.peak_flops, 0);
    EXPECT_LE(p.gpu.gemm_flops, p.gpu.peak_flops);
    EXPECT_GT(p.gpu.hbm_Bps, 0);
    EXPECT_GT(p.gpu.memory_bytes, 0);
  }
}

TEST(Presets, DgxH100) {
  const PlatformSpec p = load_platform("dgx-h100");
  EXPECT_EQ(p.gpu.name, "H100-SXM");
  EXPECT_DOUBLE_EQ(p.gpu.peak_flops, 989e12);
  EXPECT_DOUBLE_EQ(p.gpu.gemm_flops, 795e12);
  EXPECT_DOUBLE_EQ(p.gpu.hbm_Bps, 2.95e12);
  EXPECT_DOUBLE_EQ(p.gpu.memory_bytes, 80.0 * (1ull << 30));
  EXPECT_EQ(p.nodes, 1);
  EXPECT_EQ(p.gpus_per_node, 8);
  EXPECT_EQ(p.intra, IntraFabric::NVSwitch);
  EXPECT_DOUBLE_EQ(p.nvlink.bw_Bps, 450e9);
  EXPECT_NEAR(p.nvlink.bw_Bps * p.nvlink.efficiency, 20.6e9 * 18, 1e6);  // NCCL's SM90 model
  EXPECT_DOUBLE_EQ(p.nvlink.latency_s, 0.3e-6);
  EXPECT_EQ(p.nvlink_domain_gpus, 8);
  EXPECT_DOUBLE_EQ(p.nccl.p2p_max_Bps, 180e9);
  EXPECT_DOUBLE_EQ(p.nccl.p2p_latency_s, 2.5e-6);
  EXPECT_EQ(p.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(p.nic.bw_Bps, 50e9);
  EXPECT_DOUBLE_EQ(p.nic.efficiency, 0.94);
  EXPECT_DOUBLE_EQ(p.switch_latency_s, 150e-9);
  const NcclSpec defaults;
  for (int i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(p.nccl.base_latency_s[i], defaults.base_latency_s[i]);
    EXPECT_DOUBLE_EQ(p.nccl.hop_nvlink_s[i], defaults.hop_nvlink_s[i]);
    EXPECT_DOUBLE_EQ(p.nccl.hop_pcie_s[i], defaults.hop_pcie_s[i]);
    EXPECT_DOUBLE_EQ(p.nccl.hop_net_s[i], defaults.hop_net_s[i]);
    EXPECT_DOUBLE_EQ(p.nccl.protocol_efficiency[i], defaults.protocol_efficiency[i]);
  }
}

TEST(Presets, DgxA100) {
  const PlatformSpec p = load_platform("dgx-a100");
  EXPECT_DOUBLE_EQ(p.gpu.peak_flops, 312e12);
  EXPECT_DOUBLE_EQ(p.nvlink.bw_Bps, 300e9);
  EXPECT_NEAR(p.nvlink.bw_Bps * p.nvlink.efficiency, 20.0e9 * 12, 1e6);  // NCCL's SM80 model
  EXPECT_DOUBLE_EQ(p.nic.bw_Bps, 25e9);
  // A send/recv pair at what A100s measure (sendrecv_perf, 195 GB/s at 1 GiB), not H100's
  // fraction of the link scaled to 300 GB/s (120).
  EXPECT_DOUBLE_EQ(p.nccl.p2p_max_Bps, 195e9);
}

TEST(Presets, HgxH800) {
  const PlatformSpec p = load_platform("hgx-h800");
  EXPECT_DOUBLE_EQ(p.nvlink.bw_Bps, 200e9);
  EXPECT_NEAR(p.nvlink.bw_Bps * p.nvlink.efficiency, 20.6e9 * 8, 1e6);
}

TEST(Presets, HgxH200) {
  const PlatformSpec p = load_platform("hgx-h200");
  EXPECT_EQ(p.gpu.name, "H200-SXM");
  EXPECT_DOUBLE_EQ(p.gpu.memory_bytes, 141.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(p.nvlink.bw_Bps, 450e9);
  EXPECT_DOUBLE_EQ(p.nccl.p2p_max_Bps, 180e9);
}

TEST(Presets, L40sPcie) {
  const PlatformSpec p = load_platform("l40s-pcie");
  EXPECT_EQ(p.intra, IntraFabric::PCIe);
  EXPECT_EQ(p.gpu.name, "L40S");
  EXPECT_DOUBLE_EQ(p.gpu.peak_flops, 362e12);
  EXPECT_DOUBLE_EQ(p.gpu.memory_bytes, 48.0 * (1ull << 30));
  EXPECT_EQ(p.gpus_per_pcie_switch, 2);
  EXPECT_EQ(p.pcie_switches_per_cpu, 2);
  EXPECT_DOUBLE_EQ(p.pcie.bw_Bps, 31e9);
  EXPECT_DOUBLE_EQ(p.pcie_uplink.bw_Bps, 31e9);
  EXPECT_DOUBLE_EQ(p.cpu_link.bw_Bps, 40e9);
  EXPECT_EQ(p.nics_per_node, 0);
}

TEST(Presets, Gb200Nvl72) {
  const PlatformSpec p = load_platform("gb200-nvl72");
  EXPECT_EQ(p.total_gpus(), 72);
  EXPECT_EQ(p.gpus_per_node, 4);
  EXPECT_EQ(p.nvlink_domain_gpus, 72);
  EXPECT_DOUBLE_EQ(p.nvlink.bw_Bps, 900e9);
  EXPECT_NEAR(p.nvlink.bw_Bps * p.nvlink.efficiency, 40.1e9 * 18, 1e6);  // NCCL's SM100 model
}

TEST(Presets, H100Cluster) {
  const PlatformSpec p = load_platform("h100-cluster");
  EXPECT_EQ(p.name, "h100-cluster");
  EXPECT_EQ(p.nodes, 2);
  EXPECT_EQ(p.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(p.nic.bw_Bps * p.nic.efficiency, 47e9);  // 46-48 GB/s through NCCL
  EXPECT_EQ(p.nodes_per_leaf, 32);
  EXPECT_EQ(p.spines, 8);
  EXPECT_DOUBLE_EQ(p.oversubscription, 1.0);
}

TEST(Presets, AnchorModel) {
  const ModelSpec m = load_model("qwen3.8-27b");
  EXPECT_EQ(m.layers, 64);
  EXPECT_EQ(m.hidden, 5120);
  EXPECT_EQ(m.heads_q, 24);
  EXPECT_EQ(m.heads_kv, 4);
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.ffn_hidden, 17408);
  EXPECT_EQ(m.vocab, 248320);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.pattern, (std::vector<LayerKind>{LayerKind::LinearAttention, LayerKind::LinearAttention,
                                               LayerKind::LinearAttention, LayerKind::FullAttention}));
  EXPECT_EQ(m.linear_heads_v, 48);
  EXPECT_EQ(m.linear_heads_k, 16);
  EXPECT_EQ(m.linear_key_dim, 128);
  EXPECT_EQ(m.linear_value_dim, 128);
  EXPECT_EQ(m.linear_conv_width, 4);
  EXPECT_EQ(m.linear_heads_v * m.linear_key_dim * m.linear_value_dim, 786432);  // SPEC.md
  EXPECT_DOUBLE_EQ(m.total_params, 27781427952.0);
}

TEST(Presets, LlamaModels) {
  struct Row {
    const char* name;
    int layers, hidden, hq, hkv, ffn, vocab;
  };
  for (const Row& r : {Row{"llama2-7b", 32, 4096, 32, 32, 11008, 32000},
                       Row{"llama3-8b", 32, 4096, 32, 8, 14336, 128256},
                       Row{"llama3-70b", 80, 8192, 64, 8, 28672, 128256},
                       Row{"llama3-405b", 126, 16384, 128, 8, 53248, 128256}}) {
    SCOPED_TRACE(r.name);
    const ModelSpec m = load_model(r.name);
    EXPECT_EQ(m.layers, r.layers);
    EXPECT_EQ(m.hidden, r.hidden);
    EXPECT_EQ(m.heads_q, r.hq);
    EXPECT_EQ(m.heads_kv, r.hkv);
    EXPECT_EQ(m.head_dim, 128);
    EXPECT_EQ(m.ffn_hidden, r.ffn);
    EXPECT_EQ(m.vocab, r.vocab);
    EXPECT_EQ(m.pattern, std::vector<LayerKind>{LayerKind::FullAttention});
    EXPECT_DOUBLE_EQ(m.total_params, 0);
  }
}

TEST(Presets, ModelByPath) {
  const ModelSpec m = load_model(data_dir() + "/scenarios/models/llama3-8b.yaml");
  EXPECT_EQ(m.name, "llama3-8b");
}

TEST(Presets, UnknownModel) {
  try {
    load_model("llama5");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "<model>:1:1: error: unknown model preset 'llama5'; known: deepseek-v3, glm-4.5-air, llama2-7b, "
                                     "llama3-405b, llama3-70b, llama3-8b, mixtral-8x7b, qwen3-30b-a3b, qwen3.8-27b (searched " +
                                         data_dir() + "/scenarios/models/)\n  llama5\n  ^");
  }
}

TEST(Presets, UnknownPlatform) {
  try {
    load_platform("dgx-h1000");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "<platform>:1:1: error: unknown platform preset 'dgx-h1000'; known: dgx-a100, dgx-h100, "
              "gb200-nvl72, h100-cluster, hgx-h200, hgx-h800, l40s-pcie (searched " +
                  data_dir() + "/platforms/); did you mean 'dgx-h100'?\n  dgx-h1000\n  ^");
  }
}

TEST(Presets, GpusFileIsNotAPlatform) { EXPECT_THROW(load_platform("gpus"), InputError); }

}  // namespace CPSIM_TEST_TU
