#include "schedule/step.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string_view>
#include <tuple>

#include "model/moe.hpp"
#include "model/transformer.hpp"
#include "schedule/collectives.hpp"
#include "schedule/moe_layer.hpp"

namespace cpsim::schedule {

using scenario::LayerKind;
using scenario::Recompute;

Mesh::Mesh(const scenario::ParallelSpec& p) {
  size_ = {p.tp, p.cp, p.pp, p.dp};
  auto dim = [](const std::string& s) {
    if (s == "tp") return 0;
    if (s == "cp") return 1;
    if (s == "pp") return 2;
    if (s == "dp") return 3;
    throw std::invalid_argument("unknown mesh dimension '" + s + "'");
  };
  if (p.order.size() != 4) throw std::invalid_argument("mesh order must name tp, cp, pp, dp");
  for (int k = 0; k < 4; ++k) order_[k] = dim(p.order[k]);
}

int Mesh::rank_of(const std::array<int, 4>& c) const {
  int r = 0;
  for (int k = 3; k >= 0; --k) r = r * size_[order_[k]] + c[order_[k]];
  return r;
}

std::array<int, 4> Mesh::coord_of(int rank) const {
  std::array<int, 4> c{};
  for (int k = 0; k < 4; ++k) {
    c[order_[k]] = rank % size_[order_[k]];
    rank /= size_[order_[k]];
  }
  return c;
}

std::vector<int> Mesh::group(int rank, Dim d) const {
  auto c = coord_of(rank);
  std::vector<int> out;
  for (int i = 0; i < size_[d]; ++i) {
    c[d] = i;
    out.push_back(rank_of(c));
  }
  return out;
}

Documents scenario_documents(const scenario::Scenario& sc) {
  const auto& t = sc.training;
  if (!t.documents.empty()) return Documents::from_lengths(t.documents);
  if (!t.doc_distribution.empty())
    return Documents::random(t.seq_len, t.doc_mean_tokens, t.doc_distribution, t.doc_seed);
  return Documents::single(t.seq_len);
}

namespace {

/// ZeRO-3 parameter all-gathers, shared by the replicas of a stage: (layer, micro-batch, pass,
/// tp index) -> global rank -> op after which that rank holds the layer's full weights.
using GatherMap = std::map<std::tuple<int, int, int, int>, std::map<int, OpId>>;

/// Builds layers for one pipeline-stage replica: the TP x CP grid of GPUs with fixed (pp, dp).
class StageBuilder {
 public:
  StageBuilder(const scenario::Scenario& sc, const model::Topology& topo, Pricer& pricer,
               TaskGraph& g, const Mesh& mesh, const Documents& docs, int pp_i, int dp_i,
               GatherMap& gathers, MoeA2aMap& a2a)
      : sc_(sc), m_(sc.model), topo_(topo), pricer_(pricer), g_(g), docs_(docs), mesh_(mesh),
        gathers_(gathers), a2a_(a2a), pp_i_(pp_i), dp_i_(dp_i) {
    tp_ = sc.parallel.tp;
    cp_ = sc.parallel.cp;
    for (int c = 0; c < cp_; ++c)
      for (int t = 0; t < tp_; ++t) ranks_.push_back(mesh.rank_of({t, c, pp_i, dp_i}));
    tokens_ = static_cast<double>(sc.training.seq_len / cp_) * sc.training.micro_batch;
    sp_ = sc.parallel.sequence_parallel && tp_ > 1;
  }
  const std::vector<int>& ranks() const { return ranks_; }
  int index(int cp_i, int tp_i) const { return cp_i * tp_ + tp_i; }
  using Ops = std::vector<OpId>;

  Ops embedding(int mb, const Ops& entry) {
    return memory_all("embedding", tokens_ * m_.hidden * model::kBf16Bytes * 2, mb, -1,
                      Phase::Forward, entry);
  }
  Ops lm_head(int mb, bool backward, const Ops& entry) {
    const Phase ph = backward ? Phase::Backward : Phase::Forward;
    Ops x = entry;
    if (sp_) x = tp_coll(backward ? CollOp::ReduceScatter : CollOp::AllGather, "tp_lm_head", mb, -1, ph, x);
    if (sc_.mode == scenario::Mode::Prefill)  // logits of each sequence's last token only (vLLM)
      return gemm_all("lm_head", sc_.training.micro_batch, m_.vocab / tp_, m_.hidden, 1.0, mb, -1, ph, x);
    // Chunked loss: the same GEMM and cross-entropy passes, one chunk of tokens at a time.
    const double chunk = sc_.training.loss == scenario::Loss::Chunked
                             ? std::min(tokens_, model::loss_chunk_tokens(sc_))
                             : tokens_;
    for (double done = 0; done < tokens_; done += chunk) {
      const double t = std::min(chunk, tokens_ - done);
      x = gemm_all(backward ? "lm_head_bwd" : "lm_head", t, m_.vocab / tp_, m_.hidden,
                   backward ? 2.0 : 1.0, mb, -1, ph, x);
      // cross-entropy over the vocabulary shard: read bf16 logits, fp32 softmax, write grads
      x = memory_all("cross_entropy", t * m_.vocab / tp_ * 8.0, mb, -1, ph, x);
    }
    return x;
  }

  Ops layer_forward(int layer, int mb, const Ops& entry) { return layer_pass(layer, mb, false, entry); }

  Ops layer_backward(int layer, int mb, const Ops& entry) {
    Ops x = entry;
    if (sc_.training.recompute == Recompute::Full) x = layer_pass(layer, mb, false, x, true);
    return layer_pass(layer, mb, true, x);
  }

  int full_layers_built = 0;

 private:
  OpLabel label(const char* name, int mb, int layer, Phase ph, const char* cat) {
    OpLabel l;
    l.name = g_.intern(name);
    l.micro = mb;
    l.layer = layer;
    l.phase = ph;
    l.category = g_.intern(cat);
    return l;
  }

  Ops gemm_all(const char* name, double m, double n, double k, double mult, int mb, int layer,
               Phase ph, const Ops& deps) {
    Ops out(ranks_.size());
    // FP8 (TransformerEngine) runs the transformer layers' GEMMs in FP8; Megatron keeps the
    // output layer (LM head) in BF16.
    const bool fp8 = sc_.training.fp8 && std::string_view(name).rfind("lm_head", 0) != 0;
    const model::Cost c = fp8 ? pricer_.cost().gemm_fp8(m, n, k) : pricer_.cost().gemm(m, n, k);
    for (size_t i = 0; i < ranks_.size(); ++i) {
      OpLabel l = label(name, mb, layer, ph, "gemm");
      if (recompute_) l.name = g_.intern(std::string(name) + "_recompute");
      const double t = pricer_.time(ranks_[i], c, "gemm") * mult;
      out[i] = g_.add_compute(ranks_[i], stream::kCompute, t, l, recompute_ ? 0 : c.flops * mult);
      g_.add_edge(deps[i], out[i]);
      if (!param_ready_.empty()) g_.add_edge(param_ready_[i], out[i]);
    }
    return out;
  }

  Ops memory_all(const char* name, double bytes, int mb, int layer, Phase ph, const Ops& deps) {
    Ops out(ranks_.size());
    const model::Cost c = pricer_.cost().memory_bound(bytes);
    for (size_t i = 0; i < ranks_.size(); ++i) {
      out[i] = g_.add_compute(ranks_[i], stream::kCompute, pricer_.time(ranks_[i], c, "memory"),
                              label(name, mb, layer, ph, "memory"));
      g_.add_edge(deps[i], out[i]);
    }
    return out;
  }

  /// A TP collective of one activation (tokens x hidden, bf16) in every TP group.
  Ops tp_coll(CollOp op, const char* name, int mb, int layer, Phase ph, const Ops& deps) {
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
      for (int t = 0; t < tp_; ++t) out[index(c, t)] = res.done[t];
    }
    return out;
  }

  /// Before a TP-split block (forward): SP all-gathers the sequence shards; backward mirrors.
  Ops tp_enter(bool backward, int mb, int layer, Phase ph, const Ops& deps) {
    if (!sp_) return backward ? tp_coll(CollOp::AllReduce, "tp_allreduce", mb, layer, ph, deps) : deps;
    return tp_coll(backward ? CollOp::ReduceScatter : CollOp::AllGather,
                   backward ? "sp_reducescatter" : "sp_allgather", mb, layer, ph, deps);
  }
  /// After a TP-split block (forward): SP reduce-scatters, plain TP all-reduces.
  Ops tp_exit(bool backward, int mb, int layer, Phase ph, const Ops& deps) {
    if (!sp_) return backward ? deps : tp_coll(CollOp::AllReduce, "tp_allreduce", mb, layer, ph, deps);
    return tp_coll(backward ? CollOp::AllGather : CollOp::ReduceScatter,
                   backward ? "sp_allgather" : "sp_reducescatter", mb, layer, ph, deps);
  }

  Ops sequence_mixing(int layer, int mb, bool backward, const Ops& deps) {
    const bool full = model::layer_kind(m_, layer) == LayerKind::FullAttention;
    if (full && !backward && !recompute_) full_layers_built++;
    Ops out(ranks_.size());
    for (int t = 0; t < tp_; ++t) {
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

  /// ZeRO-3: all-gather the layer's weights over DP x CP before its GEMMs, prefetched when the
  /// previous layer pass starts (FSDP's one-layer lookahead).
  void gather_params(int layer, int mb, int pass) {
    param_ready_.clear();
    const auto& p = sc_.parallel;
    // Prefill keeps whole (TP-split) weights on every rank, as inference engines do.
    if (p.zero_stage < 3 || p.dp * p.cp == 1 || sc_.mode == scenario::Mode::Prefill) return;
    // (a MoE layer's routed experts gather their EP shard over the same group: an approximation
    // of Megatron's expert-DP group, the same bytes per rank)
    const double bytes =
        (model::layer_ffn_replicated_params(m_, layer) +
         (model::layer_kind(m_, layer) == LayerKind::FullAttention
              ? model::full_attention_layer_params(m_)
              : model::linear_attention_layer_params(m_))) /
            tp_ * model::kBf16Bytes +
        model::layer_expert_params(m_, layer) / (sc_.parallel.ep * sc_.parallel.expert_tp) *
            model::kBf16Bytes;
    const double gathered = sc_.training.fp8 ? bytes / 2 : bytes;  // FP8 param gather: 1 B
    param_ready_.assign(ranks_.size(), kNoOp);
    for (int t = 0; t < tp_; ++t) {
      auto& done = gathers_[{layer, mb, pass, t}];
      if (done.empty()) {
        CollectiveRequest req;
        req.op = CollOp::AllGather;
        req.bytes = gathered;
        req.send_stream = stream::kDpSend;
        req.recv_stream = stream::kDpRecv;
        req.label = label("zero3_allgather_params", mb, layer,
                          pass == 2 ? Phase::Backward : Phase::Forward, "collective");
        req.label.scheme = g_.intern("dp");
        for (int d = 0; d < p.dp; ++d)
          for (int c = 0; c < cp_; ++c) {
            const int r = mesh_.rank_of({t, c, pp_i_, d});
            req.ranks.push_back(r);
            // Replica-local lookahead; other replicas' members are gated by their own streams.
            OpId dep = kNoOp;
            for (size_t i = 0; i < ranks_.size(); ++i)
              if (ranks_[i] == r && i < prev_entry_.size()) dep = prev_entry_[i];
            req.deps.push_back(dep);
          }
        const auto res = add_collective(g_, topo_, req);
        for (size_t k = 0; k < req.ranks.size(); ++k) done[req.ranks[k]] = res.done[k];
      }
      for (int c = 0; c < cp_; ++c) param_ready_[index(c, t)] = done.at(ranks_[index(c, t)]);
    }
  }

  /// A MoE layer's MLP (schedule/moe_layer.cpp) from the normed input to the block output.
  Ops moe(int layer, int mb, bool backward, const Ops& entry) {
    const Phase ph = backward ? Phase::Backward : Phase::Forward;
    const double mult = backward ? 2.0 : 1.0;
    auto gemm = [&](const char* name, double m, double n, double k, const Ops& d) {
      return gemm_all(name, m, n, k, mult, mb, layer, ph, d);
    };
    auto memory = [&](const char* name, double bytes, const Ops& d) {
      return memory_all(name, bytes, mb, layer, ph, d);
    };
    auto enter = [&](const Ops& d) { return tp_enter(backward, mb, layer, ph, d); };
    auto exit = [&](const Ops& d) { return tp_exit(backward, mb, layer, ph, d); };
    MoeCtx c{g_,    topo_,    pricer_,    sc_,     mesh_, a2a_,   ranks_, pp_i_, dp_i_,
             layer, mb,       backward,   recompute_, tokens_, gemm, memory, enter, exit};
    return moe_block(c, entry);
  }

  /// One layer forward (or its recomputation) or backward.
  Ops layer_pass(int layer, int mb, bool backward, const Ops& entry, bool recompute = false) {
    gather_params(layer, mb, backward ? 2 : (recompute ? 1 : 0));
    prev_entry_ = entry;
    recompute_ = recompute;
    const Phase ph = backward ? Phase::Backward : Phase::Forward;
    const double h = m_.hidden;
    const double norm_bytes = tokens_ * h * model::kBf16Bytes * 2 / (sp_ ? tp_ : 1);
    const bool full = model::layer_kind(m_, layer) == LayerKind::FullAttention;
    // Projection widths per TP rank.
    double in_width, mix_width;
    if (full && m_.mla) {  // MLA's down- and up-projections, priced as one GEMM of their FLOPs
      in_width = model::attention_in_proj_params(m_) / h / tp_;
      mix_width = model::attention_out_proj_params(m_) / h / tp_;
    } else if (full) {
      const double q_out = m_.heads_q * m_.head_dim * (m_.attention_output_gate ? 2.0 : 1.0);
      in_width = (q_out + 2.0 * m_.heads_kv * m_.head_dim) / tp_;
      mix_width = static_cast<double>(m_.heads_q) * m_.head_dim / tp_;
    } else {
      in_width = (2.0 * m_.linear_heads_k * m_.linear_key_dim +
                  2.0 * m_.linear_heads_v * m_.linear_value_dim + 2.0 * m_.linear_heads_v) / tp_;
      mix_width = static_cast<double>(m_.linear_heads_v) * m_.linear_value_dim / tp_;
    }
    const double ffn = static_cast<double>(m_.ffn_hidden) / tp_;
    // Backward GEMMs do the data gradient and the weight gradient: twice the forward FLOPs.
    const double mult = backward ? 2.0 : 1.0;
    Ops x = entry;
    if (!backward) {
      x = memory_all("norm_attn", norm_bytes, mb, layer, ph, x);
      x = tp_enter(false, mb, layer, ph, x);
      x = gemm_all("qkv_proj", tokens_, in_width, h, mult, mb, layer, ph, x);
      x = sequence_mixing(layer, mb, false, x);
      x = gemm_all("out_proj", tokens_, h, mix_width, mult, mb, layer, ph, x);
      x = tp_exit(false, mb, layer, ph, x);
      x = memory_all("norm_mlp", norm_bytes, mb, layer, ph, x);
      if (model::is_moe_layer(m_, layer)) {
        x = moe(layer, mb, false, x);
      } else {
        x = tp_enter(false, mb, layer, ph, x);
        x = gemm_all("mlp_up_gate", tokens_, 2 * ffn, h, mult, mb, layer, ph, x);
        x = memory_all("swiglu", tokens_ * ffn * 3 * model::kBf16Bytes, mb, layer, ph, x);
        x = gemm_all("mlp_down", tokens_, h, ffn, mult, mb, layer, ph, x);
        x = tp_exit(false, mb, layer, ph, x);
      }
    } else {
      if (model::is_moe_layer(m_, layer)) {
        x = moe(layer, mb, true, x);
      } else {
        x = tp_exit(true, mb, layer, ph, x);
        x = gemm_all("mlp_down_bwd", tokens_, h, ffn, mult, mb, layer, ph, x);
        x = memory_all("swiglu_bwd", tokens_ * ffn * 5 * model::kBf16Bytes, mb, layer, ph, x);
        x = gemm_all("mlp_up_gate_bwd", tokens_, 2 * ffn, h, mult, mb, layer, ph, x);
        x = tp_enter(true, mb, layer, ph, x);
      }
      x = memory_all("norm_mlp_bwd", 1.5 * norm_bytes, mb, layer, ph, x);
      x = tp_exit(true, mb, layer, ph, x);
      x = gemm_all("out_proj_bwd", tokens_, h, mix_width, mult, mb, layer, ph, x);
      x = sequence_mixing(layer, mb, true, x);
      x = gemm_all("qkv_proj_bwd", tokens_, in_width, h, mult, mb, layer, ph, x);
      x = tp_enter(true, mb, layer, ph, x);
      x = memory_all("norm_attn_bwd", 1.5 * norm_bytes, mb, layer, ph, x);
    }
    recompute_ = false;
    param_ready_.clear();
    return x;
  }

  const scenario::Scenario& sc_;
  const scenario::ModelSpec& m_;
  const model::Topology& topo_;
  Pricer& pricer_;
  TaskGraph& g_;
  const Documents& docs_;
  const Mesh& mesh_;
  GatherMap& gathers_;
  MoeA2aMap& a2a_;
  int pp_i_ = 0, dp_i_ = 0;
  Ops param_ready_;
  Ops prev_entry_;
  std::vector<int> ranks_;
  int tp_ = 1, cp_ = 1;
  double tokens_ = 0;
  bool sp_ = false;
  bool recompute_ = false;
};

/// One pipeline action of a stage: forward or backward of a micro-batch on one of the stage's
/// virtual chunks (model chunk = chunk * p + stage).
struct Action {
  bool backward;
  int mb;
  int chunk;
};

/// Megatron's 1F1B order for stage s of p with m micro-batches and v virtual chunks per stage
/// (v = 1: plain 1F1B; v > 1: the interleaved schedule, which needs m divisible by p).
std::vector<Action> one_f_one_b(int s, int p, int m, int v) {
  std::vector<Action> out;
  const int total = m * v;
  auto fwd = [&](int i) {
    return Action{false, (i / (p * v)) * p + i % p, (i / p) % v};
  };
  auto bwd = [&](int i) {
    return Action{true, (i / (p * v)) * p + i % p, v - 1 - (i / p) % v};
  };
  const int warmup = v == 1 ? std::min(p - s - 1, m) : std::min((p - s - 1) * 2 + (v - 1) * p, total);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(v == 1 ? Action{false, f, 0} : fwd(f));
  while (f < total) {
    out.push_back(v == 1 ? Action{false, f, 0} : fwd(f));
    ++f;
    out.push_back(v == 1 ? Action{true, b, 0} : bwd(b));
    ++b;
  }
  for (; b < total; ++b) out.push_back(v == 1 ? Action{true, b, 0} : bwd(b));
  return out;
}

/// replica_symmetry's answer when only the replica's own traffic can tell.
const char* const kCheckSpines = "check spines";

/// Empty when one data-parallel replica may stand for the unperturbed ones (identical inputs,
/// no shared links); otherwise why not. Replicas differ in nothing but the DP collectives when
/// each replica's GPUs fill whole rail leaf groups (or one NVLink domain), so that their CP /
/// TP / PP traffic never meets, and nothing perturbs every GPU (jitter, static variation) or the
/// routes (rails down). Perturbations of single GPUs, nodes or links leave the other replicas
/// alike: the replicas they touch are simulated in full (perturbed_replicas).
std::string replica_symmetry(const scenario::Scenario& sc, const model::Topology& topo,
                             const Mesh& mesh) {
  const auto& p = sc.parallel;
  const auto& pert = sc.perturb;
  if (p.dp == 1) return "not needed: one data-parallel replica";
  if (sc.simulation.symmetry == scenario::Symmetry::Off) return "off (simulation.symmetry)";
  if (pert.jitter_cv > 0 || pert.gpu_variation_cv > 0 || !pert.rails_down.empty())
    return "refused: perturbations make replicas differ (jitter, static variation or rails down "
           "touch every replica)";
  if (p.order.back() != "dp") return "refused: dp is not the outermost mesh dimension";
  const auto& spec = topo.spec();
  const int64_t replica_gpus = static_cast<int64_t>(mesh.size()) / p.dp;
  const int64_t leaf_gpus = static_cast<int64_t>(spec.gpus_per_node) * spec.nodes_per_leaf;
  const bool in_domain = replica_gpus <= spec.nvlink_domain_gpus &&
                         spec.nvlink_domain_gpus % replica_gpus == 0;
  // A replica inside one NVLink domain keeps its traffic there; one that fills whole rail leaf
  // groups keeps its cross-leaf traffic on its own leaves' uplinks. Otherwise replicas meet on
  // leaf uplinks (cross-rail hops go through the spines).
  if (spec.nodes > 1 && !in_domain && replica_gpus % leaf_gpus != 0)
    return kCheckSpines;
  return "";
}

/// Per data-parallel replica: whether a slow GPU or node, or a degraded link, touches it.
std::vector<char> perturbed_replicas(const scenario::Scenario& sc, const model::Topology& topo,
                                     const Mesh& mesh) {
  const int dp = sc.parallel.dp, gpn = topo.spec().gpus_per_node;
  std::vector<char> touched(dp, 0);
  auto mark = [&](int gpu) {
    if (gpu >= 0 && gpu < mesh.size()) touched[mesh.coord_of(gpu)[Mesh::kDp]] = 1;
  };
  for (const auto& [gpu, factor] : sc.perturb.gpu_factors(gpn))
    if (factor != 1 && gpu != sc.perturb.neutral_rank) mark(gpu);
  for (const auto& l : sc.perturb.links) {
    if (l.bw_factor == 1 && l.add_latency_s == 0) continue;
    if (l.link == scenario::PerturbLink::Nic)  // a NIC may serve several GPUs of its node
      for (int gpu = l.gpu / gpn * gpn; gpu < (l.gpu / gpn + 1) * gpn; ++gpu) mark(gpu);
    else
      mark(l.gpu);
  }
  return touched;
}

/// True if any transfer from op `first` on crosses a spine (leaf <-> spine) link: the only
/// links that GPUs of different replicas can share besides those of the DP collectives.
bool uses_spines(const TaskGraph& g, const model::Topology& topo, OpId first) {
  for (OpId id = first; id < g.size(); ++id) {
    const Op& op = g.op(id);
    if (op.kind != OpKind::Transfer) continue;
    for (uint32_t l : topo.route(op.rank, op.peer))
      if (topo.links()[l].cls == model::LinkClass::Spine) return true;
  }
  return false;
}

BuildInfo build_attention_layer(const scenario::Scenario& sc, const model::Topology& topo,
                                Pricer& pricer, TaskGraph& g, const Mesh& mesh,
                                const Documents& docs) {
  BuildInfo info;
  info.scope = "attention-layer";
  const auto& m = sc.model;
  int layer = 0;
  while (layer < m.layers && model::layer_kind(m, layer) != LayerKind::FullAttention) ++layer;
  for (int t = 0; t < sc.parallel.tp; ++t) {
    AttentionCtx ctx{g, topo, pricer, sc, {}, layer, 0, {}, layer_documents(m, docs, layer)};
    for (int c = 0; c < sc.parallel.cp; ++c) ctx.group.push_back(mesh.rank_of({t, c, 0, 0}));
    if (t == 0) info.cp_group = ctx.group;
    ctx.geo.heads_q = m.heads_q / sc.parallel.tp;
    ctx.geo.heads_kv = std::max(1, m.heads_kv / sc.parallel.tp);
    ctx.geo.head_dim = m.head_dim;
    ctx.geo.batch = sc.training.micro_batch;
    const std::vector<OpId> none(ctx.group.size(), kNoOp);
    const auto fwd = attention_forward(ctx, none);
    if (sc.mode != scenario::Mode::Prefill) attention_backward(ctx, fwd);
  }
  info.ranks = sc.parallel.tp * sc.parallel.cp;
  info.full_layers_built = 1;
  // Model FLOPs of one attention layer, forward + backward (prefill: forward only).
  const double pairs =
      static_cast<double>(total_pairs(layer_documents(m, docs, layer))) * sc.training.micro_batch;
  info.model_flops = (sc.mode == scenario::Mode::Prefill ? 1.0 : 3.0) * 4.0 * pairs * m.heads_q * m.head_dim;
  info.tokens = static_cast<double>(sc.training.seq_len) * sc.training.micro_batch;
  return info;
}

}  // namespace

BuildInfo build_scenario(const scenario::Scenario& sc, const model::Topology& topo,
                         Pricer& pricer, TaskGraph& g) {
  const Mesh mesh(sc.parallel);
  const auto cm = sc.simulation.collectives;
  g.set_pipelined_collectives(cm == scenario::CollectiveModel::Pipelined ||
                              (cm == scenario::CollectiveModel::Auto && mesh.size() > 512));
  if (mesh.size() > topo.gpus())
    throw std::invalid_argument("the mesh needs " + std::to_string(mesh.size()) +
                                " GPUs but the platform has " + std::to_string(topo.gpus()));
  const Documents docs = scenario_documents(sc);
  if (sc.simulation.scope == scenario::Scope::AttentionLayer)
    return build_attention_layer(sc, topo, pricer, g, mesh, docs);

  BuildInfo info;
  info.scope = sc.simulation.scope == scenario::Scope::Layer ? "layer" : "step";
  const auto& p = sc.parallel;
  const auto& m = sc.model;
  const int layers = sc.simulation.scope == scenario::Scope::Layer
                         ? std::min<int>(m.layers, static_cast<int>(m.pattern.size()))
                         : m.layers;
  const int pp = p.pp;
  const int mbs = sc.training.micro_batches;
  const bool prefill = sc.mode == scenario::Mode::Prefill;
  const int vs = std::max(1, p.virtual_stages);
  const int chunks = pp * vs;  // model chunks; chunk c runs on stage c % pp
  if (vs > 1 && mbs % pp != 0)
    throw std::invalid_argument("the interleaved pipeline schedule needs micro_batches (" +
                                std::to_string(mbs) + ") divisible by pp (" + std::to_string(pp) + ")");
  if (chunks > layers)
    throw std::invalid_argument("pp x virtual_stages = " + std::to_string(chunks) +
                                " model chunks but only " + std::to_string(layers) + " layers");
  auto chunk_layers = [&](int c) {
    return std::pair<int, int>{static_cast<int>(static_cast<int64_t>(c) * layers / chunks),
                               static_cast<int>(static_cast<int64_t>(c + 1) * layers / chunks)};
  };
  auto stage_layer_list = [&](int s) {
    std::vector<int> ls;
    for (int k = 0; k < vs; ++k) {
      const auto [l0, l1] = chunk_layers(k * pp + s);
      for (int l = l0; l < l1; ++l) ls.push_back(l);
    }
    return ls;
  };
  for (int c = 0; c < p.cp; ++c) info.cp_group.push_back(mesh.rank_of({0, c, 0, 0}));

  using Ops = std::vector<OpId>;
  GatherMap gathers;
  MoeA2aMap a2a;
  // [replica][layer]: each layer's backward of the last micro-batch, per grid rank.
  std::vector<std::vector<Ops>> grads_ready(p.dp, std::vector<Ops>(layers));
  // Replicas not built take part only in the data-parallel collectives, gated by their twin,
  // the representative `rep` (the first unperturbed replica); perturbed ones are all built.
  std::string why_not = replica_symmetry(sc, topo, mesh);
  bool symmetric = why_not.empty() || why_not == kCheckSpines;
  const std::vector<char> perturbed =
      symmetric ? perturbed_replicas(sc, topo, mesh) : std::vector<char>(p.dp, 1);
  int rep = 0;
  while (symmetric && rep < p.dp && perturbed[rep]) ++rep;
  if (symmetric && rep == p.dp) {
    symmetric = false;
    why_not = "refused: perturbations touch every replica";
  }
  std::vector<char> built(p.dp, 1);
  if (symmetric)
    for (int d = 0; d < p.dp; ++d) built[d] = d == rep || perturbed[d];
  bool spines_checked = why_not != kCheckSpines;
  for (int d = 0; d < p.dp; ++d) {
    if (!built[d]) continue;
    std::vector<StageBuilder> stages;
    for (int s = 0; s < pp; ++s) stages.emplace_back(sc, topo, pricer, g, mesh, docs, s, d, gathers, a2a);
    const size_t grid = stages[0].ranks().size();
    // Outputs of each stage's forward / backward per micro-batch (after the p2p to the peer).
    // Outputs per model chunk and micro-batch (after the p2p to the next chunk's stage).
    std::vector<std::vector<Ops>> fwd_out(chunks, std::vector<Ops>(mbs)), bwd_out(chunks, std::vector<Ops>(mbs));
    std::vector<std::vector<bool>> fwd_done(chunks, std::vector<bool>(mbs)), bwd_done(chunks, std::vector<bool>(mbs));
    std::vector<std::vector<Action>> plan(pp);
    std::vector<size_t> next(pp, 0);
    std::vector<Ops>& last_layer_bwd = grads_ready[d];
    for (int s = 0; s < pp; ++s) plan[s] = one_f_one_b(s, pp, mbs, vs);
    // Prefill: the forward actions only, in the same order (a forward-only pipeline).
    if (prefill)
      for (auto& pl : plan)
        pl.erase(std::remove_if(pl.begin(), pl.end(), [](const Action& a) { return a.backward; }), pl.end());

    auto pp_transfer = [&](int from, int to, bool backward, int mb, const Ops& deps) {
      if (from == to) return deps;
      Ops out(grid);
      const auto& src = stages[from].ranks();
      const auto& dst = stages[to].ranks();
      const double bytes = static_cast<double>(sc.training.seq_len / p.cp) *
                           sc.training.micro_batch * m.hidden * model::kBf16Bytes /
                           (p.sequence_parallel ? p.tp : 1);
      for (size_t i = 0; i < grid; ++i) {
        OpLabel l;
        l.name = g.intern(backward ? "pp_grad_p2p" : "pp_act_p2p");
        l.category = g.intern("p2p");
        l.micro = mb;
        l.phase = backward ? Phase::Backward : Phase::Forward;
        // Separate streams per direction keep each queue in schedule order.
        const uint16_t ss = backward ? stream::kPpGradSend : stream::kPpSend;
        const uint16_t rs = backward ? stream::kPpGradRecv : stream::kPpRecv;
        out[i] = add_p2p(g, topo, src[i], dst[i], bytes, l, deps[i], ss, rs);
      }
      return out;
    };

    // Build actions in an order where every input already exists (a topological walk of the
    // pipeline), so each stage's streams receive ops in its own schedule order.
    size_t remaining = 0;
    for (auto& pl : plan) remaining += pl.size();
    while (remaining > 0) {
      bool progressed = false;
      for (int s = 0; s < pp; ++s) {
        while (next[s] < plan[s].size()) {
          const Action a = plan[s][next[s]];
          const int c = a.chunk * pp + s;
          const auto [l0, l1] = chunk_layers(c);
          StageBuilder& sb = stages[s];
          Ops x;
          if (!a.backward) {
            if (c > 0 && !fwd_done[c - 1][a.mb]) break;
            x = c == 0 ? sb.embedding(a.mb, Ops(grid, kNoOp)) : fwd_out[c - 1][a.mb];
            for (int l = l0; l < l1; ++l) x = sb.layer_forward(l, a.mb, x);
            if (c == chunks - 1)
              x = sb.lm_head(a.mb, false, x);
            else
              x = pp_transfer(s, (c + 1) % pp, false, a.mb, x);
            fwd_out[c][a.mb] = x;
            fwd_done[c][a.mb] = true;
          } else {
            if (c == chunks - 1 ? !fwd_done[c][a.mb] : !bwd_done[c + 1][a.mb]) break;
            x = c == chunks - 1 ? sb.lm_head(a.mb, true, fwd_out[c][a.mb]) : bwd_out[c + 1][a.mb];
            for (int l = l1 - 1; l >= l0; --l) {
              x = sb.layer_backward(l, a.mb, x);
              if (a.mb == mbs - 1) last_layer_bwd[l] = x;
            }
            if (c > 0) x = pp_transfer(s, (c - 1 + pp) % pp, true, a.mb, x);
            bwd_out[c][a.mb] = x;
            bwd_done[c][a.mb] = true;
          }
          next[s]++;
          remaining--;
          progressed = true;
        }
      }
      if (!progressed) throw std::logic_error("pipeline schedule cannot make progress");
    }

    info.full_layers_built += stages[0].full_layers_built;
    if (!spines_checked) {  // decided once the first replica exists
      spines_checked = true;
      symmetric = !uses_spines(g, topo, 0);
      why_not = symmetric ? "" : "refused: the replica's traffic crosses spine links other replicas share";
      if (!symmetric) std::fill(built.begin(), built.end(), 1);
    }
  }
  if (p.dp > 1) {
    const int n_built = static_cast<int>(std::count(built.begin(), built.end(), 1));
    std::string touched;
    for (int d = 0; d < p.dp; ++d)
      if (symmetric && perturbed[d]) touched += (touched.empty() ? "" : ", ") + std::to_string(d);
    if (!symmetric)
      info.symmetry = why_not;
    else if (touched.empty())
      info.symmetry = "used: one data-parallel replica simulated; the other " +
                      std::to_string(p.dp - 1) + " take part only in the DP collectives";
    else
      info.symmetry = "used: " + std::to_string(n_built) +
                      " data-parallel replicas simulated (perturbed: " + touched + "; replica " +
                      std::to_string(rep) + " stands for the other " +
                      std::to_string(p.dp - n_built) + ", which take part only in the DP collectives)";
  }

  // Gradient reduction over the data-parallel x context-parallel group (CP ranks hold the same
  // weights), in buckets as the backward produces them, on its own streams so it overlaps the
  // rest of the backward. ZeRO >= 1 (distributed optimizer) reduce-scatters, steps its shard
  // and all-gathers the updated bf16 weights; ZeRO 0 all-reduces and steps everything.
  const int dp_group = p.dp * p.cp;
  const int stages_to_reduce = prefill ? 0 : pp;  // prefill: no gradients, no optimizer
  auto layer_params = [&](int l) {  // a MoE layer's routed experts: add_expert_grad_sync
    return (model::layer_ffn_replicated_params(m, l) + (model::layer_kind(m, l) == LayerKind::FullAttention
                                         ? model::full_attention_layer_params(m)
                                         : model::linear_attention_layer_params(m))) /
           p.tp;
  };
  for (int s = 0; s < stages_to_reduce; ++s) {
    const std::vector<int> owned = stage_layer_list(s);  // in forward order
    double stage_params = 0;
    for (int l : owned) stage_params += layer_params(l);
    // The stage's routed experts, reduced over expert DP (moe_layer.cpp), stepped below too.
    const double experts_held = add_expert_grad_sync(
        g, topo, sc, mesh, s, owned, [&](int rank, int l) {
          const auto co = mesh.coord_of(rank);
          return grads_ready[built[co[3]] ? co[3] : rep][l][static_cast<size_t>(co[1] * p.tp + co[0])];
        });
    for (int t = 0; t < p.tp; ++t) {
      std::vector<int> members;
      for (int d = 0; d < p.dp; ++d)
        for (int c = 0; c < p.cp; ++c) members.push_back(mesh.rank_of({t, c, s, d}));
      auto grid_index = [&](int c) { return c * p.tp + t; };
      Ops done(members.size(), kNoOp);
      if (dp_group > 1) {
        double bucket = 0;
        // Buckets fill in backward order: the stage's last layers produce gradients first.
        for (auto it = owned.rbegin(); it != owned.rend(); ++it) {
          const int l = *it;
          bucket += layer_params(l) * model::kBf16Bytes;
          if (bucket < p.dp_bucket_bytes && l != owned.front()) continue;
          CollectiveRequest req;
          req.op = p.zero_stage >= 1 ? CollOp::ReduceScatter : CollOp::AllReduce;
          req.bytes = bucket;
          req.send_stream = stream::kDpSend;
          req.recv_stream = stream::kDpRecv;
          req.label.name = g.intern(p.zero_stage >= 1 ? "dp_reducescatter_grads" : "dp_allreduce_grads");
          req.label.category = g.intern("collective");
          req.label.scheme = g.intern("dp");
          req.label.layer = l;
          req.label.phase = Phase::Backward;
          req.ranks = members;
          for (int d = 0; d < p.dp; ++d)
            for (int c = 0; c < p.cp; ++c)
              req.deps.push_back(grads_ready[built[d] ? d : rep][l][grid_index(c)]);
          done = add_collective(g, topo, req).done;
          bucket = 0;
        }
      }
      double shard = p.zero_stage >= 1 ? stage_params / dp_group : stage_params;
      shard += p.zero_stage >= 1 ? experts_held / model::expert_dp(p) : experts_held;
      const model::Cost c = pricer.cost().memory_bound(shard * 30.0);
      Ops opt(members.size());
      for (size_t i = 0; i < members.size(); ++i) {
        if (!built[i / p.cp]) continue;  // mirrored below
        OpLabel l;
        l.name = g.intern("optimizer_step");
        l.category = g.intern("memory");
        l.phase = Phase::Optimizer;
        opt[i] = g.add_compute(members[i], stream::kCompute, pricer.time(members[i], c, "memory"), l);
        g.add_edge(done[i], opt[i]);
      }
      // A mirrored replica's member waits as its twin in the representative replica does.
      for (size_t i = 0; i < members.size(); ++i)
        if (!built[i / p.cp]) opt[i] = opt[static_cast<size_t>(rep * p.cp) + i % p.cp];
      if (dp_group > 1 && p.zero_stage >= 1) {
        CollectiveRequest req;
        req.op = CollOp::AllGather;
        // FP8 training gathers the updated weights as their FP8 copies (Megatron
        // --fp8-param-gather): 1 B per parameter.
        req.bytes = stage_params * (sc.training.fp8 ? 1.0 : model::kBf16Bytes);
        req.send_stream = stream::kDpSend;
        req.recv_stream = stream::kDpRecv;
        req.label.name = g.intern("dp_allgather_params");
        req.label.category = g.intern("collective");
        req.label.scheme = g.intern("dp");
        req.label.phase = Phase::Optimizer;
        req.ranks = members;
        req.deps = opt;
        add_collective(g, topo, req);
      }
    }
  }
  info.ranks = mesh.size();
  const double sequences = static_cast<double>(sc.training.micro_batch) * mbs * p.dp;
  info.tokens = static_cast<double>(sc.training.seq_len) * sequences;
  auto ms = m;
  ms.layers = layers;
  // Softmax layers may differ in mask (sliding entries): their mean pair count.
  double pairs = 0;
  int softmax_layers = 0;
  for (int l = 0; l < layers; ++l)
    if (model::layer_kind(m, l) == LayerKind::FullAttention) {
      pairs += static_cast<double>(total_pairs(layer_documents(m, docs, l)));
      ++softmax_layers;
    }
  pairs = softmax_layers > 0 ? pairs / softmax_layers : static_cast<double>(total_pairs(docs));
  info.model_flops = model::model_flops_per_step(ms, sc.training.seq_len, sequences, pairs);
  if (prefill)  // forward only, and the LM head for each sequence's last token
    info.model_flops = info.model_flops / 3.0 - 2.0 * m.vocab * m.hidden * (info.tokens - sequences);
  return info;
}

}  // namespace cpsim::schedule
