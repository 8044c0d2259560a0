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

double zero3_gather_bytes(const scenario::Scenario& sc, int layer) {
  const auto& m = sc.model;
  // (a MoE layer's routed experts gather their EP shard over the same group: an approximation
  // of Megatron's expert-DP group, the same bytes per rank)
  const double bytes =
      (model::layer_ffn_replicated_params(m, layer) +
       (model::layer_kind(m, layer) == LayerKind::FullAttention ? model::full_attention_layer_params(m)
                                                                 : model::linear_attention_layer_params(m))) /
          sc.parallel.tp * model::kBf16Bytes +
      model::layer_expert_params(m, layer) / (sc.parallel.ep * sc.parallel.expert_tp) * model::kBf16Bytes;
  return sc.training.fp8 ? bytes / 2 : bytes;  // FP8 param gather: 1 B
}

size_t dp_group_gather_ops(const scenario::Scenario& sc, const model::Topology& topo, bool symmetric) {
  const Mesh mesh(sc.parallel);
  TaskGraph g;
  g.set_pipelined_collectives(pipelined_collectives(sc));
  CollectiveRequest req;
  req.op = CollOp::AllGather;
  req.bytes = zero3_gather_bytes(sc, 0);
  req.send_stream = stream::kDpSend;
  req.recv_stream = stream::kDpRecv;
  req.label.name = g.intern("zero3_allgather_params");
  // HSDP gathers within the shard group (replica 0's: dp / dp_replicate ranks x cp).
  for (int d = 0; d < sc.parallel.dp_shard(); ++d)
    for (int c = 0; c < sc.parallel.cp; ++c) req.ranks.push_back(mesh.rank_of({0, c, 0, d}));
  if (sc.simulation.lean_collectives && sc.parallel.dp > 1) {  // as a lean build of replica 0
    std::vector<int32_t> twin(static_cast<size_t>(mesh.size()), -1);
    for (int r = 0; r < mesh.size(); ++r) {
      auto co = mesh.coord_of(r);
      if (co[Mesh::kDp] == 0) continue;
      co[Mesh::kDp] = 0;
      twin[static_cast<size_t>(r)] = mesh.rank_of(co);
    }
    g.set_phantom_ranks(twin);
  } else if (symmetric && sc.parallel.dp > 1 && sc.simulation.bystanders) {  // as a full build of replica 0
    std::vector<char> built(static_cast<size_t>(sc.parallel.dp), 0);
    built[0] = 1;
    g.set_bystanders(bystanders(mesh, built));
  }
  add_collective(g, topo, req);
  return g.size();
}

/// ZeRO-3: all-gather the layer's weights over DP x CP before its GEMMs, prefetched when the
/// previous layer pass starts (FSDP's one-layer lookahead). HSDP gathers over the shard group
/// (the dp / dp_replicate consecutive DP indices holding dp_i_, x CP) only.
void StageBuilder::gather_params(int layer, int mb, int pass) {
  param_ready_.clear();
  const auto& p = sc_.parallel;
  // Prefill keeps whole (TP-split) weights on every rank, as inference engines do.
  if (p.zero_stage < 3 || p.dp_shard() * p.cp == 1 || sc_.mode == scenario::Mode::Prefill) return;
  const int shard = p.dp_shard(), group = dp_i_ / shard;
  const double gathered = zero3_gather_bytes(sc_, layer);
  // A recomputed forward runs on the backward's gather: FSDP2 unshards a block in its
  // pre-backward hook (torch/distributed/fsdp/_fully_shard/_fsdp_state.py _pre_backward), the
  // checkpoint's rerun happens inside that backward, where _pre_forward returns at once
  // (training state PRE_BACKWARD), and the block reshards only after its backward.
  if (pass == 1) pass = 2;
  // A block that does not reshard after its forward (model::fsdp_reshards) keeps the weights
  // its first forward gathered for every later pass and micro-batch: PyTorch's pipelining
  // stages also keep FSDP from resharding after each micro-batch's backward
  // (set_reshard_after_backward(False) until the last).
  if (!model::fsdp_reshards(p, layer, m_.layers)) mb = pass = 0;
  param_ready_.assign(ranks_.size(), kNoOp);
  for (int t = 0; t < tp_; ++t) {
    if (mirrored_[index(0, t)]) {
      for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = param_ready_[index(c, 0)];
      continue;
    }
    // One gather per shard group: the key's TP slot counts the group too.
    auto& done = gathers_[{layer, mb, pass, t + tp_ * group}];
    if (done.empty()) {
      CollectiveRequest req;
      req.op = CollOp::AllGather;
      req.bytes = gathered;
      req.send_stream = stream::kDpSend;
      req.recv_stream = stream::kDpRecv;
      req.label = label("zero3_allgather_params", mb, layer,
                        pass == 2 ? Phase::Backward : Phase::Forward, "collective");
      req.label.scheme = g_.intern("dp");
      for (int d = group * shard; d < (group + 1) * shard; ++d)
        for (int c = 0; c < cp_; ++c) {
          const int r = mesh_.rank_of({t, c, pp_i_, d});
          req.ranks.push_back(r);
          // Replica-local lookahead; other replicas' members are gated by their own streams.
          OpId dep = kNoOp;
          for (size_t i = 0; i < ranks_.size() && d == dp_i_; ++i)
            if (ranks_[i] == r && i < prev_entry_.size()) dep = prev_entry_[i];
          req.deps.push_back(dep);
        }
      const auto res = add_collective(g_, topo_, req);
      // (a phantom GPU's replica is never built: nothing reads its end)
      for (size_t k = 0; k < req.ranks.size(); ++k)
        if (!g_.phantom(req.ranks[k])) done[req.ranks[k]] = res.done[k];
    }
    for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = done.at(ranks_[index(c, t)]);
  }
}

/// Megatron's overlapped parameter gather: the updated weights of the last step's optimizer,
/// gathered bucket by bucket before the first micro-batch's forward uses them. Megatron
/// dispatches the first bucket's gather in the first forward pre-hook (so it waits for the
/// stage's input), or at the step's start on every stage with --align-param-gather
/// (pipeline_parallel/schedules.py); each finish_param_sync dispatches the next bucket's
/// (param_and_grad_buffer.py), so the rest follow back to back on the DP stream while the
/// forward runs. The gathers are per TP index over DP x CP, shared by the replicas.
void StageBuilder::overlapped_param_gather(int layer, int mb, int pass, const Ops& entry) {
  if (param_buckets_.empty() || mb != 0 || pass != 0) return;
  size_t k = 0;
  while (k < param_buckets_.size() &&
         std::find(param_buckets_[k].layers.begin(), param_buckets_[k].layers.end(), layer) ==
             param_buckets_[k].layers.end())
    ++k;
  if (k == param_buckets_.size()) return;
  const auto& p = sc_.parallel;
  param_ready_.assign(ranks_.size(), kNoOp);
  for (int t = 0; t < tp_; ++t) {
    if (mirrored_[index(0, t)]) {
      for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = param_ready_[index(c, 0)];
      continue;
    }
    // Every bucket's gather is built when the stage's first layer is: the first with its
    // dispatch dependency, the rest queued behind it.
    const int first = param_buckets_[k].layers.front();
    if (k == 0 && layer == first && !gathers_.count({first, -1, 3, t})) {
      for (size_t b = 0; b < param_buckets_.size(); ++b) {
        CollectiveRequest req;
        req.op = CollOp::AllGather;
        req.bytes = param_buckets_[b].bytes;
        req.send_stream = stream::kDpSend;
        req.recv_stream = stream::kDpRecv;
        req.label = label("dp_allgather_params", 0, param_buckets_[b].layers.front(), Phase::Forward,
                          "collective");
        req.label.scheme = g_.intern("dp");
        for (int d = 0; d < p.dp; ++d)
          for (int c = 0; c < cp_; ++c) {
            const int r = mesh_.rank_of({t, c, pp_i_, d});
            req.ranks.push_back(r);
            OpId dep = kNoOp;
            // (a replica's first forward input gates its own members only)
            for (size_t i = 0; i < ranks_.size() && b == 0 && d == dp_i_ && !p.align_param_gather; ++i)
              if (ranks_[i] == r) dep = entry[i];
            req.deps.push_back(dep);
          }
        const auto res = add_collective(g_, topo_, req);
        auto& done = gathers_[{param_buckets_[b].layers.front(), -1, 3, t}];
        for (size_t q = 0; q < req.ranks.size(); ++q)
          if (!g_.phantom(req.ranks[q])) done[req.ranks[q]] = res.done[q];
      }
    }
    const auto& done = gathers_.at({first, -1, 3, t});
    for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = done.at(ranks_[index(c, t)]);
  }
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
