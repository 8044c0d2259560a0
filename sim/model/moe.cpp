#include "model/moe.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model/transformer.hpp"

namespace cpsim::model {

using scenario::LayerKind;
using scenario::ModelSpec;

bool is_moe_layer(const ModelSpec& m, int i) {
  return m.moe.experts > 0 && i >= m.moe.first_dense_layers;
}

int count_moe_layers(const ModelSpec& m) {
  int n = 0;
  for (int i = 0; i < m.layers; ++i) n += is_moe_layer(m, i);
  return n;
}

double routed_expert_params(const ModelSpec& m) {
  return 3.0 * m.hidden * static_cast<double>(m.moe.expert_ffn_hidden);
}

double shared_experts_params(const ModelSpec& m) {
  const double width = m.moe.shared_expert_ffn_hidden > 0 ? m.moe.shared_expert_ffn_hidden
                                                          : m.moe.expert_ffn_hidden;
  return 3.0 * m.hidden * m.moe.shared_experts * width;
}

double router_params(const ModelSpec& m) { return static_cast<double>(m.hidden) * m.moe.experts; }

double layer_ffn_params(const ModelSpec& m, int i) {
  return layer_ffn_replicated_params(m, i) + layer_expert_params(m, i);
}

double layer_ffn_replicated_params(const ModelSpec& m, int i) {
  if (!is_moe_layer(m, i)) return mlp_params(m);
  return router_params(m) + shared_experts_params(m);
}

double layer_expert_params(const ModelSpec& m, int i) {
  return is_moe_layer(m, i) ? m.moe.experts * routed_expert_params(m) : 0.0;
}

double layer_ffn_active_params(const ModelSpec& m, int i) {
  if (!is_moe_layer(m, i)) return mlp_params(m);
  return router_params(m) + shared_experts_params(m) + m.moe.top_k * routed_expert_params(m);
}

double attention_in_proj_params(const ModelSpec& m) {
  const double h = m.hidden;
  if (m.mla) {
    const auto& a = m.mla_dims;
    const double heads = m.heads_q;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    const double q = a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * heads * qk
                                       : h * heads * qk;
    const double kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
                      a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim);
    return q + kv;
  }
  const double d = m.head_dim;
  const double q_out = m.heads_q * d * (m.attention_output_gate ? 2.0 : 1.0);
  return h * (q_out + 2.0 * m.heads_kv * d);
}

double attention_out_proj_params(const ModelSpec& m) {
  const double v = m.mla ? m.mla_dims.v_head_dim : m.head_dim;
  return m.heads_q * v * static_cast<double>(m.hidden);
}

double active_params(const ModelSpec& m) {
  double p = embedding_params(m) + m.hidden;
  for (int i = 0; i < m.layers; ++i) {
    p += layer_ffn_active_params(m, i);
    p += layer_kind(m, i) == LayerKind::FullAttention ? full_attention_layer_params(m)
                                                       : linear_attention_layer_params(m);
  }
  return p;
}

double ExpertLoad::max_rank_tokens() const {
  return rank_tokens.empty() ? 0.0 : *std::max_element(rank_tokens.begin(), rank_tokens.end());
}

ExpertLoad route_tokens(const ModelSpec& m, double group_tokens, int ep, uint64_t seed, int layer,
                        int mb) {
  const int experts = m.moe.experts;
  ExpertLoad load;
  load.tokens.assign(static_cast<size_t>(experts), 0.0);
  const double assignments = group_tokens * m.moe.top_k;
  std::vector<double> w(static_cast<size_t>(experts), 1.0);
  if (m.moe.router_skew > 0) {
    // One generator per (seed, layer, micro-batch), mixed with SplitMix64-style odd constants,
    // so a layer's draw does not depend on how many other layers were built before it.
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(layer) + 1) * 0xBF58476D1CE4E5B9ull ^
                        (static_cast<uint64_t>(mb) + 1) * 0x94D049BB133111EBull);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (auto& x : w) x = std::exp(m.moe.router_skew * normal(rng));
  }
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  const double uniform = assignments / experts;
  const double cap = m.moe.capacity_factor > 0 ? m.moe.capacity_factor * uniform : 0.0;
  for (int e = 0; e < experts; ++e) {
    double t = assignments * w[static_cast<size_t>(e)] / sum;
    if (cap > 0 && t > cap) {
      load.dropped += t - cap;
      t = cap;
    }
    load.tokens[static_cast<size_t>(e)] = t;
  }
  const int per_rank = experts / std::max(1, ep);
  load.rank_tokens.assign(static_cast<size_t>(std::max(1, ep)), 0.0);
  for (int e = 0; e < experts; ++e)
    load.rank_tokens[static_cast<size_t>(std::min(ep - 1, e / std::max(1, per_rank)))] +=
        load.tokens[static_cast<size_t>(e)];
  return load;
}

EpCoord ep_coord(const scenario::ParallelSpec& p, int tp_i, int cp_i, int dp_i) {
  const bool carve_tp = p.expert_tp == 1;
  const int64_t f = carve_tp ? tp_i + static_cast<int64_t>(p.tp) * (cp_i + static_cast<int64_t>(p.cp) * dp_i)
                             : cp_i + static_cast<int64_t>(p.cp) * dp_i;
  EpCoord c;
  c.group = static_cast<int>(f / p.ep);
  c.index = static_cast<int>(f % p.ep);
  return c;
}

int expert_dp(const scenario::ParallelSpec& p) {
  return static_cast<int>(static_cast<int64_t>(p.tp) * p.cp * p.dp / (static_cast<int64_t>(p.ep) * p.expert_tp));
}

}  // namespace cpsim::model
