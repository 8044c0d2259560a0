// Linear-attention (Gated DeltaNet) context parallelism by head split (Megatron's GDN CP
// "a2a"): an all-to-all turns "my tokens, all heads" into "all tokens, my heads" for the
// inputs of the sequence mixing (q, k, v and the two per-head gates beta and decay), the short
// convolution and the chunked delta rule run over the whole sequence for heads / cp heads with
// no state to pass, and a second all-to-all returns the output. Backward mirrors it: dO
// scattered, the kernels' backward, dq, dk, dv and the gate gradients gathered back.
#include <algorithm>
#include <stdexcept>

#include "model/transformer.hpp"
#include "schedule/attention.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::schedule {

LinearA2aBytes linear_a2a_bytes(const scenario::ModelSpec& m, int tp, int cp, int64_t local_tokens,
                                int batch) {
  const int hv = std::max(1, m.linear_heads_v / tp), hk = std::max(1, m.linear_heads_k / tp);
  if (hv % cp != 0 || hk % cp != 0)
    throw std::invalid_argument("linear-attention a2a: " + std::to_string(hv) + " value heads and " +
                                std::to_string(hk) + " key heads per TP rank are not both divisible by cp = " +
                                std::to_string(cp));
  const double tok = static_cast<double>(local_tokens) * batch;
  LinearA2aBytes b;
  // bytes each rank sends in total (nccl-tests all-to-all size), bf16
  b.inputs = tok * (2.0 * hk * m.linear_key_dim + static_cast<double>(hv) * m.linear_value_dim + 2.0 * hv) *
             model::kBf16Bytes;
  b.output = tok * hv * m.linear_value_dim * model::kBf16Bytes;
  return b;
}

std::vector<OpId> linear_a2a_pass(AttentionCtx& ctx, bool backward, const std::vector<OpId>& entry) {
  TaskGraph& g = ctx.g;
  const int n = static_cast<int>(ctx.group.size());
  const Phase phase = backward ? Phase::Backward : Phase::Forward;
  const std::string scheme = "linear-a2a";
  const auto& m = ctx.sc.model;
  const int tp = ctx.sc.parallel.tp;
  const int64_t local = ctx.sc.training.seq_len / n;
  const LinearA2aBytes bytes = linear_a2a_bytes(m, tp, n, local, ctx.geo.batch);
  const int hv = std::max(1, m.linear_heads_v / tp) / n, hk = std::max(1, m.linear_heads_k / tp) / n;

  auto a2a = [&](double b, const char* name, const std::vector<OpId>& deps) {
    CollectiveRequest req;
    req.op = CollOp::AllToAll;
    req.ranks = ctx.group;
    req.bytes = b;
    req.label = make_label(g, ctx, name, scheme, phase);
    req.label.category = g.intern("collective");
    req.deps = deps;
    return add_collective(g, ctx.topo, req).done;
  };
  // Before: q, k, v and gates forward; the output gradient backward.
  const std::vector<OpId> before =
      backward ? a2a(bytes.output, "a2a_dout", entry) : a2a(bytes.inputs, "a2a_qkv_gates", entry);
  std::vector<OpId> done(n);
  const double seq = static_cast<double>(ctx.sc.training.seq_len) * ctx.geo.batch;
  const double channels = 2.0 * hk * m.linear_key_dim + static_cast<double>(hv) * m.linear_value_dim;
  for (int i = 0; i < n; ++i) {
    const int rank = ctx.group[i];
    // FLA's causal_conv1d: one fused Triton kernel each way.
    const OpId conv = add_memory_op(ctx, rank, 2.0 * seq * channels * model::kBf16Bytes,
                                    backward ? model::MemClass::FusedBwd : model::MemClass::FusedFwd,
                                    make_label(g, ctx, "short_conv", scheme, phase));
    g.add_edge(before[i], conv);
    // Every rank runs the single-GPU kernels over whole sequences for its heads.
    model::GdnCall call;
    call.seq_len = ctx.sc.training.seq_len;
    call.seqs = ctx.geo.batch;
    call.heads_k = hk;
    call.heads_v = hv;
    call.key_dim = m.linear_key_dim;
    call.value_dim = m.linear_value_dim;
    call.chunk = kLinearChunk;
    call.backward = backward;
    const model::Cost c = ctx.pricer.cost().gdn(call);
    OpLabel l = make_label(g, ctx, backward ? "gdn_chunk_bwd" : "gdn_chunk_fwd", scheme, phase);
    l.category = g.intern("linear-attention");
    done[i] = g.add_priced(rank, stream::kCompute, ctx.pricer.time(c, "linear-attention"), l, c.flops);
    g.add_edge(conv, done[i]);
  }
  // After: the output forward; dq, dk, dv and the gate gradients backward.
  return backward ? a2a(bytes.inputs, "a2a_dqkv_gates", done) : a2a(bytes.output, "a2a_out", done);
}

}  // namespace cpsim::schedule
