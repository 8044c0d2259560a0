#pragma once
// Synthetic platforms and cost models for tests whose expected numbers follow from mechanisms.
#include <algorithm>
#include <string>

#include "model/cost_model.hpp"
#include "scenario/specs.hpp"

namespace cpsim::fixtures {

/// One NVSwitch node of `gpus` GPUs with the given per-direction link bandwidth and latency.
inline scenario::PlatformSpec nvswitch_node(int gpus, double bw_Bps, double latency_s) {
  scenario::PlatformSpec p;
  p.name = "synthetic";
  p.gpu = {"synthetic-gpu", 1e15, 8e14, 3e12, 80e9};
  p.nodes = 1;
  p.gpus_per_node = gpus;
  p.nvlink_domain_gpus = gpus;
  p.intra = scenario::IntraFabric::NVSwitch;
  p.nvlink = {bw_Bps, latency_s, 1.0};
  p.nccl.p2p_max_Bps = 0;
  p.nccl.p2p_latency_s = 0;
  return p;
}

/// The lesson's anchor model (SPEC.md, "Qwen3.8-27B"): 64 layers, 3 linear-attention then 1
/// full-attention layer repeated, GQA 24 / 4 heads of 256, total 27,781,427,952 parameters.
inline scenario::ModelSpec anchor_model() {
  scenario::ModelSpec m;
  m.name = "anchor";
  m.layers = 64;
  m.hidden = 5120;
  m.heads_q = 24;
  m.heads_kv = 4;
  m.head_dim = 256;
  m.ffn_hidden = 17408;
  m.vocab = 248320;
  m.pattern = {scenario::LayerKind::LinearAttention, scenario::LayerKind::LinearAttention,
               scenario::LayerKind::LinearAttention, scenario::LayerKind::FullAttention};
  m.linear_heads_v = 48;
  m.linear_heads_k = 16;
  m.linear_key_dim = 128;
  m.linear_value_dim = 128;
  m.linear_conv_width = 4;
  m.total_params = 27781427952;
  return m;
}

/// Llama-3 70B's shape (Meta's config.json): 80 layers, hidden 8192, GQA 64 / 8 heads of 128,
/// SwiGLU 28672, vocabulary 128256.
inline scenario::ModelSpec llama3_70b_model() {
  scenario::ModelSpec m;
  m.name = "llama3-70b";
  m.layers = 80;
  m.hidden = 8192;
  m.heads_q = 64;
  m.heads_kv = 8;
  m.head_dim = 128;
  m.ffn_hidden = 28672;
  m.vocab = 128256;
  return m;
}

/// Attention costs `seconds_per_pair` x pairs x heads; everything else is free. Makes ring
/// times directly comparable with the lesson's pair counts.
class PerPairCost : public model::CostModel {
 public:
  explicit PerPairCost(double seconds_per_pair) : c_(seconds_per_pair) {}
  model::Cost attention(const model::AttentionCall& a) const override {
    const double pairs = static_cast<double>(a.q_len) * static_cast<double>(a.kv_len) *
                         a.unmasked_fraction * a.batch;
    model::Cost c;
    c.flops = 4.0 * pairs * a.heads_q * a.head_dim * (a.backward ? 2.5 : 1.0);
    c.time_s = c_ * pairs * std::max(1, a.heads_q) * (a.backward ? 2.5 : 1.0);
    return c;
  }
  using model::CostModel::gemm;
  model::Cost gemm(const model::GemmCall&) const override { return {}; }
  model::Cost memory_kernels(const std::vector<model::MemKernel>&) const override { return {}; }
  model::Cost linear_attention(int64_t, int, int, int, int, bool) const override { return {}; }
  std::string describe() const override { return "per-pair test cost"; }

 private:
  double c_;
};

}  // namespace cpsim::fixtures
