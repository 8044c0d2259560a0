// Ulysses (DeepSpeed, TE "a2a"): all-to-all turns "my tokens, all heads" into "all tokens, my
// heads"; attention runs locally per head; a second all-to-all returns the output. USP nests a
// ring (over the other mesh dimension) inside the Ulysses groups.
#include <stdexcept>
#include <string>

#include "model/transformer.hpp"
#include "schedule/attention.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::schedule {

namespace {

struct UlyssesShape {
  AttnGeometry after;      ///< heads per rank after the all-to-all
  double q_bytes = 0;      ///< bytes each rank sends in total (nccl-tests all-to-all size)
  double kv_bytes = 0;     ///< for K and for V each
};

UlyssesShape ulysses_shape(const AttnGeometry& geo, int64_t local_tokens, int u,
                           bool replicate) {
  if (geo.heads_q % u != 0)
    throw std::invalid_argument("Ulysses degree " + std::to_string(u) +
                                " does not divide the " + std::to_string(geo.heads_q) +
                                " query heads per tensor-parallel rank");
  UlyssesShape s;
  s.after = geo;
  s.after.heads_q = geo.heads_q / u;
  const double tok = static_cast<double>(local_tokens) * geo.batch;
  s.q_bytes = tok * geo.heads_q * geo.head_dim * model::kBf16Bytes;
  if (geo.heads_kv % u == 0) {
    s.after.heads_kv = geo.heads_kv / u;
    s.kv_bytes = tok * geo.heads_kv * geo.head_dim * model::kBf16Bytes;
  } else if (replicate) {
    // Each rank needs the one KV head its query heads read, for all tokens: every rank sends
    // its tokens of that head to every rank that needs it.
    s.after.heads_kv = 1;
    s.kv_bytes = tok * u * geo.head_dim * model::kBf16Bytes;
  } else {
    throw std::invalid_argument("Ulysses degree " + std::to_string(u) + " does not divide the " +
                                std::to_string(geo.heads_kv) +
                                " KV heads per rank and replicate_kv_heads is false");
  }
  return s;
}

/// One all-to-all over `ranks` after `deps`; returns per-rank done ops.
std::vector<OpId> a2a(AttentionCtx& ctx, const std::vector<int>& ranks, double bytes,
                      const char* name, const std::string& scheme, Phase phase,
                      const std::vector<OpId>& deps) {
  CollectiveRequest req;
  req.op = CollOp::AllToAll;
  req.ranks = ranks;
  req.bytes = bytes;
  req.label = make_label(ctx.g, ctx, name, scheme, phase);
  req.label.category = ctx.g.intern("collective");
  req.deps = deps;
  return add_collective(ctx.g, ctx.topo, req).done;
}

/// The all-to-alls before attention: Q, K, V forward; dO backward.
std::vector<OpId> scatter_heads(AttentionCtx& ctx, const std::vector<int>& ranks,
                                const UlyssesShape& sh, bool backward, const std::string& scheme,
                                const std::vector<OpId>& deps) {
  const Phase phase = backward ? Phase::Backward : Phase::Forward;
  if (backward) return a2a(ctx, ranks, sh.q_bytes, "a2a_dout", scheme, phase, deps);
  auto q = a2a(ctx, ranks, sh.q_bytes, "a2a_q", scheme, phase, deps);
  auto k = a2a(ctx, ranks, sh.kv_bytes, "a2a_k", scheme, phase, deps);
  auto v = a2a(ctx, ranks, sh.kv_bytes, "a2a_v", scheme, phase, deps);
  // The receive stream runs them in order, so V's completion implies Q's and K's.
  for (size_t i = 0; i < v.size(); ++i) {
    ctx.g.add_edge(q[i], v[i]);
    ctx.g.add_edge(k[i], v[i]);
  }
  return v;
}

/// The all-to-alls after attention: O forward; dQ, dK, dV backward.
std::vector<OpId> gather_heads(AttentionCtx& ctx, const std::vector<int>& ranks,
                               const UlyssesShape& sh, bool backward, const std::string& scheme,
                               const std::vector<OpId>& deps) {
  const Phase phase = backward ? Phase::Backward : Phase::Forward;
  if (!backward) return a2a(ctx, ranks, sh.q_bytes, "a2a_out", scheme, phase, deps);
  auto dq = a2a(ctx, ranks, sh.q_bytes, "a2a_dq", scheme, phase, deps);
  auto dk = a2a(ctx, ranks, sh.kv_bytes, "a2a_dk", scheme, phase, deps);
  auto dv = a2a(ctx, ranks, sh.kv_bytes, "a2a_dv", scheme, phase, deps);
  for (size_t i = 0; i < dv.size(); ++i) {
    ctx.g.add_edge(dq[i], dv[i]);
    ctx.g.add_edge(dk[i], dv[i]);
  }
  return dv;
}

}  // namespace

std::vector<OpId> ulysses_pass(AttentionCtx& ctx, bool backward, const std::vector<OpId>& entry) {
  const int n = static_cast<int>(ctx.group.size());
  const std::string scheme = scheme_name(ctx.sc.parallel.attention);
  const int64_t local = ctx.sc.training.seq_len / n;
  const UlyssesShape sh =
      ulysses_shape(ctx.geo, local, n, ctx.sc.parallel.attention.replicate_kv_heads);
  const auto before = scatter_heads(ctx, ctx.group, sh, backward, scheme, entry);
  const Partition whole =
      make_partition(ctx.sc.training.seq_len, 1, scenario::Layout::Contiguous);
  const BlockWork w = block_work(whole.chunks[0], whole.chunks[0], ctx.docs);
  std::vector<OpId> kernels(n, kNoOp);
  const Phase phase = backward ? Phase::Backward : Phase::Forward;
  for (int i = 0; i < n; ++i) {
    const OpId k = add_attention_kernel(ctx, ctx.group[i], w, sh.after, backward,
                                        make_label(ctx.g, ctx, backward ? "attn_bwd" : "attn_fwd",
                                                   scheme, phase));
    ctx.g.add_edge(before[i], k);
    kernels[i] = k == kNoOp ? before[i] : k;
  }
  return gather_heads(ctx, ctx.group, sh, backward, scheme, kernels);
}

std::vector<OpId> usp_pass(AttentionCtx& ctx, bool backward, const std::vector<OpId>& entry) {
  const auto& a = ctx.sc.parallel.attention;
  const int n = static_cast<int>(ctx.group.size());
  const int u = a.ulysses_degree;
  if (u < 1 || n % u != 0)
    throw std::invalid_argument("USP Ulysses degree " + std::to_string(u) +
                                " must divide the context-parallel degree " + std::to_string(n));
  const int r = n / u;
  const std::string scheme = scheme_name(a);
  const bool intra = a.ulysses_placement == scenario::UlyssesPlacement::IntraNode;
  // Position in ctx.group of member j of Ulysses group k, and of ring group members.
  auto pos = [&](int ulysses_group, int member) {
    return intra ? ulysses_group * u + member : member * r + ulysses_group;
  };
  const int64_t local = ctx.sc.training.seq_len / n;
  const UlyssesShape sh = ulysses_shape(ctx.geo, local, u, a.replicate_kv_heads);

  std::vector<OpId> before(n, kNoOp);
  for (int k = 0; k < r; ++k) {
    std::vector<int> ranks;
    std::vector<OpId> deps;
    for (int j = 0; j < u; ++j) {
      ranks.push_back(ctx.group[pos(k, j)]);
      deps.push_back(entry[pos(k, j)]);
    }
    const auto done = scatter_heads(ctx, ranks, sh, backward, scheme, deps);
    for (int j = 0; j < u; ++j) before[pos(k, j)] = done[j];
  }
  // Ring over the members with the same index in every Ulysses group.
  const Partition ring_part = cp_partition(ctx.sc, ctx.docs, r);
  std::vector<OpId> ring_done(n, kNoOp);
  for (int j = 0; j < u; ++j) {
    AttentionCtx sub = ctx;
    sub.group.clear();
    std::vector<OpId> deps;
    for (int k = 0; k < r; ++k) {
      sub.group.push_back(ctx.group[pos(k, j)]);
      deps.push_back(before[pos(k, j)]);
    }
    sub.geo = sh.after;
    const auto done = r == 1 ? deps : ring_pass(sub, ring_part, backward, deps, scheme);
    if (r == 1) {
      // A ring of one: the whole sequence is local after the all-to-all.
      const BlockWork w = block_work(ring_part.chunks[0], ring_part.chunks[0], ctx.docs);
      const OpId kop = add_attention_kernel(
          ctx, sub.group[0], w, sh.after, backward,
          make_label(ctx.g, ctx, backward ? "attn_bwd" : "attn_fwd", scheme,
                     backward ? Phase::Backward : Phase::Forward));
      ctx.g.add_edge(deps[0], kop);
      ring_done[pos(0, j)] = kop == kNoOp ? deps[0] : kop;
      continue;
    }
    for (int k = 0; k < r; ++k) ring_done[pos(k, j)] = done[k];
  }
  std::vector<OpId> out(n, kNoOp);
  for (int k = 0; k < r; ++k) {
    std::vector<int> ranks;
    std::vector<OpId> deps;
    for (int j = 0; j < u; ++j) {
      ranks.push_back(ctx.group[pos(k, j)]);
      deps.push_back(ring_done[pos(k, j)]);
    }
    const auto done = gather_heads(ctx, ranks, sh, backward, scheme, deps);
    for (int j = 0; j < u; ++j) out[pos(k, j)] = done[j];
  }
  return out;
}

}  // namespace cpsim::schedule
