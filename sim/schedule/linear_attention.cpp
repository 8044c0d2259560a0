// Linear-attention (Gated DeltaNet) layers under context parallelism: a fixed-size state moves
// between ranks instead of K,V. Delta-rule updates multiply the incoming state by a
// token-dependent transition, so each rank also ships its cumulative transition: one all-gather
// of (state, transition) (FLA's KCP) replaces the naive relay of N-1 dependent hops. The short
// convolution needs (width - 1) tokens of halo from the previous rank.
#include <algorithm>

#include "model/transformer.hpp"
#include "schedule/attention.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::schedule {

namespace {

constexpr int kChunk = 64;  // chunk size of the chunkwise delta-rule kernels (FLA default)

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
  return ctx.g.add_compute(rank, stream::kCompute, ctx.pricer.time(rank, c, "gemm"), l, c.flops);
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
                              p2p(ctx, "conv_halo_p2p", scheme, phase), entry[i]);
    }
    for (int i = 0; i < n; ++i) tail[i] = arrived[i] == kNoOp ? entry[i] : arrived[i];
  }
  std::vector<OpId> local_done(n), summary(n);
  for (int i = 0; i < n; ++i) {
    const int rank = ctx.group[i];
    const OpId conv = add_memory_op(ctx, rank, 2.0 * local * lg.conv_channels * model::kBf16Bytes * batch,
                                    make_label(g, ctx, "short_conv", scheme, phase));
    g.add_edge(tail[i], conv);
    g.add_edge(entry[i], conv);
    // The chunk kernel with a zero initial state: intra-chunk outputs plus this rank's end
    // state and cumulative transition.
    const model::Cost c = ctx.pricer.cost().linear_attention(local * ctx.geo.batch, lg.heads_v,
                                                             lg.dk, lg.dv, kChunk, backward);
    OpLabel l = make_label(g, ctx, backward ? "gdn_chunk_bwd" : "gdn_chunk_fwd", scheme, phase);
    l.category = g.intern("linear-attention");
    summary[i] = g.add_compute(rank, stream::kCompute, ctx.pricer.time(rank, c, "linear-attention"),
                               l, c.flops);
    local_done[i] = summary[i];
  }
  if (n == 1) return local_done;

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
        incoming[i] = prev;
        const OpId fold = add_gemm(ctx, rank, lg.dk, lg.dv * lg.heads_v, lg.dk,
                                   make_label(g, ctx, "state_fold", scheme, phase, k));
        g.add_edge(prev, fold);
        g.add_edge(summary[i], fold);
        ready = fold;
      }
      if (k + 1 < n) {
        const int next = backward ? i - 1 : i + 1;
        prev = add_p2p(g, ctx.topo, rank, ctx.group[next], lg.state_bytes * batch,
                       p2p(ctx, "state_relay_p2p", scheme, phase, k), ready);
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
      // Fold the preceding ranks' (state, transition) summaries: i small matmuls.
      const int preceding = backward ? n - 1 - i : i;
      if (preceding == 0) continue;
      const OpId fold = add_gemm(ctx, ctx.group[i], lg.dk, lg.dv * lg.heads_v,
                                 static_cast<double>(lg.dk) * preceding,
                                 make_label(g, ctx, "state_fold", scheme, phase));
      g.add_edge(done[i], fold);
      incoming[i] = fold;
    }
  }
  // Correct the local outputs (or gradients) with the incoming state: Q_local x S_in per head.
  std::vector<OpId> out(n);
  for (int i = 0; i < n; ++i) {
    if (incoming[i] == kNoOp) {
      out[i] = local_done[i];
      continue;
    }
    const OpId corr = add_gemm(ctx, ctx.group[i], static_cast<double>(local) * batch,
                               static_cast<double>(lg.dv) * lg.heads_v, lg.dk,
                               make_label(g, ctx, "state_correction", scheme, phase));
    g.add_edge(incoming[i], corr);
    g.add_edge(local_done[i], corr);
    out[i] = corr;
  }
  return out;
}

}  // namespace

std::vector<OpId> linear_attention_forward(AttentionCtx& ctx, const std::vector<OpId>& entry) {
  return pass(ctx, false, entry);
}

std::vector<OpId> linear_attention_backward(AttentionCtx& ctx, const std::vector<OpId>& entry) {
  return pass(ctx, true, entry);
}

}  // namespace cpsim::schedule
