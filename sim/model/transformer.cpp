#include "model/transformer.hpp"
#include "model/memory_verdict.hpp"

#include "model/unfused_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/activation_checkpoint.hpp"
#include "model/allocator.hpp"
#include "model/backward_peak.hpp"
#include "model/data_parallel.hpp"
#include "model/moe.hpp"
#include "scenario/enum_names.hpp"

namespace cpsim::model {

using scenario::LayerKind;
using scenario::ModelSpec;

double full_attention_layer_params(const ModelSpec& m) {
  // GQA or MLA projections (moe.cpp) + two RMSNorm weights (attention, MLP)
  return attention_in_proj_params(m) + attention_out_proj_params(m) + 2.0 * m.hidden;
}

double linear_attention_layer_params(const ModelSpec& m) {
  // Gated DeltaNet: q, k (key heads), v, output gate z (value heads), beta and decay a (one per
  // value head), a depthwise short convolution over q, k, v, per-head decay parameters, the
  // output norm and the output projection.
  const double h = m.hidden;
  const double qk = 2.0 * m.linear_heads_k * m.linear_key_dim;
  const double vz = 2.0 * m.linear_heads_v * m.linear_value_dim;
  const double in_proj = h * (qk + vz + 2.0 * m.linear_heads_v);
  const double conv = (qk + m.linear_heads_v * m.linear_value_dim) * m.linear_conv_width;
  const double out_proj = m.linear_heads_v * m.linear_value_dim * h;
  return in_proj + conv + 2.0 * m.linear_heads_v + m.linear_value_dim + out_proj + 2.0 * h;
}

double mlp_params(const ModelSpec& m) { return 3.0 * m.hidden * m.ffn_hidden; }

double embedding_params(const ModelSpec& m) {
  return static_cast<double>(m.vocab) * m.hidden * (m.tied_embeddings ? 1.0 : 2.0);
}

LayerKind layer_kind(const ModelSpec& m, int i) {
  if (m.pattern.empty()) return LayerKind::FullAttention;
  return m.pattern[static_cast<size_t>(i) % m.pattern.size()];
}

int count_layers(const ModelSpec& m, LayerKind kind) {
  int n = 0;
  for (int i = 0; i < m.layers; ++i) n += layer_kind(m, i) == kind;
  return n;
}

double text_stack_params(const ModelSpec& m) {
  double p = embedding_params(m) + m.hidden;  // + final norm
  for (int i = 0; i < m.layers; ++i) {
    p += layer_ffn_params(m, i);  // dense MLP, or router + shared + all routed experts
    p += layer_kind(m, i) == LayerKind::FullAttention ? full_attention_layer_params(m)
                                                       : linear_attention_layer_params(m);
  }
  return p;
}

double total_params(const ModelSpec& m) {
  return m.total_params > 0 ? m.total_params : text_stack_params(m);
}

double kv_block_bytes(int64_t tokens, int heads_kv, int head_dim, double elem_bytes) {
  return 2.0 * static_cast<double>(tokens) * heads_kv * head_dim * elem_bytes;
}

double linear_state_numbers(const ModelSpec& m) {
  return static_cast<double>(m.linear_heads_v) * m.linear_key_dim * m.linear_value_dim;
}

UlyssesBytes ulysses_bytes_lesson(const ModelSpec& m, int64_t seq_len, int degree) {
  const double l = static_cast<double>(seq_len) / degree;
  const double leave = static_cast<double>(degree - 1) / degree;
  UlyssesBytes b;
  b.q = leave * l * m.heads_q * m.head_dim * kBf16Bytes;
  b.k = leave * l * m.heads_kv * m.head_dim * kBf16Bytes;
  b.v = b.k;
  b.o = b.q;
  return b;
}

UlyssesBytes ulysses_bytes_replicated(const ModelSpec& m, int64_t seq_len, int degree) {
  UlyssesBytes b = ulysses_bytes_lesson(m, seq_len, degree);
  if (m.heads_kv < degree) {
    // Each GPU needs one KV head for all s tokens; it has L of them and receives (N-1) x L.
    const double l = static_cast<double>(seq_len) / degree;
    b.k = (degree - 1) * l * m.head_dim * kBf16Bytes;
    b.v = b.k;
  }
  return b;
}

double activation_bytes_per_layer(int64_t s, int b, int h, int heads, bool flash_attention) {
  const double sd = static_cast<double>(s);
  double bytes = 34.0 * sd * b * h;
  if (!flash_attention) bytes += 5.0 * heads * sd * sd * b;
  return bytes;
}

double scores_bytes_one_head(int64_t s) {
  return static_cast<double>(s) * static_cast<double>(s) * kBf16Bytes;
}

double full_recompute_bytes(int64_t s, int b, int h, int layers) {
  return 2.0 * static_cast<double>(s) * b * h * layers;
}

namespace {
/// One layer's full activations per micro-batch on one rank: tokens split by CP, and by TP
/// under SP.
double full_layer_activation_bytes(const scenario::Scenario& sc) {
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  const int64_t s_local = tr.seq_len / p.cp;
  const double sp_div = p.sequence_parallel ? p.tp : 1.0;
  // FP8: TE saves the inputs of the QKV, output, FC1 and FC2 GEMMs for the backward in FP8:
  // 2 + 2 + 2 + 8 of Korthikanti's 34 s b h bytes halve (34 -> 27).
  const double fp8_act = tr.fp8 ? 27.0 / 34.0 : 1.0;
  return activation_bytes_per_layer(s_local, tr.micro_batch, m.hidden, m.heads_q, true) / sp_div * fp8_act;
}
}  // namespace

double stage_activation_bytes(const scenario::Scenario& sc, int layers, int in_flight) {
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  const int64_t s_local = tr.seq_len / p.cp;
  const double sp_div = p.sequence_parallel ? p.tp : 1.0;
  const double full_layer = full_layer_activation_bytes(sc);
  const double input = full_recompute_bytes(s_local, tr.micro_batch, m.hidden, 1) / sp_div;
  using SelectiveAc = scenario::TrainingSpec::SelectiveAc;
  if (tr.recompute == scenario::Recompute::Selective && layers > 0 && tr.selective_ac == SelectiveAc::Op) {
    // torchtitan's op policy: every block keeps what it must save; the block being recomputed
    // holds the rest of its activations again until its backward ends.
    const double saved = op_sac_layer_bytes(sc);
    return saved * layers * in_flight + std::max(0.0, full_layer - saved);
  }
  if (tr.recompute == scenario::Recompute::Selective && layers > 0 && tr.selective_ac == SelectiveAc::Layer) {
    // torchtitan's layer policy: every Nth block of the stage keeps its input only, the others
    // everything; plus one block being recomputed.
    const int k = layers / std::max(1, tr.selective_ac_every);
    return (input * k + full_layer * (layers - k)) * in_flight + (k > 0 ? full_layer : 0.0);
  }
  if (tr.recompute != scenario::Recompute::Full || layers <= 0) {
    // CPU offloading (pipeline parallelism refused with it, so the stage is the model): the
    // offloaded layers keep nothing on the GPU but the one in transit, whose copy to (in the
    // forward) or from (in the backward) host memory overlaps the next layer's compute.
    const int off = std::min(tr.offload_layers, layers);
    return full_layer * (layers - off + (off > 0 ? 1 : 0)) * in_flight;
  }
  const int n = std::max(1, tr.recompute_layers);
  if (tr.recompute_method == scenario::TrainingSpec::RecomputeMethod::Block) {
    const int k = std::min(n, layers);
    return (input * k + full_layer * (layers - k)) * in_flight + (k > 0 ? full_layer : 0.0);
  }
  const int groups = (layers + n - 1) / n;
  return input * groups * in_flight + full_layer * std::min(n, layers);
}

double recomputing_activation_bytes(const scenario::Scenario& sc, int layers) {
  const auto& tr = sc.training;
  if (layers <= 0) return 0;
  // The recomputed share of each policy of stage_activation_bytes.
  const double full_layer = full_layer_activation_bytes(sc);
  using SelectiveAc = scenario::TrainingSpec::SelectiveAc;
  if (tr.recompute == scenario::Recompute::Selective && tr.selective_ac == SelectiveAc::Op)
    return std::max(0.0, full_layer - op_sac_layer_bytes(sc));
  if (tr.recompute == scenario::Recompute::Selective && tr.selective_ac == SelectiveAc::Layer)
    return layers / std::max(1, tr.selective_ac_every) > 0 ? full_layer : 0.0;
  if (tr.recompute != scenario::Recompute::Full) return 0;
  const int n = std::max(1, tr.recompute_layers);
  if (tr.recompute_method == scenario::TrainingSpec::RecomputeMethod::Block) return full_layer;
  return full_layer * std::min(n, layers);
}

namespace {
/// `layer`'s index within its model chunk: chunk c holds layers [c L / chunks, (c + 1) L / chunks).
int64_t index_in_chunk(const scenario::Scenario& sc, int layer) {
  const int64_t layers = sc.model.layers;
  const int64_t chunks = static_cast<int64_t>(sc.parallel.pp) * std::max(1, sc.parallel.virtual_stages);
  int64_t c = std::min(chunks - 1, (static_cast<int64_t>(layer) * chunks) / std::max<int64_t>(1, layers));
  while (c > 0 && c * layers / chunks > layer) --c;
  while (c + 1 < chunks && (c + 1) * layers / chunks <= layer) ++c;
  return layer - c * layers / chunks;
}
}  // namespace

bool layer_recomputed(const scenario::Scenario& sc, int layer) {
  const auto& tr = sc.training;
  if (tr.recompute == scenario::Recompute::Selective &&
      tr.selective_ac == scenario::TrainingSpec::SelectiveAc::Layer) {
    // torchtitan counts the blocks it wraps from 1 and checkpoints those where
    // count % selective_ac_option == 0, per rank (its model chunks' blocks in order; a chunk's
    // own count here).
    return (index_in_chunk(sc, layer) + 1) % std::max(1, tr.selective_ac_every) == 0;
  }
  if (tr.recompute != scenario::Recompute::Full) return false;
  if (tr.recompute_method != scenario::TrainingSpec::RecomputeMethod::Block) return true;
  return index_in_chunk(sc, layer) < tr.recompute_layers;
}

double model_state_bytes(double params) { return 16.0 * params; }

double ring_allreduce_bytes_per_gpu(double bytes, int n) {
  return 2.0 * (n - 1) / n * bytes;
}

double tp_bytes_per_gpu(const ModelSpec& m, int64_t tokens, int t) {
  const double per_allreduce = static_cast<double>(tokens) * m.hidden * kBf16Bytes;
  return 4.0 * m.layers * ring_allreduce_bytes_per_gpu(per_allreduce, t);
}

double model_flops_per_step(const ModelSpec& m, int64_t seq_len, double sequences,
                            double pairs_per_seq) {
  // Matmul FLOPs: 2 per parameter per token in the layers and the LM head (the input embedding
  // is a lookup; a MoE layer counts the parameters a token uses: router, shared, top_k experts);
  // attention (MLA: head_dim is (qk + v) / 2, see specs.hpp): 4 x pairs x H_q x d per full-attention layer; linear attention:
  // the chunked delta rule's state products, ~ 4 x H_v x d_k x d_v per token (read and update).
  double matmul_params = 0;
  for (int i = 0; i < m.layers; ++i)
    matmul_params += layer_ffn_active_params(m, i) + (layer_kind(m, i) == LayerKind::FullAttention
                                          ? full_attention_layer_params(m)
                                          : linear_attention_layer_params(m));
  matmul_params += static_cast<double>(m.vocab) * m.hidden;
  const double tokens = static_cast<double>(seq_len) * sequences;
  double fwd = 2.0 * matmul_params * tokens;
  fwd += 4.0 * pairs_per_seq * sequences * m.heads_q * m.head_dim *
         count_layers(m, LayerKind::FullAttention);
  fwd += 4.0 * tokens * linear_state_numbers(m) * count_layers(m, LayerKind::LinearAttention);
  return 3.0 * fwd;
}

namespace {
std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  return buf;
}
}  // namespace

namespace {

/// FSDP2's unsharded copies (torchtitan): the bf16 weights gathered for compute and the
/// gradients of the block being reduce-scattered. Blocks that reshard after their forward keep
/// theirs only while computing: the block in use and the next one, whose all-gather FSDP2
/// prefetches (two blocks). Blocks that do not (every block under PP, the last one without)
/// stay gathered from their forward to their backward. The root module (embedding, final norm,
/// LM head) is gathered for the forward and, resharded or not, held again from the loss into
/// the backward's start, where the activations peak. A block's gradients exist unsharded in
/// bf16 (the compute dtype) and in the fp32 reduce dtype while its reduce-scatter runs.
void fsdp_gathered(const scenario::Scenario& sc, MemoryEstimate& est) {
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const int per_stage = (m.layers + p.pp - 1) / p.pp;
  double block = 0, kept = 0;
  int kept_blocks = 0;
  for (int l = 0; l < per_stage; ++l) {
    const double params =
        (layer_ffn_replicated_params(m, l) +
         (layer_kind(m, l) == scenario::LayerKind::FullAttention ? full_attention_layer_params(m)
                                                                  : linear_attention_layer_params(m))) /
            p.tp +
        layer_expert_params(m, l) / (static_cast<double>(p.ep) * p.expert_tp);
    block = std::max(block, params);
    if (!fsdp_reshards(p, l, m.layers)) {
      kept += params;
      ++kept_blocks;
    }
  }
  const double in_use = kept_blocks >= per_stage ? 0 : 2 * block;
  // FSDP2 all-gathers a block into one flat buffer (FSDPParamGroup's all-gather output) and
  // reduce-scatters from one: a block is one allocation of each kind.
  est.terms.push_back({"gathered weights (bf16, " + std::to_string(kept_blocks) +
                           (kept_blocks == 1 ? " block kept" : " blocks kept") +
                           (in_use > 0 ? " + 2 in use)" : ")"),
                       kBf16Bytes * (kept + in_use), kBf16Bytes * block, "FSDP2 reshard_after_forward"});
  est.terms.push_back({"gathered root (embedding, LM head; bf16)", kBf16Bytes * embedding_params(m) / p.tp,
                       kBf16Bytes * embedding_params(m) / p.tp / 2, "FSDP2 root module"});
  // The reduce-scatter's output shard (foreach_reduce's reduce_output, in the reduce dtype)
  // becomes the sharded gradient on the first micro-batch (counted with the shards); on later
  // ones it is added into it and lives beside the block's unsharded gradients.
  const double shard_group = static_cast<double>(p.dp_shard()) * p.cp;
  const bool accumulating = sc.training.micro_batches > 1;
  est.terms.push_back({std::string("unsharded block gradients (bf16 + fp32 reduce") +
                           (accumulating ? " + reduce-scatter output)" : ")"),
                       block * (kBf16Bytes + grad_reduce_bytes(p) * (1 + (accumulating ? 1 / shard_group : 0))),
                       block * kBf16Bytes, "FSDP2 reduce_dtype"});
}

}  // namespace

MemoryEstimate estimate_memory(const scenario::Scenario& sc) {
  if (sc.mode == scenario::Mode::Prefill) return estimate_prefill_memory(sc);
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  MemoryEstimate est;
  // Routed experts are sharded over EP x expert_tp and replicated over expert DP (Megatron);
  // everything else over TP and replicated over DP x CP.
  double expert_total = 0;
  for (int i = 0; i < m.layers; ++i) expert_total += layer_expert_params(m, i);
  const double params_rank = (total_params(m) - expert_total) / (p.tp * p.pp);
  const double expert_rank = expert_total / (static_cast<double>(p.ep) * p.expert_tp * p.pp);
  // Megatron (zero_stage 0-2): bf16 weights, gradients in the DDP buffer in the reduce dtype
  // (fp32 by default for bf16 training: 4 B), fp32 master weights + Adam m, v (12 B); the
  // distributed optimizer (stage 1) shards the 12 B, "6 + 12/d bytes per parameter" in
  // Megatron's docs/source/api-guide/dist_optimizer.md; stage 2 also shards the gradients.
  // CP ranks hold replicas of the same weights, so it shards over DP x CP; expert states over
  // expert DP. FSDP2 (stage 3, torchtitan): the sharded parameters are the fp32 master weights,
  // their gradients fp32 shards, Adam's m, v beside them (4 + 4 + 8 = 16 B over d), plus the
  // bf16 weights gathered for compute (fsdp_gathered below).
  const double gb = grad_reduce_bytes(p);
  auto states = [&](double dp, double params, double* w, double* g, double* o) {
    if (p.zero_stage >= 3) {
      *w += 4 * params / dp;
      *g += 4 * params / dp;
      *o += 8 * params / dp;
      return;
    }
    double gg = gb, oo = 12;
    if (p.zero_stage >= 1) oo /= dp;
    if (p.zero_stage >= 2) gg /= dp;
    *w += 2 * params;
    *g += gg * params;
    *o += oo * params;
  };
  double w = 0, g = 0, o = 0;
  // HSDP (parallel.dp_replicate) shards over its shard group only: dp / dp_replicate x cp.
  states(static_cast<double>(p.zero_stage >= 3 ? p.dp_shard() : p.dp) * p.cp, params_rank, &w, &g, &o);
  states(expert_dp(p), expert_rank, &w, &g, &o);
  const bool fsdp = p.zero_stage >= 3;
  // Allocations: a parameter tensor per weight matrix and norm (Megatron-TE's layer: fused
  // linear_qkv, linear_proj, linear_fc1, linear_fc2 and 2 norm weights; torchtitan's: wq, wk, wv,
  // wo, w1, w2, w3 and 2 norms), plus embedding and LM head. FSDP2 shards per parameter, Adam
  // keeps m and v per parameter (and Megatron's optimizer an fp32 master shard); Megatron's
  // DDP keeps all gradients in one contiguous buffer (param_and_grad_buffer.py), and its
  // distributed optimizer the bf16 weights too.
  const int layers_here = (m.layers + p.pp - 1) / p.pp;
  const double tensors = layers_here * (tr.stack == scenario::Stack::MegatronTe ? 6.0 : 9.0) + 2;
  const char* states_src = fsdp ? (p.dp_replicate > 1 ? "zero_stage 3 (HSDP: sharded over dp / dp_replicate)" : "zero_stage 3 (FSDP2)") : (p.zero_stage >= 1 ? "zero_stage 1-2 (distributed optimizer)" : "zero_stage 0 (DDP)");
  est.terms.push_back({fsdp ? "weights (fp32 shards)" : "weights (bf16)", w,
                       fsdp || p.zero_stage == 0 ? w / tensors : 0, states_src});
  est.terms.push_back({fsdp ? "gradients (fp32 shards)"
                            : (gb == 4 ? "gradients (fp32 main grads)" : "gradients (bf16)"),
                       g, fsdp ? g / tensors : 0, states_src});
  // Optimizer CPU offload (model/offload.hpp): the offloaded fraction's states are on the host.
  const double off = fsdp ? 0.0 : tr.optimizer_offload_fraction;
  std::string opt_name = fsdp ? "optimizer states (Adam m, v)" : "optimizer states (fp32 master + Adam)";
  if (off > 0) {
    char pct[48];
    std::snprintf(pct, sizeof pct, "; %.0f%% on the host)", 100 * off);
    opt_name.pop_back();
    opt_name += pct;
  }
  est.terms.push_back({opt_name, o * (1 - off), o / ((fsdp ? 2 : 3) * tensors), states_src});
  if (fsdp) fsdp_gathered(sc, est);
  if (tr.fp8) {
    // TransformerEngine keeps an FP8 copy of every GEMM weight, row- and column-wise on Hopper
    // (the wgrad / dgrad GEMMs need the transpose): 2 B per parameter beside the BF16 weight
    // (gathered per layer under ZeRO-3, so sharded like the weights).
    const double copies = 2 * (params_rank + expert_rank) / (p.zero_stage >= 3 ? static_cast<double>(p.dp_shard()) * p.cp : 1.0);
    est.terms.push_back({"fp8 weight copies (row + column-wise)", copies, copies / (2 * tensors), "training.precision: fp8"});
  }

  const int64_t s_local = tr.seq_len / p.cp;
  const int layers_stage = (m.layers + p.pp - 1) / p.pp;
  const int in_flight = std::min(p.pp, tr.micro_batches);  // 1F1B: stage 0 holds pp micro-batches
  // (the block being recomputed is counted with the backward's peak, add_backward_peak_terms)
  const double recomputing = recomputing_activation_bytes(sc, layers_stage);
  const double act = stage_activation_bytes(sc, layers_stage, in_flight) - recomputing;
  // Saved tensors are mostly s x b x h activations in bf16 (split by TP under sequence parallelism).
  const double act_tensor = static_cast<double>(s_local) * tr.micro_batch * m.hidden * kBf16Bytes /
                            (p.sequence_parallel ? p.tp : 1);
  est.terms.push_back({"activations", act, act_tensor, std::string("training.recompute: ") + std::string(scenario::name_of(tr.recompute, scenario::kRecomputeNames))});
  // The unfused attention path's s x s scores, a term of their own (stage 0's full-attention
  // layers; memory.cpp recounts them per stage).
  int full_layers = 0;
  for (int i = 0; i < std::min(layers_stage, m.layers); ++i)
    if (layer_kind(m, i) == scenario::LayerKind::FullAttention) ++full_layers;
  if (const double scores = unfused_scores_stage_bytes(sc, full_layers, in_flight); scores > 0)
    est.terms.push_back({kUnfusedScoresTerm, scores, 0, "cost.attention_kernel: unfused"});

  // The backward's transient peak (model/backward_peak.hpp): the loss's buffers, as if this
  // rank held the loss (memory.cpp decides per stage), or one block's working set.
  add_backward_peak_terms(est, sc, true, recomputing);
  est.terms.push_back({"context-parallel buffers", cp_buffer_bytes(sc) * tr.micro_batch,
                       cp_buffer_bytes(sc) * tr.micro_batch / 4, "parallel.attention.scheme"});
  add_fixed_memory_terms(est, sc);
  finish_memory_estimate(est, sc);
  return est;
}

double cp_buffer_bytes(const scenario::Scenario& sc) {
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  const int64_t s_local = tr.seq_len / p.cp;
  // CP buffers for one layer (the live one).
  const int heads_kv_rank = std::max(1, m.heads_kv / p.tp);
  const int heads_q_rank = m.heads_q / p.tp;
  double cp_buf = 0;
  switch (p.attention.scheme) {
    case scenario::AttentionScheme::Ring:
    case scenario::AttentionScheme::DoubleRing: {
      // Ring: two KV receive buffers (double buffering). Double ring: two more for the outer
      // ring, the block being sent on over it during a whole outer step and the one arriving
      // for the next. Plus fp32 output and LSE accumulators.
      // A double ring with one inner ring of all CP ranks is the plain ring (an explicit
      // inner_ring = cp, or the default when the TP x CP grid fits in one node).
      const bool plain = p.attention.scheme == scenario::AttentionScheme::Ring ||
                         p.attention.inner_ring == p.cp ||
                         (p.attention.inner_ring == 0 &&
                          static_cast<int64_t>(p.tp) * p.cp <= sc.platform.gpus_per_node);
      const double kv_buffers = plain ? 2 : 4;
      cp_buf = kv_buffers * kv_block_bytes(s_local, heads_kv_rank, m.head_dim) +
               static_cast<double>(s_local) * heads_q_rank * (m.head_dim + 1) * kFp32Bytes;
      break;
    }
    case scenario::AttentionScheme::AllGather:
      cp_buf = kv_block_bytes(tr.seq_len, heads_kv_rank, m.head_dim);
      break;
    case scenario::AttentionScheme::Ulysses:
    case scenario::AttentionScheme::Usp: {
      const int u = p.attention.scheme == scenario::AttentionScheme::Ulysses
                        ? p.cp
                        : std::max(1, p.attention.ulysses_degree);
      const double seg = static_cast<double>(s_local) * u;  // tokens after the all-to-all
      const int hq = heads_q_rank / u;
      const int hkv = std::max(1, heads_kv_rank / u);
      cp_buf = seg * (2.0 * hq + 2.0 * hkv) * m.head_dim * kBf16Bytes;
      break;
    }
  }
  return cp_buf;
}

void add_fixed_memory_terms(MemoryEstimate& est, const scenario::Scenario& sc) {
  double ws_tensors = 1;
  const double ws = cublas_workspace_bytes(sc, &ws_tensors);
  est.terms.push_back({kCublasTerm, ws, ws / ws_tensors,
                       sc.training.stack == scenario::Stack::MegatronTe ? "TransformerEngine workspace" : "PyTorch CUBLAS_WORKSPACE_CONFIG default"});
  est.terms.push_back({"CUDA context", cuda_context_bytes(sc), 0, "lazy module loading (CUDA >= 11.7)", true});
  std::vector<NcclGroupBuffers> groups;
  const double nccl = nccl_buffer_bytes(sc, &groups);
  std::string comms;
  for (const auto& g : groups) comms += (comms.empty() ? "" : ", ") + g.group;
  if (nccl > 0)
    est.terms.push_back({"NCCL buffers (" + comms + ")", nccl, 0, "NCCL_BUFFSIZE defaults, one set per communicator", true});
}

void finish_memory_estimate(MemoryEstimate& est, const scenario::Scenario& sc) {
  const AllocatorSettings al = allocator_settings(sc);
  std::erase_if(est.terms, [](const MemoryTerm& t) { return t.name == kFragmentationTerm; });
  double inside = 0;
  for (auto& t : est.terms) {
    if (t.outside_allocator) {
      t.allocated = t.reserved = t.bytes;
      continue;
    }
    if (t.allocated == 0 && t.bytes > 0) {
      // Whole tensors of tensor_bytes and the remainder as one more.
      const double size = t.tensor_bytes > 0 ? std::min(t.tensor_bytes, t.bytes) : t.bytes;
      const double whole = std::floor(t.bytes / size + 1e-9);
      const AllocatorFootprint a = allocator_footprint(size, whole, al.expandable_segments);
      const AllocatorFootprint b = allocator_footprint(t.bytes - whole * size, 1, al.expandable_segments);
      t.allocated = a.allocated + b.allocated;
      t.reserved = a.reserved + b.reserved;
    }
    inside += t.reserved;
  }
  // Free blocks the peak finds stranded in cached segments: a share `fragmentation` of the
  // reserved memory (model/allocator.cpp gives the default and its source).
  if (inside > 0) {
    MemoryTerm frag{kFragmentationTerm, 0, 0, al.source};
    frag.reserved = inside * al.fragmentation / (1 - al.fragmentation);
    est.terms.push_back(frag);
  }
  est.peak_bytes = est.allocated_bytes = 0;
  for (const auto& t : est.terms) {
    est.peak_bytes += t.reserved;
    est.allocated_bytes += t.allocated;
  }
  est.capacity_bytes = sc.platform.gpu.memory_bytes;
  est.fits = est.peak_bytes <= est.capacity_bytes;
  auto sorted = est.terms;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const MemoryTerm& a, const MemoryTerm& b) { return a.reserved > b.reserved; });
  est.verdict = memory_verdict(est.peak_bytes, est.capacity_bytes);
  if (!sorted.empty()) est.verdict += "; largest: " + sorted[0].name + " " + gb(sorted[0].reserved);
  if (sorted.size() > 1) est.verdict += ", " + sorted[1].name + " " + gb(sorted[1].reserved);
}

}  // namespace cpsim::model
