#include "schedule/moe_layer.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "model/data_parallel.hpp"
#include "model/moe.hpp"
#include "model/transformer.hpp"
#include "schedule/collectives.hpp"
#include "schedule/grad_buckets.hpp"

namespace cpsim::schedule {

namespace {

using Ops = std::vector<OpId>;

/// The EP group of grid rank (tp_i, cp_i) of replica dp_i on stage pp_i: Megatron numbers the
/// expert ranks tp fastest (when expert_tp = 1), then cp, then dp, and cuts them into
/// consecutive blocks of ep; the mesh's `order` then places those coordinates on GPUs.
struct EpGroup {
  int group = 0;
  int tp_key = -1;                   ///< expert_tp > 1: EP groups are per TP index
  std::vector<int> ranks;            ///< global ranks, EP index order
  std::vector<std::array<int, 2>> tc;///< their (tp_i, cp_i)
  std::vector<int> dp;               ///< their dp_i
};

EpGroup ep_group(const scenario::ParallelSpec& p, const Mesh& mesh, int pp_i, int tp_i, int cp_i, int dp_i) {
  const model::EpCoord co = model::ep_coord(p, tp_i, cp_i, dp_i);
  EpGroup e;
  e.group = co.group;
  e.tp_key = p.expert_tp == 1 ? -1 : tp_i;
  for (int j = 0; j < p.ep; ++j) {
    const int64_t f = static_cast<int64_t>(co.group) * p.ep + j;
    int t = tp_i, c, d;
    if (p.expert_tp == 1) {
      t = static_cast<int>(f % p.tp);
      c = static_cast<int>((f / p.tp) % p.cp);
      d = static_cast<int>(f / p.tp / p.cp);
    } else {
      c = static_cast<int>(f % p.cp);
      d = static_cast<int>(f / p.cp);
    }
    e.ranks.push_back(mesh.rank_of({t, c, pp_i, d}));
    e.tc.push_back({t, c});
    e.dp.push_back(d);
  }
  return e;
}

OpLabel make_label(TaskGraph& g, const std::string& name, const MoeCtx& c, const char* cat) {
  OpLabel l;
  l.name = g.intern(c.recompute ? name + "_recompute" : name);
  l.micro = c.mb;
  l.layer = c.layer;
  l.phase = c.backward ? Phase::Backward : Phase::Forward;
  l.category = g.intern(cat);
  return l;
}

/// Tokens one rank routes (its sequence-parallel shard).
double local_tokens(const MoeCtx& c) { return c.tokens / c.sc.parallel.tp; }

/// An expert's SwiGLU over `tokens` x `ffn` as the stack runs a dense layer's (stack_kernels.hpp):
/// fused under Megatron-TE and torch.compile, silu then mul in eager PyTorch.
std::vector<model::MemKernel> activation_kernels(const MoeCtx& c, double tokens, double ffn) {
  model::LayerWidths w;
  w.tokens = tokens;
  w.hidden = c.sc.model.hidden;
  w.ffn = ffn;
  return model::layer_kernels(c.sc.training.stack, model::LayerRegion::Activation, c.backward, w);
}

/// Dispatch (which = 0) or combine (which = 1) all-to-all of every EP group the grid touches.
Ops all_to_all(MoeCtx& c, int which, const Ops& deps) {
  const auto& p = c.sc.parallel;
  if (p.ep == 1) return deps;
  const int tp = p.tp;
  const double bytes = moe_a2a_bytes(c.sc, c.tokens, c.layer, c.mb);
  const int pass = c.backward ? 2 : (c.recompute ? 1 : 0);
  Ops out(c.ranks.size(), kNoOp);
  for (size_t i = 0; i < c.ranks.size(); ++i) {
    const int t = static_cast<int>(i) % tp, cp_i = static_cast<int>(i) / tp;
    const EpGroup e = ep_group(p, c.mesh, c.pp_i, t, cp_i, c.dp_i);
    auto& done = c.a2a[{c.pp_i, e.group, e.tp_key, c.layer, c.mb, pass * 2 + which}];
    if (done.empty()) {
      CollectiveRequest req;
      req.op = CollOp::AllToAll;
      req.bytes = bytes;
      req.send_stream = stream::kEpSend;
      req.recv_stream = stream::kEpRecv;
      req.label = make_label(c.g, which == 0 ? "moe_dispatch" : "moe_combine", c, "collective");
      req.label.scheme = c.g.intern("ep");
      req.ranks = e.ranks;
      // Members in replicas not built yet (or never: symmetric replicas) start with their twin
      // in this replica, the rank with the same TP and CP coordinates.
      for (size_t j = 0; j < e.ranks.size(); ++j)
        req.deps.push_back(deps[static_cast<size_t>(e.tc[j][1] * tp + e.tc[j][0])]);
      const auto res = add_collective(c.g, c.topo, req);
      for (size_t j = 0; j < e.ranks.size(); ++j) done[e.ranks[j]] = res.done[j];
    }
    out[i] = done.at(c.ranks[i]);
  }
  return out;
}

/// Expert TP > 1: all-gather (forward) / reduce-scatter the received tokens over the TP group.
Ops expert_tp_coll(MoeCtx& c, CollOp op, const char* name, double tokens_recv, const Ops& deps) {
  const auto& p = c.sc.parallel;
  if (p.expert_tp == 1 || p.tp == 1) return deps;
  Ops out(c.ranks.size());
  for (int cp_i = 0; cp_i < p.cp; ++cp_i) {
    CollectiveRequest req;
    req.op = op;
    req.bytes = tokens_recv * c.sc.model.hidden * model::kBf16Bytes * p.tp;
    req.send_stream = stream::kTpSend;
    req.recv_stream = stream::kTpRecv;
    req.label = make_label(c.g, name, c, "collective");
    req.label.scheme = c.g.intern("tp-sp");
    for (int t = 0; t < p.tp; ++t) {
      req.ranks.push_back(c.ranks[static_cast<size_t>(cp_i * p.tp + t)]);
      req.deps.push_back(deps[static_cast<size_t>(cp_i * p.tp + t)]);
    }
    const auto res = add_collective(c.g, c.topo, req);
    for (int t = 0; t < p.tp; ++t) out[static_cast<size_t>(cp_i * p.tp + t)] = res.done[static_cast<size_t>(t)];
  }
  return out;
}

/// The grouped expert GEMMs (or the SwiGLU between them) of every grid rank. Each rank's
/// experts are priced one by one at the tokens they receive (a grouped GEMM runs them back to
/// back); every rank of an EP group takes as long as its most loaded member, since the combine
/// all-to-all waits for that one anyway. FLOPs are the rank's own.
Ops expert_ops(MoeCtx& c, int part, const Ops& deps) {
  const auto& p = c.sc.parallel;
  const auto& m = c.sc.model;
  const double h = m.hidden;
  const double ffn = static_cast<double>(m.moe.expert_ffn_hidden) / p.expert_tp;
  const double tp_gather = p.expert_tp > 1 ? p.tp : 1;  // tokens of the whole TP group
  const model::ExpertLoad load =
      model::route_tokens(m, local_tokens(c) * p.ep, p.ep, c.sc.simulation.seed, c.layer, c.mb);
  const int local = m.moe.experts / p.ep;
  auto price = [&](int ep_index) {
    model::Cost sum;
    for (int e = ep_index * local; e < (ep_index + 1) * local; ++e) {
      const double tok = load.tokens[static_cast<size_t>(e)] * tp_gather;
      if (!(tok > 0)) continue;
      const auto& cm = c.pricer.cost();
      if (part == 1) {
        const model::Cost k = cm.memory_kernels(activation_kernels(c, tok, ffn));
        sum.time_s += k.time_s;
        sum.source = k.source;
        sum.origin = k.origin;
        continue;
      }
      // The expert's GEMM by its own (skinny) shape: forward fprop, backward dgrad + wgrad.
      model::GemmCall g;
      g.m = tok;
      g.n = part == 0 ? 2 * ffn : h;
      g.k = part == 0 ? h : ffn;
      g.fp8 = c.sc.training.fp8;
      g.recipe = c.sc.training.fp8_recipe;
      for (const model::GemmPass pass : {model::GemmPass::Fprop, model::GemmPass::Dgrad, model::GemmPass::Wgrad}) {
        if ((pass == model::GemmPass::Fprop) == c.backward) continue;
        g.pass = pass;
        const model::Cost k = cm.gemm(g);
        sum.time_s += k.time_s;
        sum.flops += k.flops;
        sum.source = k.source;
        sum.origin = k.origin;
      }
    }
    return sum;
  };
  std::vector<model::Cost> costs;
  size_t slowest = 0;
  for (int j = 0; j < p.ep; ++j) {
    costs.push_back(price(j));
    if (costs.back().time_s > costs[slowest].time_s) slowest = costs.size() - 1;
  }
  static const char* const kNames[2][3] = {{"moe_expert_up_gate", "moe_expert_swiglu", "moe_expert_down"},
                                           {"moe_expert_up_gate_bwd", "moe_expert_swiglu_bwd", "moe_expert_down_bwd"}};
  const char* kind = part == 1 ? "memory" : "gemm";
  Ops out(c.ranks.size());
  for (size_t i = 0; i < c.ranks.size(); ++i) {
    const int t = static_cast<int>(i) % p.tp, cp_i = static_cast<int>(i) / p.tp;
    const int idx = model::ep_coord(p, t, cp_i, c.dp_i).index;
    const double t_s = c.pricer.time(costs[slowest], kind);
    out[i] = c.g.add_priced(c.ranks[i], stream::kCompute, t_s,
                             make_label(c.g, kNames[c.backward][part], c, kind),
                             c.recompute ? 0 : costs[static_cast<size_t>(idx)].flops);
    c.g.add_edge(deps[i], out[i]);
  }
  return out;
}

/// Shared experts: a dense SwiGLU MLP of their combined width, TP-split like any dense MLP.
Ops shared_experts(MoeCtx& c, const Ops& deps) {
  const auto& m = c.sc.model;
  if (m.moe.shared_experts == 0) return deps;
  const double width = (m.moe.shared_expert_ffn_hidden > 0 ? m.moe.shared_expert_ffn_hidden
                                                           : m.moe.expert_ffn_hidden) *
                       static_cast<double>(m.moe.shared_experts) / c.sc.parallel.tp;
  const double h = m.hidden;
  Ops x = deps;
  if (!c.backward) {
    x = c.tp_enter(x);
    x = c.gemm("moe_shared_up_gate", c.tokens, 2 * width, h, x);
    x = c.memory("moe_shared_swiglu", activation_kernels(c, c.tokens, width), x);
    x = c.gemm("moe_shared_down", c.tokens, h, width, x);
    x = c.tp_exit(x);
  } else {
    x = c.tp_exit(x);
    x = c.gemm("moe_shared_down_bwd", c.tokens, h, width, x);
    x = c.memory("moe_shared_swiglu_bwd", activation_kernels(c, c.tokens, width), x);
    x = c.gemm("moe_shared_up_gate_bwd", c.tokens, 2 * width, h, x);
    x = c.tp_enter(x);
  }
  return x;
}

}  // namespace

double moe_a2a_bytes(const scenario::Scenario& sc, double tokens_per_cp_rank, int layer, int mb) {
  const auto& p = sc.parallel;
  const double local = tokens_per_cp_rank / p.tp;
  const model::ExpertLoad load = model::route_tokens(sc.model, local * p.ep, p.ep, sc.simulation.seed, layer, mb);
  return load.max_rank_tokens() * sc.model.hidden * model::kBf16Bytes;
}

Ops moe_block(MoeCtx& c, const Ops& entry) {
  const auto& m = c.sc.model;
  const auto& p = c.sc.parallel;
  const double h = m.hidden, tok = local_tokens(c), k = m.moe.top_k;
  const double tokens_recv =
      model::route_tokens(m, tok * p.ep, p.ep, c.sc.simulation.seed, c.layer, c.mb).max_rank_tokens();
  // Router: a hidden x experts GEMM on the rank's own tokens, then softmax + top-k (read the
  // logits, write probabilities; fp32). Permute / unpermute: gather the k copies of every
  // token into expert order and back (read + write k x hidden x 2 B per token).
  const double permute_bytes = 2 * tok * k * h * model::kBf16Bytes;
  const double topk_bytes = 2 * tok * m.moe.experts * model::kFp32Bytes;
  // Megatron's TopKRouter: softmax and top-k as eager kernels over the fp32 logits.
  Ops x = entry;
  if (!c.backward) {
    x = c.gemm("moe_router", tok, m.moe.experts, h, x);
    x = c.memory("moe_router_topk", {{"router_softmax_topk", model::MemClass::EagerSoftmax, topk_bytes, 1}}, x);
    x = c.memory("moe_permute", {{"permute", model::MemClass::Copy, permute_bytes, 1}}, x);
    x = all_to_all(c, 0, x);
    x = expert_tp_coll(c, CollOp::AllGather, "moe_expert_tp_allgather", tokens_recv, x);
    x = expert_ops(c, 0, x);
    x = expert_ops(c, 1, x);
    x = expert_ops(c, 2, x);
    x = expert_tp_coll(c, CollOp::ReduceScatter, "moe_expert_tp_reducescatter", tokens_recv, x);
    x = all_to_all(c, 1, x);
    x = c.memory("moe_unpermute", {{"unpermute", model::MemClass::Copy, permute_bytes, 1}}, x);
    x = shared_experts(c, x);
  } else {
    x = shared_experts(c, x);
    x = c.memory("moe_unpermute_bwd", {{"unpermute_bwd", model::MemClass::Copy, permute_bytes, 1}}, x);
    x = all_to_all(c, 1, x);
    x = expert_tp_coll(c, CollOp::AllGather, "moe_expert_tp_allgather", tokens_recv, x);
    x = expert_ops(c, 2, x);
    x = expert_ops(c, 1, x);
    x = expert_ops(c, 0, x);
    x = expert_tp_coll(c, CollOp::ReduceScatter, "moe_expert_tp_reducescatter", tokens_recv, x);
    x = all_to_all(c, 0, x);
    x = c.memory("moe_permute_bwd", {{"permute_bwd", model::MemClass::Copy, permute_bytes, 1}}, x);
    x = c.memory("moe_router_topk_bwd", {{"router_softmax_topk_bwd", model::MemClass::EagerSoftmaxBwd, topk_bytes, 1}}, x);
    x = c.gemm("moe_router_bwd", tok, m.moe.experts, h, x);
  }
  return x;
}

double stage_expert_params(const scenario::Scenario& sc, const std::vector<int>& owned_layers) {
  double held = 0;
  for (int l : owned_layers)
    held += model::layer_expert_params(sc.model, l) / (static_cast<double>(sc.parallel.ep) * sc.parallel.expert_tp);
  return held;
}

std::vector<GradBuckets> expert_grad_buckets(const scenario::Scenario& sc, const Mesh& mesh, int stage,
                                             const std::vector<int>& owned_layers) {
  const auto& p = sc.parallel;
  std::vector<GradBuckets> out;
  const int edp = model::expert_dp(p);
  if (!(stage_expert_params(sc, owned_layers) > 0) || edp == 1) return out;
  // Expert-DP groups: the ranks with the same EP index in every EP group (and the same TP index
  // when expert_tp > 1). Enumerate them from EP group 0's members.
  const int key_tps = p.expert_tp == 1 ? 1 : p.tp;
  for (int kt = 0; kt < key_tps; ++kt) {
    for (int j = 0; j < p.ep; ++j) {
      GradBuckets b;
      for (int grp = 0; grp < edp; ++grp) {
        // rank with EP index j in EP group grp: shift the flat index by grp x ep
        const int64_t f = static_cast<int64_t>(grp) * p.ep + j;
        int t = kt, c, d;
        if (p.expert_tp == 1) {
          t = static_cast<int>(f % p.tp);
          c = static_cast<int>((f / p.tp) % p.cp);
          d = static_cast<int>(f / p.tp / p.cp);
        } else {
          c = static_cast<int>(f % p.cp);
          d = static_cast<int>(f / p.cp);
        }
        b.members.push_back(mesh.rank_of({t, c, stage, d}));
      }
      b.layers = owned_layers;
      b.bytes = [&sc](int l) {
        return model::layer_expert_params(sc.model, l) / (static_cast<double>(sc.parallel.ep) * sc.parallel.expert_tp) *
               model::grad_reduce_bytes(sc.parallel);
      };
      b.bucket_bytes = model::dp_bucket_bytes(p, stage);
      b.reduce_scatter = p.zero_stage >= 1;
      b.name = p.zero_stage >= 1 ? "expert_dp_reducescatter_grads" : "expert_dp_allreduce_grads";
      out.push_back(std::move(b));
    }
  }
  return out;
}

}  // namespace cpsim::schedule
