// All-gather context parallelism (Llama 3, TE "all_gather"): K,V all-gathered before the
// kernels (exposed), each query chunk computes against only the key prefix it needs; backward
// re-gathers K,V and reduce-scatters dK,dV.
#include <algorithm>

#include "model/transformer.hpp"
#include "schedule/attention.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::schedule {

std::vector<OpId> allgather_pass(AttentionCtx& ctx, const Partition& part, bool backward,
                                 const std::vector<OpId>& entry) {
  TaskGraph& g = ctx.g;
  const int n = static_cast<int>(ctx.group.size());
  const Phase phase = backward ? Phase::Backward : Phase::Forward;
  const std::string scheme = scheme_name(ctx.sc.parallel.attention);
  const auto& geo = ctx.geo;
  const double kv_rank = model::kv_block_bytes(part.tokens_of(0), geo.heads_kv, geo.head_dim) *
                         geo.batch;

  // A sliding window needs only the window before each chunk: the gather moves the K,V of
  // min(s, local + chunks x window) tokens per rank instead of all s (rank 0's chunks stand for
  // all; a windowed all-gather as a collective of that size).
  const bool sliding = ctx.docs.mask == scenario::AttentionMask::SlidingWindow;
  double window_tokens = static_cast<double>(part.seq_len);
  if (sliding)
    window_tokens = std::min(window_tokens, static_cast<double>(part.tokens_of(0)) +
                                      static_cast<double>(part.chunks[0].size()) * ctx.docs.window);
  const double gathered_fraction = window_tokens / static_cast<double>(part.seq_len);

  CollectiveRequest ag;
  ag.op = CollOp::AllGather;
  ag.ranks = ctx.group;
  ag.bytes = kv_rank * n * gathered_fraction;
  ag.label = make_label(g, ctx, "allgather_kv", scheme, phase);
  ag.label.category = g.intern("collective");
  ag.deps = entry;
  const CollectiveResult gathered = add_collective(g, ctx.topo, ag);

  std::vector<OpId> tail(n, kNoOp);
  for (int i = 0; i < n; ++i) {
    tail[i] = gathered.done[i];
    int c = 0;
    for (const TokenRun& q : part.chunks[i]) {
      // Keys needed: from the start of the document holding the chunk's first query to its
      // last query (causal), taken from the gathered full-sequence K,V.
      const int64_t q_first = q.begin;
      const int64_t q_last = q.begin + (q.count - 1) * q.stride + q.length;
      int64_t kv_begin = 0, kv_end = q_last;
      for (int64_t s : ctx.docs.starts)
        if (s <= q_first) kv_begin = s;
      if (sliding) kv_begin = std::max(kv_begin, q_first - ctx.docs.window + 1);
      if (ctx.docs.mask == scenario::AttentionMask::Full) {  // to the end of the last document
        kv_end = part.seq_len;
        for (int64_t s : ctx.docs.starts)
          if (s >= q_last) {
            kv_end = s;
            break;
          }
      }
      TokenRun kv{kv_begin, kv_end - kv_begin, 0, 1};
      const BlockWork w = block_work({q}, {kv}, ctx.docs);
      OpLabel l = make_label(g, ctx, backward ? "attn_bwd" : "attn_fwd", scheme, phase);
      l.chunk_q = c++;
      const OpId k = add_attention_kernel(ctx, ctx.group[i], w, geo, backward, l);
      if (k == kNoOp) continue;
      g.add_edge(gathered.done[i], k);
      tail[i] = k;
    }
  }
  if (!backward) return tail;

  CollectiveRequest rs;
  rs.op = CollOp::ReduceScatter;
  rs.ranks = ctx.group;
  rs.bytes = kv_rank * n * gathered_fraction * (ctx.sc.parallel.attention.dkv_fp32 ? 2.0 : 1.0);
  rs.label = make_label(g, ctx, "reducescatter_dkv", scheme, phase);
  rs.label.category = g.intern("collective");
  rs.deps = tail;
  return add_collective(g, ctx.topo, rs).done;
}

}  // namespace cpsim::schedule
