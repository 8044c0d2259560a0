#include "schedule/stage_builder.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include "model/activation_checkpoint.hpp"
#include "model/cost_source.hpp"
#include "model/data_parallel.hpp"
#include "model/fp8_quantize.hpp"
#include "model/host_ops.hpp"
#include "model/moe.hpp"
#include "model/offload.hpp"
#include "model/stack_kernels.hpp"
#include "model/transformer.hpp"
#include "schedule/collectives.hpp"
#include "schedule/host_lane.hpp"
#include "schedule/replicas.hpp"
#include "schedule/tp_overlap.hpp"

namespace cpsim::schedule {

using scenario::LayerKind;
using scenario::Recompute;

StageBuilder::StageBuilder(const scenario::Scenario& sc, const model::Topology& topo,
                           Pricer& pricer, TaskGraph& g, const Mesh& mesh, const Documents& docs,
                           int pp_i, int dp_i, GatherMap& gathers, MoeA2aMap& a2a)
    : sc_(sc), m_(sc.model), topo_(topo), pricer_(pricer), g_(g), docs_(docs), mesh_(mesh),
      gathers_(gathers), a2a_(a2a), pp_i_(pp_i), dp_i_(dp_i) {
  tp_ = sc.parallel.tp;
  cp_ = sc.parallel.cp;
  for (int c = 0; c < cp_; ++c)
    for (int t = 0; t < tp_; ++t) {
      ranks_.push_back(mesh.rank_of({t, c, pp_i, dp_i}));
      mirrored_.push_back(g.phantom(ranks_.back()));
    }
  tokens_ = static_cast<double>(sc.training.seq_len / cp_) * sc.training.micro_batch;
  sp_ = sc.parallel.sequence_parallel && tp_ > 1;
  overlap_ = sp_ && sc.parallel.tp_comm_overlap;  // the scenario refuses it without SP
}

// A platform naming ops_per_attention keeps its per-call count and adds no other host ops.
void StageBuilder::region_host(const char* name, const model::HostLoad& load, int mb, int layer, Phase ph,
                               OpId first) {
  const scenario::RuntimeSpec& rt = sc_.platform.runtime;
  if (rt.ops_per_attention >= 0) return;
  const double s = model::host_seconds(load, rt);
  for (size_t i = 0; i < ranks_.size(); ++i)
    if (!mirrored_[i]) add_region_host(g_, ranks_[i], s, label(name, mb, layer, ph, "overhead"), first);
}

StageBuilder::Ops StageBuilder::embedding(int mb, const Ops& entry) {
  // The lookup gathers each token's row: a copy-class kernel.
  const auto first = static_cast<OpId>(g_.size());
  Ops x = memory_all("embedding", tokens_ * m_.hidden * model::kBf16Bytes * 2, model::MemClass::Copy, mb, -1,
                     Phase::Forward, entry);
  region_host("host_ops_embedding", model::embedding_host_ops(sc_.training.stack, tp_), mb, -1, Phase::Forward,
              first);
  return x;
}
StageBuilder::Ops StageBuilder::lm_head(int mb, bool backward, const Ops& entry) {
  const Phase ph = backward ? Phase::Backward : Phase::Forward;
  Ops x = entry;
  if (sp_) x = tp_coll(backward ? CollOp::ReduceScatter : CollOp::AllGather, "tp_lm_head", mb, -1, ph, x);
  if (sc_.mode == scenario::Mode::Prefill)  // logits of each sequence's last token only (vLLM)
    return gemm_all("lm_head", sc_.training.micro_batch, m_.vocab / tp_, m_.hidden, mb, -1, ph, x);
  // Chunked loss: the same GEMM and cross-entropy passes, one chunk of tokens at a time.
  const double chunk = sc_.training.loss == scenario::Loss::Chunked
                           ? std::min(tokens_, model::loss_chunk_tokens(sc_))
                           : tokens_;
  const auto first = static_cast<OpId>(g_.size());
  int chunks = 0;
  for (double done = 0; done < tokens_; done += chunk, ++chunks) {
    const double t = std::min(chunk, tokens_ - done);
    x = gemm_all(backward ? "lm_head_bwd" : "lm_head", t, m_.vocab / tp_, m_.hidden, mb, -1, ph, x);
    // cross-entropy over the vocabulary shard, as the stack runs it (stack_kernels.hpp)
    x = memory_cost_all("cross_entropy",
                        pricer_.cost().memory_kernels(
                            model::loss_kernels(sc_.training.stack, backward, t, m_.vocab / tp_)),
                        mb, -1, ph, x);
  }
  region_host(backward ? "host_ops_lm_head_loss_bwd" : "host_ops_lm_head_loss",
              model::lm_head_host_ops(sc_.training.stack, backward, chunks, tp_), mb, -1, ph, first);
  return x;
}

// Activation CPU offloading as TransformerEngine's double-buffered handler runs it: a layer's
// saved activations are copied out on their own stream once its forward ends, and the forward
// of the layer after next waits for that copy (the buffer it reuses); the backward of layer l
// starts copying layer l - 1's activations back (one layer of prefetch) and waits for its own.
StageBuilder::Ops StageBuilder::layer_forward(int layer, int mb, const Ops& entry) {
  if (auto it = to_host_.find({layer - 2, mb}); it != to_host_.end()) offload_wait_ = it->second;
  const Ops x = layer_pass(layer, mb, false, entry);
  offload_wait_.clear();
  if (model::layer_offloaded(sc_, layer)) to_host_[{layer, mb}] = host_copy(true, layer, mb, x);
  return x;
}

StageBuilder::Ops StageBuilder::layer_backward(int layer, int mb, const Ops& entry) {
  Ops x = entry;
  for (int l : {layer, layer - 1})
    if (l >= 0 && model::layer_offloaded(sc_, l) && !from_host_.count({l, mb}))
      from_host_[{l, mb}] = host_copy(false, l, mb, entry);
  if (auto it = from_host_.find({layer, mb}); it != from_host_.end()) offload_wait_ = it->second;
  if (model::layer_recomputed(sc_, layer) || model::layer_op_sac(sc_, layer)) x = layer_pass(layer, mb, false, x, true);
  x = layer_pass(layer, mb, true, x);
  offload_wait_.clear();
  return x;
}

StageBuilder::Ops StageBuilder::host_copy(bool to_host, int layer, int mb, const Ops& deps) {
  const double t = model::host_copy_seconds(model::offload_layer_bytes(sc_));
  const auto& out = to_host_[{layer, mb}];  // (the copy out, when copying back)
  Ops ops(ranks_.size());
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (mirrored_[i]) {
      ops[i] = ops[twin(i)];
      continue;
    }
    OpLabel l = label(to_host ? "offload_activations_d2h" : "offload_activations_h2d", mb, layer,
                      to_host ? Phase::Forward : Phase::Backward, "offload");
    ops[i] = g_.add_compute(ranks_[i], stream::kOffload, t, l);
    g_.add_edge(deps[i], ops[i]);
    if (!to_host && i < out.size()) g_.add_edge(out[i], ops[i]);
  }
  return ops;
}


OpLabel StageBuilder::label(const char* name, int mb, int layer, Phase ph, const char* cat) {
  OpLabel l;
  l.name = g_.intern(name);
  l.micro = mb;
  l.layer = layer;
  l.phase = ph;
  l.category = g_.intern(cat);
  return l;
}

namespace {
bool starts_with(std::string_view s, std::string_view p) { return s.rfind(p, 0) == 0; }
bool ends_with(std::string_view s, std::string_view x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}
}  // namespace

// FP8 (TransformerEngine) runs the transformer layers' linear GEMMs in FP8; Megatron keeps the
// output layer (LM head, a plain ColumnParallelLinear) and the MoE router in BF16. Backward:
// dgrad and wgrad (TE _Linear.backward), or one of them where the TP overlap runs them apart
// (names ending _dgrad / _wgrad). In FP8 each GEMM first runs its quantisation kernels
// (fp8_quantize.hpp): under Megatron-TE the QKV and FC1 inputs come FP8 out of the fused norm,
// and weights are re-cast on the first micro-batch of a step only.
StageBuilder::GemmPrice StageBuilder::gemm_price(const char* name, double m, double n, double k,
                                                 Phase ph, int mb) const {
  const std::string_view nm(name);
  model::GemmCall c;
  c.m = m;
  c.n = n;
  c.k = k;
  c.fp8 = sc_.training.fp8 && !starts_with(nm, "lm_head") && !starts_with(nm, "moe_router");
  c.recipe = sc_.training.fp8_recipe;
  const auto& cm = pricer_.cost();
  GemmPrice p;
  model::QuantNeeds needs;
  if (ph != Phase::Backward) {
    needs.input_from_norm = sc_.training.stack == scenario::Stack::MegatronTe &&
                            (nm == "qkv_proj" || nm == "mlp_up_gate");
    needs.weight = mb == 0 && !recompute_;
    c.pass = model::GemmPass::Fprop;
    p.gemm = cm.gemm(c);
    p.quantize = model::fp8_quantize_cost(c, needs, sc_.platform.gpu);
    return p;
  }
  const bool only_dgrad = ends_with(nm, "_dgrad"), only_wgrad = ends_with(nm, "_wgrad");
  c.pass = model::GemmPass::Dgrad;
  const model::Cost dgrad = cm.gemm(c);
  if (!only_wgrad) p.quantize = model::fp8_quantize_cost(c, needs, sc_.platform.gpu);
  c.pass = model::GemmPass::Wgrad;
  const model::Cost wgrad = cm.gemm(c);
  if (only_dgrad) p.gemm = dgrad;
  else if (only_wgrad) p.gemm = wgrad;
  else {
    p.gemm = dgrad;
    p.gemm.time_s += wgrad.time_s;
    p.gemm.flops += wgrad.flops;
    p.gemm.source = model::weaker(dgrad.source, wgrad.source);
    p.gemm.extrapolated = dgrad.extrapolated || wgrad.extrapolated;
  }
  return p;
}

OpId StageBuilder::gemm_op(size_t i, const char* name, const GemmPrice& c, double mult, double slow,
                           int mb, int layer, Phase ph, OpId dep) {
  if (c.quantize.time_s > 0) {
    OpLabel q = label("fp8_quantize", mb, layer, ph, "quantize");
    const OpId qop = g_.add_priced(ranks_[i], stream::kCompute, pricer_.time(c.quantize, "quantize") * slow, q);
    g_.add_edge(dep, qop);
    dep = qop;
  }
  OpLabel l = label(name, mb, layer, ph, "gemm");
  if (recompute_) l.name = g_.intern(std::string(name) + "_recompute");
  const double t = pricer_.time(c.gemm, "gemm") * mult * slow;
  const OpId op = g_.add_priced(ranks_[i], stream::kCompute, t, l, recompute_ ? 0 : c.gemm.flops * mult);
  g_.add_edge(dep, op);
  if (!param_ready_.empty()) g_.add_edge(param_ready_[i], op);
  if (!offload_wait_.empty()) g_.add_edge(offload_wait_[i], op);
  return op;
}

StageBuilder::Ops StageBuilder::gemm_all(const char* name, double m, double n, double k, int mb,
                                         int layer, Phase ph, const Ops& deps) {
  Ops out(ranks_.size());
  const GemmPrice c = gemm_price(name, m, n, k, ph, mb);
  for (size_t i = 0; i < ranks_.size(); ++i)
    out[i] = mirrored_[i] ? out[twin(i)] : gemm_op(i, name, c, 1.0, 1.0, mb, layer, ph, deps[i]);
  return out;
}

TpOverlapCtx StageBuilder::overlap_ctx(int mb, int layer, Phase ph) {
  TpOverlapCtx c{g_, topo_, sc_, ranks_, mb, layer, ph, tokens_ * m_.hidden * model::kBf16Bytes, {}};
  c.gemm = [this, mb, layer, ph](size_t i, const char* name, double m, double n, double k, double mult,
                                 double slow, OpId dep) {
    return gemm_op(i, name, gemm_price(name, m, n, k, ph, mb), mult, slow, mb, layer, ph, dep);
  };
  return c;
}

// A TP-split GEMM with the TP collective that feeds it (kGatherIn: the SP all-gather forward,
// the output gradient's all-gather backward) or that follows it (kScatterOut: the SP
// reduce-scatter / TP all-reduce forward, the input gradient's reduce-scatter backward):
// serial, or overlapped in chunks (tp_overlap.hpp).
StageBuilder::Ops StageBuilder::tp_gemm(bool backward, TpSide side, const char* name, double m, double n,
                                        double k, int mb, int layer, const Ops& deps) {
  const Phase ph = backward ? Phase::Backward : Phase::Forward;
  if (overlap_) {
    TpOverlapCtx c = overlap_ctx(mb, layer, ph);
    return side == kGatherIn ? ag_gemm_overlap(c, name, m, n, k, deps) : gemm_rs_overlap(c, name, m, n, k, deps);
  }
  if (side == kGatherIn)
    return gemm_all(name, m, n, k, mb, layer, ph,
                    backward ? tp_exit(true, mb, layer, ph, deps) : tp_enter(false, mb, layer, ph, deps));
  const Ops x = gemm_all(name, m, n, k, mb, layer, ph, deps);
  return backward ? tp_enter(true, mb, layer, ph, x) : tp_exit(false, mb, layer, ph, x);
}

StageBuilder::Ops StageBuilder::memory_all(const char* name, double bytes, model::MemClass cls, int mb, int layer,
                                           Phase ph, const Ops& deps) {
  return memory_cost_all(name, pricer_.cost().memory_bound(bytes, cls, name), mb, layer, ph, deps);
}

StageBuilder::Ops StageBuilder::memory_cost_all(const char* name, const model::Cost& c, int mb, int layer, Phase ph,
                                                const Ops& deps) {
  Ops out(ranks_.size());
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (mirrored_[i]) {
      out[i] = out[twin(i)];
      continue;
    }
    out[i] = g_.add_priced(ranks_[i], stream::kCompute, pricer_.time(c, "memory"),
                            label(name, mb, layer, ph, "memory"));
    g_.add_edge(deps[i], out[i]);
  }
  return out;
}

/// A TP collective of one activation (tokens x hidden, bf16) in every TP group.
StageBuilder::Ops StageBuilder::tp_coll(CollOp op, const char* name, int mb, int layer, Phase ph, const Ops& deps) {
  if (tp_ == 1) return deps;
  Ops out(ranks_.size());
  for (int c = 0; c < cp_; ++c) {
    CollectiveRequest req;
    req.op = op;
    req.bytes = tokens_ * m_.hidden * model::kBf16Bytes;
    req.send_stream = stream::kTpSend;
    req.recv_stream = stream::kTpRecv;
    req.label = label(name, mb, layer, ph, "collective");
    req.label.scheme = g_.intern(sp_ ? "tp-sp" : "tp");
    for (int t = 0; t < tp_; ++t) {
      req.ranks.push_back(ranks_[index(c, t)]);
      req.deps.push_back(deps[index(c, t)]);
    }
    const auto res = add_collective(g_, topo_, req);
    // (a mirrored rank's part may have been left out: lean_ring_members)
    for (int t = 0; t < tp_; ++t) out[index(c, t)] = res.done[mirrored_[index(c, t)] ? 0 : t];
  }
  return out;
}

/// Before a TP-split block (forward): SP all-gathers the sequence shards; backward mirrors.
StageBuilder::Ops StageBuilder::tp_enter(bool backward, int mb, int layer, Phase ph, const Ops& deps) {
  if (!sp_) return backward ? tp_coll(CollOp::AllReduce, "tp_allreduce", mb, layer, ph, deps) : deps;
  return tp_coll(backward ? CollOp::ReduceScatter : CollOp::AllGather,
                 backward ? "sp_reducescatter" : "sp_allgather", mb, layer, ph, deps);
}
/// After a TP-split block (forward): SP reduce-scatters, plain TP all-reduces.
StageBuilder::Ops StageBuilder::tp_exit(bool backward, int mb, int layer, Phase ph, const Ops& deps) {
  if (!sp_) return backward ? deps : tp_coll(CollOp::AllReduce, "tp_allreduce", mb, layer, ph, deps);
  return tp_coll(backward ? CollOp::AllGather : CollOp::ReduceScatter,
                 backward ? "sp_allgather" : "sp_reducescatter", mb, layer, ph, deps);
}

StageBuilder::Ops StageBuilder::sequence_mixing(int layer, int mb, bool backward, const Ops& deps) {
  const bool full = model::layer_kind(m_, layer) == LayerKind::FullAttention;
  if (full && !backward && !recompute_) full_layers_built++;
  Ops out(ranks_.size());
  for (int t = 0; t < tp_; ++t) {
    if (mirrored_[index(0, t)]) {
      for (int c = 0; c < cp_; ++c) out[index(c, t)] = out[index(c, 0)];
      continue;
    }
    AttentionCtx ctx{g_, topo_, pricer_, sc_, {}, layer, mb, {}, docs_};
    if (full) ctx.docs = layer_documents(m_, docs_, layer);
    Ops entry;
    for (int c = 0; c < cp_; ++c) {
      ctx.group.push_back(ranks_[index(c, t)]);
      entry.push_back(deps[index(c, t)]);
    }
    ctx.geo.heads_q = m_.heads_q / tp_;
    ctx.geo.heads_kv = std::max(1, m_.heads_kv / tp_);
    ctx.geo.head_dim = m_.head_dim;
    ctx.geo.batch = sc_.training.micro_batch;
    Ops done;
    if (full)
      done = backward ? attention_backward(ctx, entry) : attention_forward(ctx, entry);
    else
      done = backward ? linear_attention_backward(ctx, entry)
                      : linear_attention_forward(ctx, entry);
    for (int c = 0; c < cp_; ++c) out[index(c, t)] = done[c];
  }
  return out;
}

/// A MoE layer's MLP (schedule/moe_layer.cpp) from the normed input to the block output.
StageBuilder::Ops StageBuilder::moe(int layer, int mb, bool backward, const Ops& entry) {
  const Phase ph = backward ? Phase::Backward : Phase::Forward;
  auto gemm = [&](const char* name, double m, double n, double k, const Ops& d) {
    return gemm_all(name, m, n, k, mb, layer, ph, d);
  };
  auto memory = [&](const char* name, const std::vector<model::MemKernel>& ks, const Ops& d) {
    return memory_cost_all(name, pricer_.cost().memory_kernels(ks), mb, layer, ph, d);
  };
  auto enter = [&](const Ops& d) { return tp_enter(backward, mb, layer, ph, d); };
  auto exit = [&](const Ops& d) { return tp_exit(backward, mb, layer, ph, d); };
  MoeCtx c{g_,    topo_,    pricer_,    sc_,     mesh_, a2a_,   ranks_, pp_i_, dp_i_,
           layer, mb,       backward,   recompute_, tokens_, gemm, memory, enter, exit};
  const auto first = static_cast<OpId>(g_.size());
  Ops x = moe_block(c, entry);
  // Grouped expert GEMMs, as moe_block prices them (TE GroupedLinear, torch._grouped_mm).
  const int local = m_.moe.experts / std::max(1, sc_.parallel.ep);
  region_host("host_ops_moe", model::moe_host_ops(sc_.training.stack, backward, local, true), mb, layer, ph,
              first);
  return x;
}

StageBuilder::Widths StageBuilder::widths(int layer) const {
  const double h = m_.hidden;
  const bool full = model::layer_kind(m_, layer) == LayerKind::FullAttention;
  Widths w;
  if (full && m_.mla) {  // MLA's down- and up-projections, priced as one GEMM of their FLOPs
    w.in = model::attention_in_proj_params(m_) / h / tp_;
    w.mix = model::attention_out_proj_params(m_) / h / tp_;
  } else if (full) {
    const double q_out = m_.heads_q * m_.head_dim * (m_.attention_output_gate ? 2.0 : 1.0);
    w.in = (q_out + 2.0 * m_.heads_kv * m_.head_dim) / tp_;
    w.mix = static_cast<double>(m_.heads_q) * m_.head_dim / tp_;
  } else {
    w.in = (2.0 * m_.linear_heads_k * m_.linear_key_dim +
            2.0 * m_.linear_heads_v * m_.linear_value_dim + 2.0 * m_.linear_heads_v) / tp_;
    w.mix = static_cast<double>(m_.linear_heads_v) * m_.linear_value_dim / tp_;
  }
  w.ffn = static_cast<double>(m_.ffn_hidden) / tp_;
  return w;
}

StageBuilder::Ops StageBuilder::layer_pass(int layer, int mb, bool backward, const Ops& entry,
                                           bool recompute) {
  gather_params(layer, mb, backward ? 2 : (recompute ? 1 : 0));
  overlapped_param_gather(layer, mb, backward ? 2 : (recompute ? 1 : 0), entry);
  prev_entry_ = entry;
  recompute_ = recompute;
  Ops x = backward ? backward_pass(layer, mb, entry) : forward_pass(layer, mb, entry);
  recompute_ = false;
  param_ready_.clear();
  return x;
}

StageBuilder::Ops StageBuilder::forward_pass(int layer, int mb, const Ops& entry) {
  if (recompute_ && model::layer_op_sac(sc_, layer)) return op_sac_recompute(layer, mb, entry);
  const double h = m_.hidden;
  const Widths w = widths(layer);
  Ops x = stack_region("norm_attn", model::LayerRegion::NormAttn, false, layer, mb, entry);
  x = tp_gemm(false, kGatherIn, "qkv_proj", tokens_, w.in, h, mb, layer, x);
  x = stack_region("rope", model::LayerRegion::Rope, false, layer, mb, x);
  x = sequence_mixing(layer, mb, false, x);
  x = tp_gemm(false, kScatterOut, "out_proj", tokens_, h, w.mix, mb, layer, x);
  x = stack_region("residual_attn", model::LayerRegion::ResidualAttn, false, layer, mb, x);
  x = stack_region("norm_mlp", model::LayerRegion::NormMlp, false, layer, mb, x);
  if (model::is_moe_layer(m_, layer)) return moe(layer, mb, false, x);
  x = tp_gemm(false, kGatherIn, "mlp_up_gate", tokens_, 2 * w.ffn, h, mb, layer, x);
  x = stack_region("swiglu", model::LayerRegion::Activation, false, layer, mb, x);
  x = tp_gemm(false, kScatterOut, "mlp_down", tokens_, h, w.ffn, mb, layer, x);
  return stack_region("residual_mlp", model::LayerRegion::ResidualMlp, false, layer, mb, x);
}

// Backward GEMMs do the data gradient and the weight gradient (gemm_price). The recomputation
// passes a backward runs first (op_sac_recompute, core_attention_recompute) are in recompute.cpp.
StageBuilder::Ops StageBuilder::backward_pass(int layer, int mb, const Ops& entry) {
  const double h = m_.hidden;
  const Widths w = widths(layer);
  Ops x = stack_region("residual_mlp_bwd", model::LayerRegion::ResidualMlp, true, layer, mb, entry);
  if (model::is_moe_layer(m_, layer)) {
    x = moe(layer, mb, true, x);
  } else {
    x = tp_gemm(true, kGatherIn, "mlp_down_bwd", tokens_, h, w.ffn, mb, layer, x);
    x = stack_region("swiglu_bwd", model::LayerRegion::Activation, true, layer, mb, x);
    x = tp_gemm(true, kScatterOut, "mlp_up_gate_bwd", tokens_, 2 * w.ffn, h, mb, layer, x);
  }
  x = stack_region("norm_mlp_bwd", model::LayerRegion::NormMlp, true, layer, mb, x);
  x = stack_region("residual_attn_bwd", model::LayerRegion::ResidualAttn, true, layer, mb, x);
  x = tp_gemm(true, kGatherIn, "out_proj_bwd", tokens_, h, w.mix, mb, layer, x);
  if (model::core_attention_recomputed(sc_, layer)) x = core_attention_recompute(layer, mb, x);
  x = sequence_mixing(layer, mb, true, x);
  x = stack_region("rope_bwd", model::LayerRegion::Rope, true, layer, mb, x);
  x = tp_gemm(true, kScatterOut, "qkv_proj_bwd", tokens_, w.in, h, mb, layer, x);
  return stack_region("norm_attn_bwd", model::LayerRegion::NormAttn, true, layer, mb, x);
}

// The stack's memory-bound kernels of one region (stack_kernels.hpp) as one op: norms and
// residual adds over this rank's sequence shard under sequence parallelism, RoPE and the
// activation over the TP rank's heads and FFN columns.
StageBuilder::Ops StageBuilder::stack_region(const char* name, model::LayerRegion region, bool backward,
                                             int layer, int mb, const Ops& deps) {
  const bool full = model::layer_kind(m_, layer) == LayerKind::FullAttention;
  model::LayerWidths lw;
  const bool per_token_shard = region == model::LayerRegion::NormAttn || region == model::LayerRegion::NormMlp ||
                               region == model::LayerRegion::ResidualAttn || region == model::LayerRegion::ResidualMlp;
  lw.tokens = per_token_shard && sp_ ? tokens_ / tp_ : tokens_;
  lw.hidden = m_.hidden;
  if (full) {
    lw.q = static_cast<double>(m_.heads_q) * m_.head_dim / tp_;
    lw.kv = static_cast<double>(std::max(1, m_.heads_kv / tp_)) * m_.head_dim;
  }
  lw.ffn = static_cast<double>(m_.ffn_hidden) / tp_;
  const auto ks = model::layer_kernels(sc_.training.stack, region, backward, lw);
  if (ks.empty()) return deps;
  return memory_cost_all(name, pricer_.cost().memory_kernels(ks), mb, layer,
                         backward ? Phase::Backward : Phase::Forward, deps);
}

}  // namespace cpsim::schedule
