#include "schedule/attention.hpp"

#include "scenario/enum_names.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/fp8_attention.hpp"
#include "model/host_ops.hpp"

namespace cpsim::schedule {

double Pricer::time(const model::Cost& c, const std::string& kind) {
  // The source class and, where the model names it, what set the price within it.
  const std::string source = c.origin ? std::string(model::cost_source_name(c.source)) + " (" + c.origin + ")"
                                       : std::string(model::cost_source_name(c.source));
  sources_[kind][source]++;
  times_[kind][source] += c.time_s;
  if (c.extrapolated) extrapolated_++;
  return c.time_s;
}

namespace {
template <class V>
void repeat_since(std::map<std::string, std::map<std::string, V>>& now,
                  const std::map<std::string, std::map<std::string, V>>& since, int times) {
  for (auto& [kind, by_source] : now)
    for (auto& [source, n] : by_source) {
      V before = 0;
      if (auto k = since.find(kind); k != since.end())
        if (auto s = k->second.find(source); s != k->second.end()) before = s->second;
      n += (n - before) * times;
    }
}
}  // namespace

void Pricer::count_again(const Snapshot& since, int times) {
  repeat_since(sources_, since.sources, times);
  repeat_since(times_, since.times, times);
  extrapolated_ += (extrapolated_ - since.extrapolated) * times;
}

namespace {
/// Whether the document boundaries mask a pair of q x kv that the mask alone would keep. A block
/// inside one document (an all-gather chunk against its document's keys, a ring step between two
/// chunks of one document) is a causal or full block, not a document-masked one: the kernels'
/// tiles are those of the causal boundary, and the tile model's document shape (causal blocks
/// along the diagonal) would price an 8K x 32K prefix block as one 8K causal square.
bool cut_by_documents(const std::vector<TokenRun>& q, const std::vector<TokenRun>& kv,
                      const Documents& docs, int64_t pairs) {
  Documents one = docs;
  one.starts = {0};
  return count_pairs(q, kv, one) != pairs;
}
}  // namespace

BlockWork block_work(const std::vector<TokenRun>& q, const std::vector<TokenRun>& kv,
                     const Documents& docs) {
  BlockWork w;
  std::vector<char> kv_used(kv.size(), 0);
  for (const auto& qc : q) {
    int64_t row_pairs = 0;
    for (size_t j = 0; j < kv.size(); ++j) {
      const int64_t p = count_pairs(qc, kv[j], docs);
      if (p > 0) kv_used[j] = 1;
      row_pairs += p;
    }
    if (row_pairs > 0) w.q_len += qc.tokens();
    w.pairs += row_pairs;
  }
  for (size_t j = 0; j < kv.size(); ++j)
    if (kv_used[j]) w.kv_len += kv[j].tokens();
  if (w.pairs == 0) return w;
  const double full = static_cast<double>(w.q_len) * static_cast<double>(w.kv_len);
  if (static_cast<double>(w.pairs) >= full) {
    w.mask = scenario::Mask::Full;
  } else if (docs.mask == scenario::AttentionMask::SlidingWindow) {
    w.mask = scenario::Mask::SlidingWindow;
  } else if (docs.starts.size() > 1 && cut_by_documents(q, kv, docs, w.pairs)) {
    w.mask = scenario::Mask::Document;
  } else {
    w.mask = scenario::Mask::Causal;
  }
  return w;
}

std::string scheme_name(const scenario::AttentionSpec& a) {
  const std::string layout = scenario::name_of(a.layout, scenario::kLayoutNames);
  switch (a.scheme) {
    case scenario::AttentionScheme::Ulysses: return "ulysses";
    case scenario::AttentionScheme::Usp: return "usp-u" + std::to_string(a.ulysses_degree) + "-" + layout;
    default: return std::string(scenario::name_of(a.scheme, scenario::kSchemeNames)) + "-" + layout;
  }
}

OpLabel make_label(TaskGraph& g, const AttentionCtx& ctx, const char* name,
                   const std::string& scheme, Phase phase, int step) {
  OpLabel l;
  l.name = g.intern(name);
  l.scheme = g.intern(scheme);
  l.layer = ctx.layer;
  l.micro = ctx.micro;
  l.phase = phase;
  l.step = step;
  return l;
}

namespace {
/// The widths host_ops needs (which kernels a layer runs, not their sizes).
model::LayerWidths host_widths(const AttnGeometry& geo) {
  model::LayerWidths w;
  w.tokens = w.hidden = w.ffn = 1;
  w.q = static_cast<double>(geo.heads_q) * geo.head_dim;
  w.kv = static_cast<double>(geo.heads_kv) * geo.head_dim;
  return w;
}
}  // namespace

OpId add_attention_kernel(AttentionCtx& ctx, int rank, const BlockWork& w,
                          const AttnGeometry& geo, bool backward, OpLabel label) {
  if (w.pairs == 0) return kNoOp;
  model::AttentionCall call;
  call.q_len = w.q_len;
  call.kv_len = w.kv_len;
  call.mask = w.mask;
  call.unmasked_fraction =
      static_cast<double>(w.pairs) / (static_cast<double>(w.q_len) * static_cast<double>(w.kv_len));
  call.heads_q = geo.heads_q;
  call.heads_kv = geo.heads_kv;
  call.head_dim = geo.head_dim;
  call.batch = geo.batch;
  call.backward = backward;
  const model::Cost c = model::attention_cost(ctx.pricer.cost(), call, ctx.sc.training.fp8_attention);
  label.shape = ctx.g.add_shape(call);
  // Fixed overheads (platform runtime:): the host thread's framework ops for this call (the
  // stack's attention call, or a ring step's call and merge ops: model/host_ops.hpp), which the
  // kernel waits for (the host runs ahead when kernels are long), and for a ring step after the
  // first the event wait that orders the kernel after its K,V arrival.
  const scenario::RuntimeSpec& rt = ctx.sc.platform.runtime;
  OpLabel ov = label;
  ov.shape = -1;
  ov.category = ctx.g.intern("overhead");
  OpId host = kNoOp;
  double host_s = 0;
  if (rt.ops_per_attention >= 0)  // the platform names the count: that many eager ops and a launch
    host_s = rt.graphs ? 0.0 : rt.kernel_launch_s + rt.ops_per_attention * rt.host_op_s;
  else if (label.step > 0)
    host_s = model::host_seconds(model::ring_step_host(ctx.sc.training.stack, backward), rt);
  else
    host_s = model::host_seconds(model::layer_host_ops(ctx.sc.training.stack, backward, host_widths(geo)).attention, rt);
  if (host_s > 0) {
    ov.name = ctx.g.intern("host_launch");
    host = ctx.g.add_compute(rank, stream::kHost, host_s, ov);
  }
  if (label.step > 0 && rt.ring_step_sync_s > 0) {
    ov.name = ctx.g.intern("step_sync");
    ctx.g.add_compute(rank, stream::kCompute, rt.ring_step_sync_s, ov);
  }
  label.category = ctx.g.intern("attention");
  const OpId k = ctx.g.add_priced(rank, stream::kCompute, ctx.pricer.time(c, "attention"),
                                  label, c.flops);
  ctx.g.add_edge(host, k);
  return k;
}

OpId add_memory_op(AttentionCtx& ctx, int rank, double bytes, model::MemClass cls, OpLabel label) {
  const model::Cost c = ctx.pricer.cost().memory_bound(bytes, cls, ctx.g.str(label.name).c_str());
  label.category = ctx.g.intern("memory");
  return ctx.g.add_priced(rank, stream::kCompute, ctx.pricer.time(c, "memory"), label);
}

Partition cp_partition(const scenario::Scenario& sc, const Documents& docs, int ranks) {
  const auto& a = sc.parallel.attention;
  if (a.layout == scenario::Layout::ZigZag && a.per_document_sharding && docs.starts.size() > 1)
    return make_document_partition(docs, ranks);
  return make_partition(sc.training.seq_len, ranks, a.layout, a.stripe_width);
}

Documents layer_documents(const scenario::ModelSpec& m, const Documents& docs, int layer) {
  const size_t n = m.pattern_sliding.size();
  if (n > 0 && m.pattern_sliding[static_cast<size_t>(layer) % n])
    return docs.with_mask(scenario::AttentionMask::SlidingWindow, m.window);
  return docs.with_mask(m.attention_mask, m.window);
}

namespace {
Partition partition_for(const AttentionCtx& ctx, int ranks) {
  return cp_partition(ctx.sc, ctx.docs, ranks);
}

std::vector<OpId> dispatch(AttentionCtx& ctx, const std::vector<OpId>& entry, bool backward) {
  const auto& a = ctx.sc.parallel.attention;
  const int n = static_cast<int>(ctx.group.size());
  if (n == 1) {
    // No context parallelism: one causal kernel over the whole (document-masked) sequence.
    std::vector<OpId> exit(1);
    const Partition p = make_partition(ctx.sc.training.seq_len, 1, scenario::Layout::Contiguous);
    OpLabel l = make_label(ctx.g, ctx, backward ? "attn_bwd" : "attn_fwd", "local",
                           backward ? Phase::Backward : Phase::Forward);
    const OpId k = add_attention_kernel(ctx, ctx.group[0], block_work(p.chunks[0], p.chunks[0], ctx.docs),
                                        ctx.geo, backward, l);
    ctx.g.add_edge(entry[0], k);
    exit[0] = k == kNoOp ? entry[0] : k;
    return exit;
  }
  switch (a.scheme) {
    case scenario::AttentionScheme::Ring:
      return ring_pass(ctx, partition_for(ctx, n), backward, entry, scheme_name(a));
    case scenario::AttentionScheme::DoubleRing:
      return double_ring_pass(ctx, partition_for(ctx, n), backward, entry, scheme_name(a));
    case scenario::AttentionScheme::AllGather:
      return allgather_pass(ctx, partition_for(ctx, n), backward, entry);
    case scenario::AttentionScheme::Ulysses:
      return ulysses_pass(ctx, backward, entry);
    case scenario::AttentionScheme::Usp:
      return usp_pass(ctx, backward, entry);
  }
  throw std::logic_error("unknown attention scheme");
}
}  // namespace

namespace {
/// The layer pass's other host ops on each rank's host lane (model/host_ops.hpp), in issue
/// order around the attention call: those issued before it ahead of the call's own host op
/// (the host lane is in order, so the attention kernel waits for all of them), those after it
/// behind. The GPU ops outside attention are built by the layer's stage and carry no launch
/// edge: the attention kernel, one per pass, is where a host that falls behind shows, at layer
/// granularity. Under CUDA graphs the pass is one graph launch. A platform that names
/// ops_per_attention keeps its per-call count and adds nothing here.
void add_layer_host(AttentionCtx& ctx, bool backward, bool before) {
  const scenario::RuntimeSpec& rt = ctx.sc.platform.runtime;
  if (rt.ops_per_attention >= 0) return;
  const model::LayerHostOps ops = model::layer_host_ops(ctx.sc.training.stack, backward, host_widths(ctx.geo));
  const double s = before ? model::host_seconds(ops.before, rt) + model::graph_launch_seconds(rt)
                          : model::host_seconds(ops.after, rt);
  if (!(s > 0)) return;
  OpLabel l = make_label(ctx.g, ctx, before ? "host_ops_before_attention" : "host_ops_after_attention", "host",
                         backward ? Phase::Backward : Phase::Forward);
  l.category = ctx.g.intern("overhead");
  for (const int rank : ctx.group) ctx.g.add_compute(rank, stream::kHost, s, l);
}

std::vector<OpId> layer_pass(AttentionCtx& ctx, const std::vector<OpId>& entry, bool backward) {
  add_layer_host(ctx, backward, true);
  std::vector<OpId> exit = dispatch(ctx, entry, backward);
  add_layer_host(ctx, backward, false);
  return exit;
}
}  // namespace

std::vector<OpId> attention_forward(AttentionCtx& ctx, const std::vector<OpId>& entry) {
  return layer_pass(ctx, entry, false);
}

std::vector<OpId> attention_backward(AttentionCtx& ctx, const std::vector<OpId>& entry) {
  return layer_pass(ctx, entry, true);
}

}  // namespace cpsim::schedule
