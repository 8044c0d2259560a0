// Ring attention (p2p context parallelism) and its two-level form, the double ring
// (LoongTrain). Q stays, K,V blocks travel the ring in N-1 steps, each step's transfer
// double-buffered behind the current block's kernel; backward sends K,V around again and the
// dK,dV partial sums travel N hops back to their owner.
//
// The double ring splits the N ranks into outer = N / inner rings of `inner` consecutive ranks;
// rank (o, i) = o * inner + i. At outer step t and inner step k it computes its queries against
// the block of rank ((o - t) mod outer, (i - k) mod inner): blocks circulate in the inner ring
// as in the plain ring, and at the start of each outer step every rank also sends the block it
// starts that step with to (o + 1, i), so the next outer step's block arrives while the whole
// inner ring computes. Backward, K,V travel the same way again; a block's dK,dV partial goes
// round each inner ring the block visits (`inner` hops, back to the rank where the block
// entered it), then one outer hop on to the next inner ring's entry rank, which adds it to its
// own ring's sum one outer step later; after `outer` outer hops the total is at the owner
// (N + outer hops per block where the ring takes N; in both, `outer` of them go from one inner
// ring to the next).
// Four streams keep inner and outer K,V and dK,dV transfers from queueing behind each other.
// The plain ring is the double ring with inner = N.
#include <stdexcept>
#include <string>

#include "model/transformer.hpp"
#include "model/stack_kernels.hpp"
#include "schedule/attention.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::schedule {

namespace {

/// A transfer's label; chunk_kv names the block it carries (K,V, or their dK,dV partial).
OpLabel p2p_label(AttentionCtx& ctx, const char* name, const std::string& scheme, Phase phase,
                  int step, int block) {
  OpLabel l = make_label(ctx.g, ctx, name, scheme, phase, step);
  l.category = ctx.g.intern("p2p");
  l.chunk_kv = block;
  return l;
}

/// Builds one pass of the two-level ring; members are positions in ctx.group.
class TwoLevelRing {
 public:
  TwoLevelRing(AttentionCtx& ctx, const Partition& part, bool backward,
               const std::vector<OpId>& entry, const std::string& scheme, int inner)
      : ctx_(ctx), g_(ctx.g), part_(part), backward_(backward), scheme_(scheme),
        phase_(backward ? Phase::Backward : Phase::Forward),
        n_(static_cast<int>(ctx.group.size())), inner_(inner), outer_(n_ / inner),
        first_kv_(entry), kv_recv_(n_, kNoOp), prev_kernel_(n_, kNoOp), outer_recv_(n_, kNoOp),
        outer_sent_(n_, kNoOp), first_kernel_(n_, kNoOp), first_inner_send_(n_, kNoOp),
        dkv_recv_(n_, kNoOp), dkv_accum_(n_, kNoOp), dkv_outer_recv_(n_, kNoOp), tail_(entry) {
    const auto& geo = ctx.geo;
    const double kv_bf16 = model::kv_block_bytes(part.tokens_of(0), geo.heads_kv, geo.head_dim) * geo.batch;
    // FP8 attention: TE quantizes K and V before the ring (AttnFuncWithCPAndKVP2P, unless
    // NVTE_FP8_DPA_BWD=0), so the ring carries 1-byte K,V; dK,dV keep their precision.
    kv_bytes_ = kv_bf16 * (ctx.sc.training.fp8_attention ? 0.5 : 1.0);
    dkv_bytes_ = kv_bf16 * (ctx.sc.parallel.attention.dkv_fp32 ? 2.0 : 1.0);
    // Online-softmax merge: read the running fp32 output and LSE and the step's partial, write
    // the result.
    merge_tokens_ = static_cast<double>(part.tokens_of(0)) * geo.batch;
    merge_bytes_ = 3.0 * static_cast<double>(part.tokens_of(0)) * geo.heads_q *
                   (geo.head_dim + 1) * model::kFp32Bytes * geo.batch;
    // With one ring, the steps after the last one in which any rank has an unmasked pair (a
    // sliding window narrower than the ring's reach) are skipped with their K,V transfers; the
    // backward then sends each block's dK,dV partial straight home after that step.
    // (Only under a window: with document masks rings keep every step, as implementations do.)
    last_ = inner_ - 1;
    if (outer_ == 1 && ctx.docs.mask == scenario::AttentionMask::SlidingWindow)
      for (; last_ > 0; --last_) {
        bool any = false;
        for (int p = 0; p < n_ && !any; ++p)
          any = count_pairs(part.chunks[p], part.chunks[source(p, 0, last_)], ctx.docs) > 0;
        if (any) break;
      }
  }

  std::vector<OpId> build() {
    for (int t = 0; t < outer_; ++t) {
      if (t + 1 < outer_) send_outer_kv(t);
      for (int k = 0; k <= last_; ++k) {
        // The op after which each rank holds this step's block.
        const std::vector<OpId> have = k == 0 ? first_kv_ : kv_recv_;
        const std::vector<OpId> kernel_at = kernels(t, k, have);
        if (backward_) {
          if (k == 0 && t > 0) send_outer_dkv(t);
          pass_inner_dkv(t, k, kernel_at, have);
        }
        if (k + 1 <= last_) send_inner_kv(t, k, have);
        for (int p = 0; p < n_; ++p)
          if (kernel_at[p] != kNoOp) prev_kernel_[p] = kernel_at[p];
        if (k == 0) first_kernel_ = kernel_at;
      }
      // The next outer step starts with the block that came over the outer ring.
      if (t + 1 < outer_) first_kv_ = outer_recv_;
    }
    if (backward_) {
      // Each rank now holds its inner ring's sum for the block it started the last outer step
      // with; the outer ring sends it the last hop home. With one inner ring the inner hops
      // already brought it home.
      std::vector<OpId> home = dkv_recv_;
      if (outer_ > 1) {
        send_outer_dkv(outer_);
        home = dkv_outer_recv_;
      }
      // The owner adds its own part.
      for (int p = 0; p < n_; ++p) {
        OpLabel l = make_label(g_, ctx_, "dkv_final", scheme_, phase_, n_);
        l.chunk_kv = p;
        const OpId fin = add_memory_op(ctx_, ctx_.group[p], 3.0 * dkv_bytes_, model::MemClass::Add, l);
        g_.add_edge(home[p], fin);
        tail_[p] = fin;
      }
    }
    return tail_;
  }

 private:
  int next_inner(int p) const { return p - p % inner_ + (p % inner_ + 1) % inner_; }
  int next_outer(int p) const { return (p + inner_) % n_; }
  /// Whose block rank p computes at outer step t, inner step k.
  int source(int p, int t, int k) const {
    const int o = p / inner_, i = p % inner_;
    return ((o - t) % outer_ + outer_) % outer_ * inner_ + ((i - k) % inner_ + inner_) % inner_;
  }

  /// Outer step t starts: every rank sends the block it starts t with to (o + 1, i).
  void send_outer_kv(int t) {
    std::vector<OpId> recv(n_, kNoOp), sent(n_, kNoOp);
    for (int p = 0; p < n_; ++p) {
      const int dst = next_outer(p);
      const OpId x = add_p2p(g_, ctx_.topo, ctx_.group[p], ctx_.group[dst], kv_bytes_,
                             p2p_label(ctx_, "kv_outer_p2p", scheme_, phase_, t * inner_,
                                       source(p, t, 0)),
                             first_kv_[p], stream::kCpOuterSend, stream::kCpOuterRecv, &comm_);
      // Two outer buffers: the one this block lands in held the block of outer step t - 1,
      // which the receiver computed with, passed on in its inner ring and sent over the outer
      // ring. (The block of outer step 0 is the rank's own and occupies no buffer.)
      if (t >= 2) {
        g_.add_edge(first_kernel_[dst], x);
        g_.add_edge(first_inner_send_[dst], x);
        g_.add_edge(outer_sent_[dst], x);
      }
      recv[dst] = x;
      sent[p] = x;
    }
    outer_recv_ = recv;
    outer_sent_ = sent;
  }

  /// The attention kernels (and forward merges) of one step; returns them per rank.
  std::vector<OpId> kernels(int t, int k, const std::vector<OpId>& have) {
    const int step = t * inner_ + k;
    std::vector<OpId> kernel_at(n_, kNoOp);
    for (int p = 0; p < n_; ++p) {
      const int src = source(p, t, k);
      const int rank = ctx_.group[p];
      const BlockWork w = block_work(part_.chunks[p], part_.chunks[src], ctx_.docs);
      OpLabel l = make_label(g_, ctx_, backward_ ? "attn_bwd" : "attn_fwd", scheme_, phase_, step);
      l.chunk_q = p;
      l.chunk_kv = src;
      const OpId kop = add_attention_kernel(ctx_, rank, w, ctx_.geo, backward_, l);
      if (kop == kNoOp) continue;
      g_.add_edge(have[p], kop);
      kernel_at[p] = kop;
      tail_[p] = kop;
      if (!backward_ && step > 0)
        tail_[p] = merge_op(rank, step);
    }
    return kernel_at;
  }

  /// Backward: accumulate the arriving dK,dV partial into this step's block gradient and pass
  /// it on in the inner ring; after `inner` hops it is back at the rank that started the outer
  /// step with that block (after N hops at its owner, for the plain ring).
  void pass_inner_dkv(int t, int k, const std::vector<OpId>& kernel_at,
                      const std::vector<OpId>& have) {
    const int step = t * inner_ + k;
    std::vector<OpId> sent(n_, kNoOp);
    for (int p = 0; p < n_; ++p) {
      const int rank = ctx_.group[p];
      OpId ready = kernel_at[p] != kNoOp ? kernel_at[p] : (k == 0 ? have[p] : kNoOp);
      if (k > 0) {
        const OpId acc =
            add_memory_op(ctx_, rank, 3.0 * dkv_bytes_, model::MemClass::Add,
                          make_label(g_, ctx_, "dkv_accumulate", scheme_, phase_, step));
        g_.add_edge(dkv_recv_[p], acc);
        g_.add_edge(ready, acc);
        dkv_accum_[p] = acc;
        ready = acc;
        tail_[p] = acc;
      }
      if (inner_ == 1) {  // an inner ring of one: the partial stays where it is
        sent[p] = ready;
        continue;
      }
      // A truncated ring's last step sends the partial to the block's owner.
      const int dst = k == last_ && last_ < inner_ - 1 ? source(p, t, k) : next_inner(p);
      if (dst == p) {  // the block is this rank's own: its partial is home
        sent[p] = ready;
        continue;
      }
      // Its own streams: a KV prefetch must not queue behind a gradient that waits for the
      // current kernel (ring implementations use separate communicators for the two).
      const OpId x = add_p2p(g_, ctx_.topo, rank, ctx_.group[dst], dkv_bytes_,
                             p2p_label(ctx_, "dkv_p2p", scheme_, phase_, step, source(p, t, k)),
                             ready, stream::kCpGradSend, stream::kCpGradRecv, &comm_);
      g_.add_edge(dkv_accum_[dst], x);  // the receiver's previous partial has been consumed
      sent[dst] = x;
    }
    dkv_recv_ = sent;
  }

  /// Backward, at the start of outer step t (t = outer: after the last): each rank holds its
  /// inner ring's dK,dV sum for the block it started outer step t - 1 with; it adds the sum of
  /// the inner rings that block visited before (arrived over the outer ring) and sends the
  /// total on to (o + 1, i). After `outer` such hops the sum of all N ranks is at the owner.
  void send_outer_dkv(int t) {
    const int step = t * inner_;
    std::vector<OpId> acc(n_, kNoOp), recv(n_, kNoOp);
    for (int p = 0; p < n_; ++p) {
      // Into the outer send buffer: a copy of the inner sum, or its sum with the partial that
      // came over the outer ring.
      acc[p] = add_memory_op(ctx_, ctx_.group[p], (t > 1 ? 3.0 : 2.0) * dkv_bytes_, model::MemClass::Add,
                             make_label(g_, ctx_, "dkv_outer_accumulate", scheme_, phase_, step));
      g_.add_edge(dkv_recv_[p], acc[p]);
      g_.add_edge(dkv_outer_recv_[p], acc[p]);
      dkv_accum_[p] = acc[p];
      tail_[p] = acc[p];
    }
    for (int p = 0; p < n_; ++p) {
      const int dst = next_outer(p);
      const OpId x = add_p2p(g_, ctx_.topo, ctx_.group[p], ctx_.group[dst], dkv_bytes_,
                             p2p_label(ctx_, "dkv_outer_p2p", scheme_, phase_, step,
                                       source(p, t - 1, 0)),
                             acc[p], stream::kCpOuterGradSend, stream::kCpOuterGradRecv, &comm_);
      g_.add_edge(acc[dst], x);  // the receiver has consumed the partial it got last time
      recv[dst] = x;
    }
    dkv_outer_recv_ = recv;
  }

  /// Inner step k passes the block each rank holds now to (o, i + 1) while the kernels run.
  void send_inner_kv(int t, int k, const std::vector<OpId>& have) {
    const int step = t * inner_ + k;
    std::vector<OpId> next(n_, kNoOp);
    for (int p = 0; p < n_; ++p) {
      const int dst = next_inner(p);
      const OpId x = add_p2p(g_, ctx_.topo, ctx_.group[p], ctx_.group[dst], kv_bytes_,
                             p2p_label(ctx_, "kv_p2p", scheme_, phase_, step, source(p, t, k)),
                             have[p], stream::kCpSend, stream::kCpRecv, &comm_);
      // Double buffering: the receiver's buffer for the next step held the block of the
      // previous one.
      g_.add_edge(prev_kernel_[dst], x);
      next[dst] = x;
    }
    if (k == 0)  // indexed by sender, for the outer buffer it reads from
      for (int p = 0; p < n_; ++p) first_inner_send_[p] = next[next_inner(p)];
    kv_recv_ = next;
  }

  AttentionCtx& ctx_;
  /// The CP group's communicator, which sets NCCL's p2p channels per peer (p2p_plan).
  const GroupShape comm_ = group_shape(ctx_.topo, ctx_.group);
  TaskGraph& g_;
  const Partition& part_;
  const bool backward_;
  const std::string& scheme_;
  const Phase phase_;
  const int n_, inner_, outer_;
  int last_ = 0;  ///< last inner step with any work (inner_ - 1 unless a window truncates)
  double kv_bytes_ = 0, dkv_bytes_ = 0, merge_bytes_ = 0;
  double merge_tokens_ = 0;

  /// A ring step's online-softmax merge: TE merges in its own fused kernel (the merge bytes at
  /// the fused single-pass kernel rate); PyTorch-native CP with eager LSE-merge kernels
  /// (stack_kernels.hpp).
  OpId merge_op(int rank, int step) {
    OpLabel l = make_label(g_, ctx_, "softmax_merge", scheme_, phase_, step);
    const auto ks = model::cp_merge_kernels(ctx_.sc.training.stack, merge_tokens_, ctx_.geo.heads_q,
                                            ctx_.geo.head_dim);
    if (ks.empty()) return add_memory_op(ctx_, rank, merge_bytes_, model::MemClass::FusedFwd, l);
    const model::Cost c = ctx_.pricer.cost().memory_kernels(ks);
    l.category = g_.intern("memory");
    return g_.add_priced(rank, stream::kCompute, ctx_.pricer.time(c, "memory"), l);
  }

  std::vector<OpId> first_kv_;          ///< block the current outer step starts with is here
  std::vector<OpId> kv_recv_;           ///< inner ring: block that arrived for the current step
  std::vector<OpId> prev_kernel_;       ///< kernel of the previous step
  std::vector<OpId> outer_recv_;        ///< outer ring: block for the next outer step
  std::vector<OpId> outer_sent_;        ///< outer KV send of the current outer step, by sender
  std::vector<OpId> first_kernel_;      ///< kernel at the current outer step's first step
  std::vector<OpId> first_inner_send_;  ///< inner KV send at that step, by sender
  std::vector<OpId> dkv_recv_;          ///< backward: inner dK,dV partial that arrived
  std::vector<OpId> dkv_accum_;         ///< op that consumed the last inner partial
  std::vector<OpId> dkv_outer_recv_;    ///< backward: outer dK,dV partial that arrived
  std::vector<OpId> tail_;              ///< newest op on each rank's compute path
};

}  // namespace

std::vector<OpId> ring_pass(AttentionCtx& ctx, const Partition& part, bool backward,
                            const std::vector<OpId>& entry, const std::string& scheme) {
  return TwoLevelRing(ctx, part, backward, entry, scheme, static_cast<int>(ctx.group.size()))
      .build();
}

int double_ring_inner(const AttentionCtx& ctx) {
  const int n = static_cast<int>(ctx.group.size());
  const int want = ctx.sc.parallel.attention.inner_ring;
  if (want > 0) {
    if (n % want != 0)
      throw std::invalid_argument("double-ring inner_ring " + std::to_string(want) +
                                  " does not divide the context-parallel degree " +
                                  std::to_string(n));
    return want;
  }
  // The CP ranks that share the first member's node (consecutive in ring order), rounded down
  // to a divisor of N.
  const int node = ctx.topo.node_of(ctx.group[0]);
  int same = 1;
  while (same < n && ctx.topo.node_of(ctx.group[static_cast<size_t>(same)]) == node) ++same;
  while (n % same != 0) --same;
  return same;
}

std::vector<OpId> double_ring_pass(AttentionCtx& ctx, const Partition& part, bool backward,
                                   const std::vector<OpId>& entry, const std::string& scheme) {
  return TwoLevelRing(ctx, part, backward, entry, scheme, double_ring_inner(ctx)).build();
}

}  // namespace cpsim::schedule
