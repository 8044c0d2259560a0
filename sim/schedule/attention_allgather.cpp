// All-gather context parallelism (Llama 3, TE "all_gather"): K,V all-gathered before the
// kernels (exposed), each query chunk computes against only the key prefix it needs; backward
// re-gathers K,V and reduce-scatters dK,dV.
#include <algorithm>

#include "model/transformer.hpp"
#include "schedule/attention.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::schedule {

namespace {

/// Start of the document holding position x.
int64_t document_start(const Documents& docs, int64_t x) {
  int64_t b = 0;
  for (int64_t s : docs.starts)
    if (s <= x) b = s;
  return b;
}

/// A contiguous chunk cut at the first document start inside it (at most two runs); a strided
/// chunk whole.
std::vector<TokenRun> split_at_document(const TokenRun& q, const Documents& docs) {
  if (q.count != 1) return {q};
  for (int64_t s : docs.starts)
    if (s > q.begin && s < q.begin + q.length)
      return {TokenRun{q.begin, s - q.begin, 0, 1}, TokenRun{s, q.begin + q.length - s, 0, 1}};
  return {q};
}

/// The keys queries `q` need from the gathered K,V: from the start of the document holding its
/// first query (a sliding window: from the window before it) to its last query (causal), or to
/// the end of the document holding its last query (full).
TokenRun keys_of(const TokenRun& q, const Documents& docs, int64_t seq_len) {
  const int64_t q_first = q.begin;
  const int64_t q_last = q.begin + (q.count - 1) * q.stride + q.length;
  int64_t kv_begin = document_start(docs, q_first), kv_end = q_last;
  if (docs.mask == scenario::AttentionMask::SlidingWindow)
    kv_begin = std::max(kv_begin, q_first - docs.window + 1);
  if (docs.mask == scenario::AttentionMask::Full) {
    kv_end = seq_len;
    for (int64_t s : docs.starts)
      if (s >= q_last) {
        kv_end = s;
        break;
      }
  }
  return TokenRun{kv_begin, kv_end - kv_begin, 0, 1};
}

}  // namespace

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
    for (const TokenRun& chunk : part.chunks[i]) {
      // Each rank computes its own queries against the gathered K,V of their documents only
      // (Llama 3's all-gather CP with document masks, a varlen call). A contiguous chunk is cut
      // where a document starts inside it: the queries of the document it opens in see that
      // document's keys from its start (a causal block offset by the keys before the chunk),
      // the rest see the documents that start inside the chunk (causal blocks on the diagonal).
      // A strided chunk (striped layout) touches every document: one call over the keys up to
      // its last query, the pairs counted under the document mask.
      for (const TokenRun& q : split_at_document(chunk, ctx.docs)) {
        const BlockWork w = block_work({q}, {keys_of(q, ctx.docs, part.seq_len)}, ctx.docs);
        OpLabel l = make_label(g, ctx, backward ? "attn_bwd" : "attn_fwd", scheme, phase);
        l.chunk_q = c;
        const OpId k = add_attention_kernel(ctx, ctx.group[i], w, geo, backward, l);
        if (k == kNoOp) continue;
        g.add_edge(gathered.done[i], k);
        tail[i] = k;
      }
      ++c;
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
