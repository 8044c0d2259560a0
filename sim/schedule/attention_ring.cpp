// Ring attention (p2p context parallelism): Q stays, K,V blocks travel the ring in N-1 steps,
// each step's transfer double-buffered behind the current block's kernel; backward sends K,V
// around again and the dK,dV partial sums travel N hops back to their owner.
#include <algorithm>

#include "model/transformer.hpp"
#include "schedule/attention.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::schedule {

namespace {
OpLabel p2p_label(AttentionCtx& ctx, const char* name, const std::string& scheme, Phase phase,
                  int step) {
  OpLabel l = make_label(ctx.g, ctx, name, scheme, phase, step);
  l.category = ctx.g.intern("p2p");
  return l;
}
}  // namespace

std::vector<OpId> ring_pass(AttentionCtx& ctx, const Partition& part, bool backward,
                            const std::vector<OpId>& entry, const std::string& scheme) {
  TaskGraph& g = ctx.g;
  const int n = static_cast<int>(ctx.group.size());
  const Phase phase = backward ? Phase::Backward : Phase::Forward;
  const auto& geo = ctx.geo;
  const double kv_bytes =
      model::kv_block_bytes(part.tokens_of(0), geo.heads_kv, geo.head_dim) * geo.batch;
  const double dkv_bytes = kv_bytes * (ctx.sc.parallel.attention.dkv_fp32 ? 2.0 : 1.0);
  // Online-softmax merge: read the running fp32 output and LSE and the step's partial, write
  // the result.
  const double merge_bytes = 3.0 * static_cast<double>(part.tokens_of(0)) * geo.heads_q *
                             (geo.head_dim + 1) * model::kFp32Bytes * geo.batch;

  std::vector<OpId> kv_recv(n, kNoOp);        // K,V block that arrived for the current step
  std::vector<OpId> prev_kernel(n, kNoOp);    // kernel of the previous step
  std::vector<OpId> dkv_recv(n, kNoOp);       // backward: dK,dV partial that arrived
  std::vector<OpId> dkv_accum(n, kNoOp);
  std::vector<OpId> tail(entry);              // newest op on each rank's compute path

  for (int t = 0; t < n; ++t) {
    std::vector<OpId> kernel_at(n, kNoOp);
    for (int i = 0; i < n; ++i) {
      const int src = (i - t + n) % n;
      const int rank = ctx.group[i];
      const BlockWork w = block_work(part.chunks[i], part.chunks[src], ctx.docs);
      OpLabel l = make_label(g, ctx, backward ? "attn_bwd" : "attn_fwd", scheme, phase, t);
      l.chunk_q = i;
      l.chunk_kv = src;
      const OpId k = add_attention_kernel(ctx, rank, w, geo, backward, l);
      if (k != kNoOp) {
        g.add_edge(t == 0 ? entry[i] : kv_recv[i], k);
        kernel_at[i] = k;
        tail[i] = k;
        if (!backward && t > 0) {
          const OpId m = add_memory_op(ctx, rank, merge_bytes,
                                       make_label(g, ctx, "softmax_merge", scheme, phase, t));
          tail[i] = m;
        }
      }
    }
    if (backward) {
      // Accumulate the arriving dK,dV partial into this step's block gradient and pass it on;
      // after N hops it is back at the owner of the block.
      std::vector<OpId> sent(n, kNoOp);
      for (int i = 0; i < n; ++i) {
        const int rank = ctx.group[i];
        OpId ready = kernel_at[i] != kNoOp ? kernel_at[i] : (t == 0 ? entry[i] : kNoOp);
        if (t > 0) {
          const OpId acc = add_memory_op(ctx, rank, 3.0 * dkv_bytes,
                                         make_label(g, ctx, "dkv_accumulate", scheme, phase, t));
          g.add_edge(dkv_recv[i], acc);
          g.add_edge(ready, acc);
          dkv_accum[i] = acc;
          ready = acc;
          tail[i] = acc;
        }
        const int dst = (i + 1) % n;
        // Its own streams: a KV prefetch must not queue behind a gradient that waits for the
        // current kernel (ring implementations use separate communicators for the two).
        const OpId x = add_p2p(g, ctx.topo, rank, ctx.group[dst], dkv_bytes,
                               p2p_label(ctx, "dkv_p2p", scheme, phase, t), ready,
                               stream::kCpGradSend, stream::kCpGradRecv);
        g.add_edge(dkv_accum[dst], x);  // the receiver's previous partial has been consumed
        sent[dst] = x;
      }
      dkv_recv = sent;
    }
    if (t == n - 1) break;
    // Send the block each rank holds now to its successor while the kernels run.
    std::vector<OpId> next(n, kNoOp);
    for (int i = 0; i < n; ++i) {
      const int dst = (i + 1) % n;
      const OpId x = add_p2p(g, ctx.topo, ctx.group[i], ctx.group[dst], kv_bytes,
                             p2p_label(ctx, "kv_p2p", scheme, phase, t),
                             t == 0 ? entry[i] : kv_recv[i]);
      // Double buffering: the receiver's buffer for step t+1 held the block of step t-1.
      g.add_edge(prev_kernel[dst], x);
      next[dst] = x;
    }
    for (int i = 0; i < n; ++i)
      if (kernel_at[i] != kNoOp) prev_kernel[i] = kernel_at[i];
    kv_recv = next;
  }
  if (backward) {
    // The final hop delivered each block's full dK,dV to its owner: add the owner's own part.
    for (int i = 0; i < n; ++i) {
      const OpId fin = add_memory_op(ctx, ctx.group[i], 3.0 * dkv_bytes,
                                     make_label(g, ctx, "dkv_final", scheme, phase, n));
      g.add_edge(dkv_recv[i], fin);
      tail[i] = fin;
    }
  }
  return tail;
}

}  // namespace cpsim::schedule
