#pragma once
/// torchtitan's activation checkpointing policies (torchtitan/distributed/activation_checkpoint.py)
/// beside Megatron's: which layers a backward recomputes, and how much the op policy saves.
/// No SimGrid.
#include "scenario/specs.hpp"

namespace cpsim::model {

/// Whether `layer` runs under torchtitan's op policy (selective_ac_option "op"): every block.
bool layer_op_sac(const scenario::Scenario& sc, int layer);

/// Bytes one block keeps per micro-batch on one rank under the op policy: the block's input,
/// the outputs of the mm ops it must save (the 1st, 3rd, 5th and 7th of wq, wk, wv, wo, w1, w3,
/// w2: wq, wv, w1, w2), SDPA's output and fp32 log-sum-exp, and with TP the two
/// reduce-scatter outputs. Under TP, w2's output is the partial sum over the whole sequence
/// before its reduce-scatter.
double op_sac_layer_bytes(const scenario::Scenario& sc);

/// Fraction of the model's layers whose forward the backward reruns whole
/// (layer_recomputed), per model chunk as the stages hold them.
double recomputed_fraction(const scenario::Scenario& sc);

/// Whether `layer`'s backward reruns its core attention's forward: Megatron's selective
/// recomputation (--recompute-granularity selective; megatron/core/transformer/attention.py
/// _checkpointed_attention_forward wraps core_attention(query, key, value, ...) in
/// tensor_parallel.checkpoint), in softmax-attention layers. Only the attention kernel (TE's
/// DotProductAttention, with its CP exchange) runs again; the QKV and output projections do not.
bool core_attention_recomputed(const scenario::Scenario& sc, int layer);

}  // namespace cpsim::model
