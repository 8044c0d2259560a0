#pragma once
/// Mixture-of-experts and multi-head latent attention accounting: parameter counts (total and
/// active), expert placement over the expert-parallel group, and the seeded routing that decides
/// how many tokens each expert receives. No SimGrid, no graph.
#include <cstdint>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::model {

/// Whether layer `i` has a routed-expert MLP (experts > 0 and past first_dense_layers).
bool is_moe_layer(const scenario::ModelSpec& m, int i);
int count_moe_layers(const scenario::ModelSpec& m);

/// One routed expert: SwiGLU, 3 x hidden x expert_ffn_hidden.
double routed_expert_params(const scenario::ModelSpec& m);
/// The shared experts of one MoE layer together: 3 x hidden x shared_experts x shared width.
double shared_experts_params(const scenario::ModelSpec& m);
/// The router of one MoE layer: hidden x experts.
double router_params(const scenario::ModelSpec& m);

/// The MLP of layer i, all parameters (dense MLP, or router + shared + every routed expert).
double layer_ffn_params(const scenario::ModelSpec& m, int i);
/// The part of layer i's MLP replicated over data parallelism like dense weights: the dense MLP,
/// or router + shared experts.
double layer_ffn_replicated_params(const scenario::ModelSpec& m, int i);
/// Layer i's routed-expert parameters (0 for a dense layer): sharded over EP, replicated over
/// expert DP.
double layer_expert_params(const scenario::ModelSpec& m, int i);
/// The parameters one token uses in layer i's MLP: dense MLP, or router + shared + top_k experts.
double layer_ffn_active_params(const scenario::ModelSpec& m, int i);

/// Attention projections of a full-attention layer. GQA: [Q (+gate), K, V] and O. MLA (DeepSeek-
/// V3): Q down (hidden x q_lora) + Q up (q_lora x H (nope + rope)), KV down (hidden x (kv_lora +
/// rope)) + KV up (kv_lora x H (nope + v)), their two RMSNorms, and O (H v x hidden).
double attention_in_proj_params(const scenario::ModelSpec& m);
double attention_out_proj_params(const scenario::ModelSpec& m);

/// Sum over layers (attention + MLP) and embeddings: what one token touches (top_k experts).
double active_params(const scenario::ModelSpec& m);

/// Expert placement of one MoE layer over an EP group of `ep` ranks.
struct ExpertLoad {
  /// tokens each expert receives from the whole EP group (after capacity drops), expert order
  std::vector<double> tokens;
  /// per EP rank: the tokens its local experts receive (experts e with e / (E/ep) == rank)
  std::vector<double> rank_tokens;
  double dropped = 0;        ///< tokens x k assignments dropped by the capacity factor
  double max_rank_tokens() const;
};

/// Routing of `group_tokens` tokens (the whole EP group's, each to top_k experts) over the
/// experts of layer `layer`, micro-batch `mb`. router_skew = 0: every expert receives
/// group_tokens x top_k / experts. router_skew = s > 0: expert popularity w_e = exp(s N(0,1)),
/// drawn from a generator seeded by (seed, layer, mb), so tokens_e = group_tokens x top_k x
/// w_e / sum w; same seed, same draw. capacity_factor c > 0 caps an expert at c x the uniform
/// share (Switch Transformer / GShard capacity) and drops the rest.
ExpertLoad route_tokens(const scenario::ModelSpec& m, double group_tokens, int ep, uint64_t seed,
                        int layer, int mb);

/// Expert-parallel group of one rank: the TP x CP x DP ranks (TP only when expert_tp = 1) of a
/// pipeline stage numbered as Megatron does (tp fastest, then cp, then dp), cut into
/// consecutive blocks of ep. Returns the block index (the expert-DP coordinate) and this rank's
/// index in the block.
struct EpCoord {
  int group = 0;   ///< which EP group (= expert data-parallel index)
  int index = 0;   ///< position inside it (owns experts index*E/ep ... (index+1)*E/ep - 1)
};
EpCoord ep_coord(const scenario::ParallelSpec& p, int tp_i, int cp_i, int dp_i);
/// Expert data-parallel degree: tp*cp*dp / (ep * expert_tp).
int expert_dp(const scenario::ParallelSpec& p);

}  // namespace cpsim::model
