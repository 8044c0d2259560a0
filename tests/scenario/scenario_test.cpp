// Valid scenarios: every key read into the specs, defaults, presets by path and inline.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "scenario/load.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;

namespace {
const std::string kData = std::string(CPSIM_SOURCE_DIR) + "/tests/scenario/data/";
}

TEST(Scenario, EveryKeyOfTheAnchor) {
  const Scenario s = load_scenario(kData + "anchor-128k-ring.yaml");
  EXPECT_EQ(s.name, "anchor-128k-ring");
  EXPECT_EQ(s.file, kData + "anchor-128k-ring.yaml");
  EXPECT_EQ(s.platform.name, "dgx-h100");
  EXPECT_EQ(s.platform.total_gpus(), 8);
  EXPECT_EQ(s.model.name, "qwen3.8-27b");

  EXPECT_EQ(s.training.seq_len, 131072);
  EXPECT_EQ(s.training.micro_batch, 1);
  EXPECT_EQ(s.training.micro_batches, 4);
  EXPECT_EQ(s.training.recompute, Recompute::Selective);
  EXPECT_EQ(s.training.documents, (std::vector<int64_t>{32768, 98304}));
  EXPECT_TRUE(s.training.doc_distribution.empty());

  const ParallelSpec& p = s.parallel;
  EXPECT_EQ(p.tp, 1);
  EXPECT_EQ(p.cp, 8);
  EXPECT_EQ(p.pp, 1);
  EXPECT_EQ(p.dp, 1);
  EXPECT_FALSE(p.sequence_parallel);
  EXPECT_EQ(p.order, (std::vector<std::string>{"cp", "tp", "pp", "dp"}));
  EXPECT_EQ(p.virtual_stages, 1);
  EXPECT_EQ(p.zero_stage, 2);
  EXPECT_DOUBLE_EQ(p.dp_bucket_bytes, 50e6);
  EXPECT_EQ(p.attention.scheme, AttentionScheme::Ring);
  EXPECT_EQ(p.attention.layout, Layout::ZigZag);
  EXPECT_EQ(p.attention.stripe_width, 1);
  EXPECT_EQ(p.attention.ulysses_degree, 0);
  EXPECT_EQ(p.attention.ulysses_placement, UlyssesPlacement::InterNode);
  EXPECT_FALSE(p.attention.replicate_kv_heads);
  EXPECT_TRUE(p.attention.dkv_fp32);
  EXPECT_EQ(p.attention.inner_ring, 0);
  EXPECT_EQ(p.linear, LinearScheme::Relay);

  EXPECT_EQ(s.simulation.engine, EngineKind::Analytic);
  EXPECT_EQ(s.simulation.scope, Scope::AttentionLayer);
  EXPECT_EQ(s.simulation.seed, 7u);
  EXPECT_EQ(s.cost.profile, "none");

  EXPECT_EQ(s.perturb.gpu_slowdown.size(), 2u);
  EXPECT_DOUBLE_EQ(s.perturb.gpu_slowdown.at(3), 1.2);
  EXPECT_DOUBLE_EQ(s.perturb.gpu_slowdown.at(5), 1.5);
  EXPECT_DOUBLE_EQ(s.perturb.jitter_cv, 0.02);
  EXPECT_DOUBLE_EQ(s.perturb.gpu_variation_cv, 0.05);
  EXPECT_DOUBLE_EQ(s.perturb.interference, 0.15);
}

TEST(Scenario, Defaults) {
  const Scenario s = load_scenario(kData + "minimal.yaml");
  EXPECT_EQ(s.name, "minimal");  // the file stem
  EXPECT_EQ(s.training.seq_len, 32768);
  EXPECT_EQ(s.training.micro_batch, 1);
  EXPECT_EQ(s.training.micro_batches, 1);
  EXPECT_EQ(s.training.recompute, Recompute::Full);
  EXPECT_TRUE(s.training.documents.empty());
  const ParallelSpec p;  // the struct defaults are the documented defaults
  EXPECT_EQ(s.parallel.tp, p.tp);
  EXPECT_EQ(s.parallel.cp, p.cp);
  EXPECT_EQ(s.parallel.order, p.order);
  EXPECT_EQ(s.parallel.zero_stage, p.zero_stage);
  EXPECT_DOUBLE_EQ(s.parallel.dp_bucket_bytes, 0);  // Megatron's default size
  EXPECT_FALSE(s.parallel.overlap_grad_reduce);
  EXPECT_FALSE(s.parallel.overlap_param_gather);
  EXPECT_TRUE(s.parallel.grad_reduce_fp32);
  EXPECT_EQ(s.parallel.attention.scheme, AttentionScheme::Ring);
  EXPECT_EQ(s.parallel.attention.layout, Layout::ZigZag);
  EXPECT_TRUE(s.parallel.attention.replicate_kv_heads);
  EXPECT_EQ(s.parallel.linear, LinearScheme::StateAllGather);
  EXPECT_EQ(s.simulation.engine, EngineKind::SimGrid);
  EXPECT_EQ(s.simulation.scope, Scope::Step);
  EXPECT_EQ(s.simulation.seed, 1u);
  EXPECT_EQ(s.cost.profile, "auto");
  EXPECT_TRUE(s.perturb.gpu_slowdown.empty());
  EXPECT_DOUBLE_EQ(s.perturb.interference, -1);  // platform default
}

TEST(Scenario, PlatformAndModelByPathWithInheritance) {
  const Scenario s = load_scenario(kData + "uses-custom.yaml");
  EXPECT_EQ(s.platform.name, "custom-h100");
  EXPECT_EQ(s.platform.file, kData + "custom-platform.yaml");
  EXPECT_EQ(s.platform.nodes, 2);
  EXPECT_EQ(s.platform.total_gpus(), 16);
  EXPECT_EQ(s.platform.gpu.name, "H100-SXM");          // from the h100-sxm preset
  EXPECT_DOUBLE_EQ(s.platform.gpu.memory_bytes, 94e9);  // amended by the file
  EXPECT_DOUBLE_EQ(s.platform.gpu.peak_flops, 989e12);
  EXPECT_DOUBLE_EQ(s.platform.nvlink.bw_Bps, 450e9);  // inherited from dgx-h100
  EXPECT_EQ(s.model.name, "llama3-8b");
  EXPECT_EQ(s.model.layers, 16);  // overridden
  EXPECT_EQ(s.model.hidden, 4096);
}

TEST(Scenario, InlinePlatformAndModel) {
  const Scenario s = load_scenario(kData + "inline.yaml");
  EXPECT_EQ(s.platform.name, "tiny");
  EXPECT_EQ(s.platform.file, kData + "inline.yaml");
  EXPECT_EQ(s.platform.total_gpus(), 4);
  EXPECT_EQ(s.platform.nvlink_domain_gpus, 4);  // defaults to gpus_per_node
  EXPECT_EQ(s.platform.gpu.name, "toy");
  EXPECT_DOUBLE_EQ(s.platform.gpu.gemm_flops, 100e12);  // defaults to peak
  EXPECT_DOUBLE_EQ(s.platform.nvlink.efficiency, 1.0);
  EXPECT_EQ(s.model.name, "toy-model");
  EXPECT_EQ(s.model.heads_kv, 8);   // defaults to heads_q
  EXPECT_EQ(s.model.head_dim, 128);  // hidden / heads_q
  EXPECT_EQ(s.parallel.attention.scheme, AttentionScheme::AllGather);
}

TEST(Scenario, PlatformMappingDeepMerge) {
  const Scenario s = parse_scenario(
      "platform: {preset: h100-cluster, nodes: 4, network: {spines: 16}}\nmodel: llama3-70b\n"
      "training: {seq_len: 128K}\nparallel: {tp: 8, cp: 4}\n",
      "s.yaml");
  EXPECT_EQ(s.platform.name, "h100-cluster");
  EXPECT_EQ(s.platform.nodes, 4);
  EXPECT_EQ(s.platform.spines, 16);
  EXPECT_EQ(s.platform.nics_per_node, 8);  // the rest of network: kept
  EXPECT_DOUBLE_EQ(s.platform.nic.bw_Bps, 50e9);
}

TEST(Scenario, DocumentDistribution) {
  const Scenario s = parse_scenario(
      "platform: dgx-h100\nmodel: llama3-8b\n"
      "training: {seq_len: 128K, documents: {distribution: lognormal, mean: 8K, seed: 3}}\n",
      "s.yaml");
  EXPECT_EQ(s.training.doc_distribution, "lognormal");
  EXPECT_EQ(s.training.doc_mean_tokens, 8192);
  EXPECT_EQ(s.training.doc_seed, 3u);
  EXPECT_TRUE(s.training.documents.empty());
}

TEST(Scenario, UspAndReplicatedKvHeads) {
  const Scenario s = parse_scenario(
      "platform: {preset: h100-cluster}\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"
      "parallel: {cp: 16, attention: {scheme: usp, ulysses_degree: 8, ulysses_placement: intra-node}}\n",
      "s.yaml");
  EXPECT_EQ(s.parallel.attention.scheme, AttentionScheme::Usp);
  EXPECT_EQ(s.parallel.attention.ulysses_degree, 8);
  // 4 KV heads over a Ulysses degree of 8: replicated (the default), so no error.
  EXPECT_TRUE(s.parallel.attention.replicate_kv_heads);
}

TEST(Scenario, EnumSpellingsAreForgiving) {
  const Scenario s = parse_scenario(
      "platform: dgx-h100\nmodel: llama3-8b\ntraining: {seq_len: 32K}\n"
      "parallel: {cp: 8, attention: {scheme: Double_Ring, layout: striped, stripe_width: 16}, "
      "linear_attention: {scheme: state_allgather}}\nsimulation: {scope: attention_layer}\n",
      "s.yaml");
  EXPECT_EQ(s.parallel.attention.scheme, AttentionScheme::DoubleRing);
  EXPECT_EQ(s.parallel.attention.layout, Layout::Striped);
  EXPECT_EQ(s.parallel.linear, LinearScheme::StateAllGather);
  EXPECT_EQ(s.simulation.scope, Scope::AttentionLayer);
}

TEST(Scenario, OrderAsList) {
  const Scenario s = parse_scenario(
      "platform: dgx-h100\nmodel: llama3-8b\ntraining: {seq_len: 32K}\nparallel: {order: [dp, pp, cp, tp]}\n",
      "s.yaml");
  EXPECT_EQ(s.parallel.order, (std::vector<std::string>{"dp", "pp", "cp", "tp"}));
}

TEST(Scenario, ProfileByNameOrPath) {
  // A CSV path relative to the scenario file.
  const Scenario s = parse_scenario(
      "platform: dgx-h100\nmodel: llama3-8b\ntraining: {seq_len: 32K}\ncost: {profile: data/profile.csv}\n",
      std::string(CPSIM_SOURCE_DIR) + "/tests/scenario/s.yaml");
  EXPECT_EQ(s.cost.profile, kData + "profile.csv");
  EXPECT_THROW(parse_scenario("platform: dgx-h100\nmodel: llama3-8b\ntraining: {seq_len: 32K}\n"
                              "cost: {profile: no-such-profile}\n",
                              "s.yaml"),
               InputError);
}

TEST(Scenario, DataDirFromEnvironment) {
  const std::string before = data_dir();
  EXPECT_EQ(before, CPSIM_SOURCE_DIR);
  setenv("CPSIM_DATA_DIR", "/somewhere/else", 1);
  EXPECT_EQ(data_dir(), "/somewhere/else");
  unsetenv("CPSIM_DATA_DIR");
  EXPECT_EQ(data_dir(), before);
}

}  // namespace CPSIM_TEST_TU
