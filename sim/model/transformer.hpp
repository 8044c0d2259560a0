#pragma once
/// Pure accounting for a transformer on a device mesh: parameter counts, FLOPs, bytes that the
/// lesson's figures are made of, and per-rank memory. No SimGrid, no graph.
#include <cstdint>
#include <string>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::model {

inline constexpr double kBf16Bytes = 2;
inline constexpr double kFp32Bytes = 4;

/// Parameters of one layer kind, and of the whole model.
double full_attention_layer_params(const scenario::ModelSpec& m);
double linear_attention_layer_params(const scenario::ModelSpec& m);
double mlp_params(const scenario::ModelSpec& m);
double embedding_params(const scenario::ModelSpec& m);   ///< input + output (if untied)
/// Sum over layers and embeddings, as the text stack computes.
double text_stack_params(const scenario::ModelSpec& m);
/// total_params if given (e.g. the anchor's 27,781,427,952), else text_stack_params.
double total_params(const scenario::ModelSpec& m);

/// Layer kind of layer `i` from the repeating pattern.
scenario::LayerKind layer_kind(const scenario::ModelSpec& m, int i);
int count_layers(const scenario::ModelSpec& m, scenario::LayerKind kind);

/// Bytes of one K,V block: 2 (K and V) x tokens x kv_heads x head_dim x 2 B.
double kv_block_bytes(int64_t tokens, int heads_kv, int head_dim, double elem_bytes = kBf16Bytes);
/// Numbers in one linear-attention layer's recurrent state: heads_v x key_dim x value_dim.
double linear_state_numbers(const scenario::ModelSpec& m);

/// Ulysses bytes leaving one GPU per layer forward, the lesson's accounting: every tensor's
/// (N-1)/N of Q, K, V, O at L = s/N tokens, KV heads not replicated.
struct UlyssesBytes {
  double q = 0, k = 0, v = 0, o = 0;
  double total() const { return q + k + v + o; }
};
UlyssesBytes ulysses_bytes_lesson(const scenario::ModelSpec& m, int64_t seq_len, int degree);
/// What the schedule really moves when heads_kv < degree and KV heads are replicated: every GPU
/// receives (N-1) x L tokens of the KV head its query heads need, for K and for V.
UlyssesBytes ulysses_bytes_replicated(const scenario::ModelSpec& m, int64_t seq_len, int degree);

/// Activation memory (Korthikanti et al. 2022, bytes, BF16).
/// Per layer without recomputation: 34 s b h + 5 a s^2 b (the s^2 term dropped with FlashAttention).
double activation_bytes_per_layer(int64_t s, int b, int h, int heads, bool flash_attention);
/// Scores of one head of one layer materialised: s x s x 2 B.
double scores_bytes_one_head(int64_t s);
/// Full recomputation keeps each layer's input only: 2 s b h per layer.
double full_recompute_bytes(int64_t s, int b, int h, int layers);

/// Activation bytes one rank keeps for `layers` layers of its stage with `in_flight`
/// micro-batches alive, under sc's recomputation: tokens split by CP (and by TP under SP), FP8's
/// smaller saved GEMM inputs. Full recomputation, uniform over groups of N layers: each group's
/// input per micro-batch, plus one group's full activations while it is recomputed; block of N:
/// the first N layers' inputs, the other layers' full activations, plus one layer being
/// recomputed. torchtitan's selective policies (model/activation_checkpoint.hpp): op, each
/// block's saved op outputs plus one block's rest while it is recomputed; layer every N, as
/// block with every Nth layer checkpointed.
double stage_activation_bytes(const scenario::Scenario& sc, int layers, int in_flight);
/// The share of stage_activation_bytes(sc, layers, ...) that only a block's backward holds:
/// the activations of the block (uniform: the group of N) being recomputed, 0 when the stage
/// recomputes none. The loss's moment, before any recomputation, holds the rest only.
double recomputing_activation_bytes(const scenario::Scenario& sc, int layers);
/// Whether the backward recomputes `layer`'s forward: every layer under full uniform
/// recomputation, the first recompute_layers of each model chunk (pp x virtual_stages chunks
/// of consecutive layers) under block, every Nth block of a chunk under torchtitan's layer policy.
bool layer_recomputed(const scenario::Scenario& sc, int layer);

/// Mixed-precision Adam model states: 16 B/param (2 weights + 2 grads + 12 optimizer).
double model_state_bytes(double params);

/// Ring all-reduce bytes sent per GPU: 2 (N-1)/N x S.
double ring_allreduce_bytes_per_gpu(double bytes, int n);

/// TP all-reduce bytes per GPU per `tokens` tokens: 4 all-reduces of tokens x h x 2 B per layer.
double tp_bytes_per_gpu(const scenario::ModelSpec& m, int64_t tokens, int t);

/// Model FLOPs of one training step (forward + backward = 3x forward, no recomputation), for
/// `sequences` sequences of `seq_len` tokens, causal attention under `pairs_per_seq` pairs.
double model_flops_per_step(const scenario::ModelSpec& m, int64_t seq_len, double sequences,
                            double pairs_per_seq);

/// Per-rank memory, with the terms named so an OOM verdict can list the largest. A term is
/// what its tensors hold; finish_memory_estimate adds what PyTorch's caching allocator makes of
/// them (model/allocator.hpp): `allocated` as torch.cuda.memory_allocated counts it, `reserved`
/// as memory_reserved does. Terms outside the allocator (CUDA context, NCCL) count in both.
struct MemoryTerm {
  std::string name;
  double bytes = 0;
  double tensor_bytes = 0;         ///< one of its allocations; 0 = a single allocation of `bytes`
  std::string source{};            ///< the policy, key or default that produced it
  bool outside_allocator = false;  ///< not in memory_reserved (CUDA context, NCCL buffers)
  double allocated = 0;            ///< filled by finish_memory_estimate
  double reserved = 0;             ///< filled by finish_memory_estimate
};
struct MemoryEstimate {
  std::vector<MemoryTerm> terms;
  double allocated_bytes = 0;  ///< sum of the allocated column (max_memory_allocated + outside)
  double peak_bytes = 0;       ///< sum of the reserved column: what must fit in HBM
  double capacity_bytes = 0;
  bool fits = true;
  std::string verdict;  ///< "fits: 61.2 of 80.0 GB" or "OOM: 93.1 of 80.0 GB; largest: ..."
};
MemoryEstimate estimate_memory(const scenario::Scenario& sc);
/// Context-parallel buffers of the live layer for one sequence (K,V receive buffers and
/// accumulators, the gathered K,V, or the Ulysses head-split tensors), bytes.
double cp_buffer_bytes(const scenario::Scenario& sc);
/// Adds the fixed terms (CUDA context, NCCL buffers, cuBLAS workspaces), prices every term
/// through the caching allocator and adds its fragmentation (model/allocator.hpp), sums the
/// reserved peak, fills capacity, fits and the verdict naming the two largest terms. Terms
/// already priced (an estimate finished once and split by rank class) are summed again only.
void finish_memory_estimate(MemoryEstimate& est, const scenario::Scenario& sc);
/// The terms every GPU holds beside the model's tensors: the cuBLAS workspaces, the CUDA
/// context and NCCL's buffers for the layout's communicators (model/allocator.hpp).
void add_fixed_memory_terms(MemoryEstimate& est, const scenario::Scenario& sc);
/// The allocator's fragmentation row finish_memory_estimate adds (reserved only).
inline constexpr const char* kFragmentationTerm = "allocator: free blocks in cached segments";
/// The cuBLAS workspaces row add_fixed_memory_terms adds.
inline constexpr const char* kCublasTerm = "cuBLAS workspaces";

// ---- Forward-only prefill and the chunked loss (memory_modes.cpp) ----

/// Tokens per chunk of the chunked loss: Liger-Kernel's fused linear cross-entropy picks
/// next_pow2(ceil(BT / ceil(V / H))) so that one chunk of logits is about the size of the
/// hidden states (src/liger_kernel/ops/fused_linear_cross_entropy.py), with V the vocabulary
/// shard of a TP rank and BT the rank's tokens per micro-batch; at most BT.
double loss_chunk_tokens(const scenario::Scenario& sc);

/// KV cache one rank holds after the prefill, bytes: per softmax layer of its pipeline stage
/// the K,V of its own tokens (a sliding layer at most its window), per linear-attention layer
/// the fp32 recurrent state of its heads and the short convolution's last width - 1 inputs.
struct KvCache {
  double full_bytes = 0;     ///< softmax layers with a causal or full mask
  double sliding_bytes = 0;  ///< sliding-window layers
  double linear_bytes = 0;   ///< linear-attention states
  double total() const { return full_bytes + sliding_bytes + linear_bytes; }
};
KvCache kv_cache_per_rank(const scenario::Scenario& sc);

/// Prefill memory: bf16 weights (TP x PP split, no gradients, no optimizer), the KV cache, the
/// working set of the one layer being computed and the last token's logits.
MemoryEstimate estimate_prefill_memory(const scenario::Scenario& sc);
/// One attention layer alone, what scope attention-layer simulates: the core attention's
/// inputs, output and (training) gradients on one GPU, its CP buffers and the CUDA context;
/// no weights, optimizer states or other layers' activations.
MemoryEstimate attention_layer_memory(const scenario::Scenario& sc);

}  // namespace cpsim::model
