// Linear-attention (Gated DeltaNet) layers under context parallelism: a fixed-size state moves
// between ranks instead of K,V. Delta-rule updates multiply the incoming state by a
// token-dependent transition, so each rank also ships its cumulative transition: one all-gather
// of (state, transition) (FLA's KCP) replaces the naive relay of N-1 dependent hops. The short
// convolution needs (width - 1) tokens of halo from the previous rank.
// The kernels are the ones flash-linear-attention's CP runs (fla/ops/gated_delta_rule/chunk.py
// with a cp_context, fla/ops/cp/chunk_delta_h.py; FLA README "Context Parallel of Linear
// Attention"): each rank runs the local kernels (forward: gate cumsum, KK^T / solve_tril / W,U;
// backward: W,U and h recomputed, dv_local), then the CP pre-process kernel, a second walk over
// its chunks from a zero state giving its end state (dh backward) and transition, the
// all-gather, the merge of the preceding ranks' pairs, and then the state recurrence over every
// local chunk from the merged initial state with the output (forward: chunk_fwd_h, chunk_fwd_o;
// backward: chunk_bwd_dhu, dq/dk/dw, the WY backward). There is no separate correction GEMM:
// the incoming state enters through the recurrence's initial state, and its cost is the
// pre-process walk, the exchange and the merge. (Megatron-Core's GDN CP is the head-split
// all-to-all instead, tensor_a2a_cp2hp / hp2cp in megatron/core/ssm/gated_delta_net:
// linear_attention_a2a.cpp.)
#include <algorithm>

#include "model/host_ops.hpp"
#include "model/transformer.hpp"
#include "schedule/attention.hpp"
#include "schedule/collectives.hpp"
#include "schedule/host_lane.hpp"

namespace cpsim::schedule {

namespace {

struct LinearGeometry {
  int heads_v, heads_k, dk, dv, conv_width;
  double state_bytes;       ///< fp32 state of all local heads: H_v x d_k x d_v x 4
  double transition_bytes;  ///< fp32 cumulative transition: H_v x d_k x d_k x 4
  double conv_channels;     ///< q, k, v channels convolved
};

LinearGeometry linear_geometry(const AttentionCtx& ctx) {
  const auto& m = ctx.sc.model;
  const int tp = ctx.sc.parallel.tp;
  LinearGeometry lg{};
  lg.heads_v = std::max(1, m.linear_heads_v / tp);
  lg.heads_k = std::max(1, m.linear_heads_k / tp);
  lg.dk = m.linear_key_dim;
  lg.dv = m.linear_value_dim;
  lg.conv_width = m.linear_conv_width;
  lg.state_bytes = static_cast<double>(lg.heads_v) * lg.dk * lg.dv * model::kFp32Bytes;
  lg.transition_bytes = static_cast<double>(lg.heads_v) * lg.dk * lg.dk * model::kFp32Bytes;
  lg.conv_channels = 2.0 * lg.heads_k * lg.dk + static_cast<double>(lg.heads_v) * lg.dv;
  return lg;
}

OpLabel p2p(AttentionCtx& ctx, const char* name, const std::string& scheme, Phase phase,
            int step = -1) {
  OpLabel l = make_label(ctx.g, ctx, name, scheme, phase, step);
  l.category = ctx.g.intern("p2p");
  return l;
}

OpId add_gemm(AttentionCtx& ctx, int rank, double m, double n, double k, OpLabel l) {
  const model::Cost c = ctx.pricer.cost().gemm(m, n, k);
  l.category = ctx.g.intern("gemm");
  return ctx.g.add_priced(rank, stream::kCompute, ctx.pricer.time(c, "gemm"), l, c.flops);
}

/// One group of Gated DeltaNet chunk kernels (model::GdnPart) over this rank's slice.
OpId add_gdn(AttentionCtx& ctx, int rank, const LinearGeometry& lg, int64_t local, bool backward,
             model::GdnPart part, const char* name, const std::string& scheme) {
  model::GdnCall call;
  call.seq_len = local;
  call.seqs = ctx.geo.batch;
  call.heads_k = lg.heads_k;
  call.heads_v = lg.heads_v;
  call.key_dim = lg.dk;
  call.value_dim = lg.dv;
  call.chunk = kLinearChunk;
  call.backward = backward;
  call.part = part;
  const model::Cost c = ctx.pricer.cost().gdn(call);
  OpLabel l = make_label(ctx.g, ctx, name, scheme, backward ? Phase::Backward : Phase::Forward);
  l.category = ctx.g.intern("linear-attention");
  return ctx.g.add_priced(rank, stream::kCompute, ctx.pricer.time(c, "linear-attention"), l,
                           c.flops);
}

std::vector<OpId> pass(AttentionCtx& ctx, bool backward, const std::vector<OpId>& entry) {
  TaskGraph& g = ctx.g;
  const int n = static_cast<int>(ctx.group.size());
  if (n > 1 && ctx.sc.parallel.linear == scenario::LinearScheme::AllToAll)
    return linear_a2a_pass(ctx, backward, entry);
  const Phase phase = backward ? Phase::Backward : Phase::Forward;
  const bool relay = ctx.sc.parallel.linear == scenario::LinearScheme::Relay;
  const std::string scheme = relay ? "linear-relay" : "linear-state-allgather";
  const LinearGeometry lg = linear_geometry(ctx);
  const int64_t local = ctx.sc.training.seq_len / n;
  const double batch = ctx.geo.batch;
  const GroupShape comm = group_shape(ctx.topo, ctx.group);  // NCCL's p2p channels per peer
  std::vector<OpId> tail(entry);

  // Halo for the causal short convolution (forward: from the previous rank; backward: the
  // gradient halo goes to the previous rank).
  if (n > 1) {
    const double halo = (lg.conv_width - 1) * lg.conv_channels * model::kBf16Bytes * batch;
    std::vector<OpId> arrived(n, kNoOp);
    for (int i = 0; i < n; ++i) {
      const int peer = backward ? i - 1 : i + 1;
      if (peer < 0 || peer >= n) continue;
      arrived[peer] = add_p2p(g, ctx.topo, ctx.group[i], ctx.group[peer], halo,
                              p2p(ctx, "conv_halo_p2p", scheme, phase), entry[i], stream::kCpSend,
                              stream::kCpRecv, &comm);
    }
    for (int i = 0; i < n; ++i) tail[i] = arrived[i] == kNoOp ? entry[i] : arrived[i];
  }
  std::vector<OpId> summary(n);
  for (int i = 0; i < n; ++i) {
    const int rank = ctx.group[i];
    // FLA's causal_conv1d: one fused Triton kernel each way.
    const OpId conv = add_memory_op(ctx, rank, 2.0 * local * lg.conv_channels * model::kBf16Bytes * batch,
                                    backward ? model::MemClass::FusedBwd : model::MemClass::FusedFwd,
                                    make_label(g, ctx, "short_conv", scheme, phase));
    g.add_edge(tail[i], conv);
    g.add_edge(entry[i], conv);
    if (n == 1) {
      summary[i] = add_gdn(ctx, rank, lg, local, backward, model::GdnPart::Whole,
                           backward ? "gdn_chunk_bwd" : "gdn_chunk_fwd", scheme);
      g.add_edge(conv, summary[i]);
      continue;
    }
    // The local kernels, then the pre-process walk: this rank's end state (dh) and transition.
    const OpId pre = add_gdn(ctx, rank, lg, local, backward, model::GdnPart::Local,
                             backward ? "gdn_local_bwd" : "gdn_local_fwd", scheme);
    g.add_edge(conv, pre);
    summary[i] = add_gdn(ctx, rank, lg, local, backward, model::GdnPart::CpPreprocess,
                         backward ? "gdn_cp_preprocess_bwd" : "gdn_cp_preprocess_fwd", scheme);
    g.add_edge(pre, summary[i]);
  }
  if (n == 1) return summary;

  std::vector<OpId> incoming(n, kNoOp);  // op after which the preceding ranks' state is known
  if (relay) {
    // Rank r waits for rank r-1's state, folds its own transition in, passes it on
    // (backward: the gradient state travels from the last rank to the first).
    OpId prev = kNoOp;
    for (int k = 0; k < n; ++k) {
      const int i = backward ? n - 1 - k : k;
      const int rank = ctx.group[i];
      OpId ready = summary[i];
      if (prev != kNoOp) {
        const OpId fold = add_gemm(ctx, rank, lg.dk, lg.dv * lg.heads_v * batch, lg.dk,
                                   make_label(g, ctx, "state_fold", scheme, phase, k));
        g.add_edge(prev, fold);
        g.add_edge(summary[i], fold);
        incoming[i] = fold;
        ready = fold;
      }
      if (k + 1 < n) {
        const int next = backward ? i - 1 : i + 1;
        prev = add_p2p(g, ctx.topo, rank, ctx.group[next], lg.state_bytes * batch,
                       p2p(ctx, "state_relay_p2p", scheme, phase, k), ready, stream::kCpSend,
                       stream::kCpRecv, &comm);
      }
    }
  } else {
    CollectiveRequest req;
    req.op = CollOp::AllGather;
    req.ranks = ctx.group;
    req.bytes = (lg.state_bytes + lg.transition_bytes) * n * batch;
    req.label = make_label(g, ctx, "state_allgather", scheme, phase);
    req.label.category = g.intern("collective");
    req.deps = summary;
    const auto done = add_collective(g, ctx.topo, req).done;
    for (int i = 0; i < n; ++i) {
      // merge_fwd_bwd_kernel: fold the preceding ranks' (transition, state) pairs, one
      // K x K by K x V product per preceding rank and head.
      incoming[i] = done[i];
      const int preceding = backward ? n - 1 - i : i;
      if (preceding == 0) continue;
      const OpId fold = add_gemm(ctx, ctx.group[i], lg.dk, lg.dv * lg.heads_v * batch,
                                 static_cast<double>(lg.dk) * preceding,
                                 make_label(g, ctx, "state_fold", scheme, phase));
      g.add_edge(done[i], fold);
      incoming[i] = fold;
    }
  }
  // The recurrence over every local chunk from the incoming state, and the outputs (gradients).
  std::vector<OpId> out(n);
  for (int i = 0; i < n; ++i) {
    out[i] = add_gdn(ctx, ctx.group[i], lg, local, backward, model::GdnPart::Recurrence,
                     backward ? "gdn_recurrence_bwd" : "gdn_recurrence_fwd", scheme);
    g.add_edge(summary[i], out[i]);
    if (incoming[i] != kNoOp) g.add_edge(incoming[i], out[i]);
  }
  return out;
}

/// The layer pass with its host ops (model/host_ops.hpp gdn_layer_host_ops) on each rank's host
/// lane, as attention.cpp places a softmax layer's: those issued up to FLA's chunk call before
/// the mixer's first kernel, which waits for them; the rest after. Under CUDA graphs the pass
/// is one graph launch; a platform naming ops_per_attention adds nothing here.
std::vector<OpId> layer_pass(AttentionCtx& ctx, bool backward, const std::vector<OpId>& entry) {
  const scenario::RuntimeSpec& rt = ctx.sc.platform.runtime;
  const auto first = static_cast<OpId>(ctx.g.size());
  std::vector<OpId> out = pass(ctx, backward, entry);
  if (rt.ops_per_attention >= 0) return out;
  model::LayerWidths w;
  w.tokens = w.hidden = w.ffn = w.q = w.kv = 1;
  const model::LayerHostOps ops = model::gdn_layer_host_ops(ctx.sc.training.stack, backward, w);
  model::HostLoad before = ops.before;
  before += ops.attention;
  const Phase ph = backward ? Phase::Backward : Phase::Forward;
  OpLabel l = make_label(ctx.g, ctx, "host_ops_before_linear_attention", "host", ph);
  l.category = ctx.g.intern("overhead");
  const double before_s = model::host_seconds(before, rt) + model::graph_launch_seconds(rt);
  for (const int rank : ctx.group) add_region_host(ctx.g, rank, before_s, l, first);
  l.name = ctx.g.intern("host_ops_after_linear_attention");
  const double after_s = model::host_seconds(ops.after, rt);
  if (after_s > 0)
    for (const int rank : ctx.group) ctx.g.add_compute(rank, stream::kHost, after_s, l);
  return out;
}

}  // namespace

std::vector<OpId> linear_attention_forward(AttentionCtx& ctx, const std::vector<OpId>& entry) {
  return layer_pass(ctx, false, entry);
}

std::vector<OpId> linear_attention_backward(AttentionCtx& ctx, const std::vector<OpId>& entry) {
  return layer_pass(ctx, true, entry);
}

}  // namespace cpsim::schedule
