// The report's time family: per-rank compute, communication and idle time, their averages,
// time by category, op and layer kind, and the throughput figures (RankTimes, metric_parts.hpp).
#include <algorithm>
#include <iterator>
#include <map>
#include <string>

#include "model/transformer.hpp"
#include "report/metric_parts.hpp"

namespace cpsim::report::detail {

using schedule::OpId;
using schedule::OpKind;
using schedule::TaskGraph;

RankTimes::RankTimes(const scenario::Scenario& sc, const schedule::BuildInfo& info, const TaskGraph& g,
                     const schedule::Trace& tr, Result& r)
    : sc_(sc), info_(info), g_(g), tr_(tr), r_(r), nr_(g.num_ranks()),
      // Summed per interned name and category (a string map lookup per op was ~3 % of the
      // 70B full replay), in op order per key as before; keyed by string at the end.
      by_name_(g.num_strings(), 0.0), by_category_(g.num_strings(), 0.0),
      // The keys the string maps had: a name or category any op used (its sum may be 0).
      used_name_(g.num_strings(), 0), used_category_(g.num_strings(), 0),
      computes_(static_cast<size_t>(nr_), 0) {
  r.ranks.resize(nr_);
  g.for_each_op([&](OpId id, const schedule::Op& op) {
    tally(op, tr.start_s[id], tr.end_s[id]);
    if (op.kind == OpKind::Transfer) {
      r.ranks[op.rank].bytes_sent += op.bytes;
      r.ranks[op.peer].bytes_received += op.bytes;
      if (schedule::stream::is_cp(op.stream)) cp_bytes_ += op.bytes;
    }
  });
}

void RankTimes::figures(int k, const RankTimelines& t) {
  auto& m = r_.ranks[k];
  m.rank = k;
  const Intervals& c = t.compute;
  const Intervals& a = t.attention;
  const Intervals& p = t.by_kind[0];  // cp (comm_kind_index): the context-parallel streams
  Intervals x;
  for (const Intervals& v : t.by_kind) x = unite(x, v);
  m.compute_s = measure(c);
  m.comm_s = measure(x);
  m.exposed_comm_s = measure_minus(x, c);
  m.idle_s = std::max(0.0, tr_.makespan_s - measure(unite(c, x)));
  m.attention_compute_s = measure(a);
  m.cp_comm_s = measure(p);
  m.cp_exposed_s = measure_minus(p, c);
  computes_[static_cast<size_t>(k)] = c.empty() ? 0 : 1;
}

void RankTimes::add(int k) {
  const auto& m = r_.ranks[k];
  // Ranks that only mirror a simulated replica in DP collectives have no compute.
  if (!computes_[static_cast<size_t>(k)]) return;
  active_++;
  r_.compute_s += m.compute_s;
  r_.exposed_comm_s += m.exposed_comm_s;
  r_.idle_s += m.idle_s;
  r_.attention.exposed_comm_s += m.cp_exposed_s;
  r_.attention.comm_s += m.cp_comm_s;
  r_.attention.compute_s += m.attention_compute_s;
  attn_max_ = std::max(attn_max_, m.attention_compute_s);
  attn_sum_ += m.attention_compute_s;
}

void RankTimes::finish() {
  const TaskGraph& g = g_;
  const schedule::Trace& tr = tr_;
  Result& r = r_;
  const int active = active_;
  // Per GPU means are over the GPUs that compute, so they count those GPUs' ops only (a
  // transfer: its sender's). A replica not built (replica symmetry) joins the DP collectives
  // without computing, and its ops (its share of them, its NCCL launches) had made the means
  // grow with the replicas left out (qwen3-30b-a3b-128k-2nodes: "collective" 7.79 s per GPU,
  // 1.71 s as its replay without symmetry gives); a full replay computes on every GPU.
  if (active < nr_) {
    std::fill(by_name_.begin(), by_name_.end(), 0.0);
    std::fill(by_category_.begin(), by_category_.end(), 0.0);
    std::fill(std::begin(by_kind_sum_), std::end(by_kind_sum_), 0.0);
    std::fill(used_name_.begin(), used_name_.end(), 0);
    std::fill(used_category_.begin(), used_category_.end(), 0);
    std::fill(std::begin(used_kind_), std::end(used_kind_), false);
    g.for_each_op([&](OpId id, const schedule::Op& op) {
      if (computes_[static_cast<size_t>(op.rank)]) tally(op, tr.start_s[id], tr.end_s[id]);
    });
  }
  std::map<std::string, double> by_cat, by_op, by_kind;
  for (uint32_t k = 0; k < g.num_strings(); ++k) {
    if (used_name_[k]) by_op[g.str(k)] = by_name_[k];
    if (used_category_[k]) by_cat[g.str(k).empty() ? "other" : g.str(k)] += by_category_[k];
  }
  const char* kinds[3] = {"other", "full-attention", "linear-attention"};
  for (int k = 0; k < 3; ++k)
    if (used_kind_[k]) by_kind[kinds[k]] = by_kind_sum_[k];

  r.gpus = active;
  if (active > 0) {
    r.compute_s /= active;
    r.exposed_comm_s /= active;
    r.idle_s /= active;
    r.attention.exposed_comm_s /= active;
    r.attention.comm_s /= active;
    r.attention.compute_s /= active;
    r.attention.bytes_sent_per_rank = cp_bytes_ / active;
    for (auto& [k, v] : by_cat) r.time_by_category[k] = v / active;
    for (auto& [k, v] : by_op) r.time_by_op[k] = v / active;
    for (auto& [k, v] : by_kind) r.compute_by_layer_kind[k] = v / active;
  }
  r.attention.overlap_fraction =
      r.attention.comm_s > 0 ? 1.0 - r.attention.exposed_comm_s / r.attention.comm_s : 1.0;
  r.attention.imbalance = attn_sum_ > 0 ? attn_max_ / (attn_sum_ / active) : 1.0;
  r.bubble_ratio = r.compute_s > 0 ? r.idle_s / r.compute_s : 0;
  if (r.step_time_s > 0) {
    r.tokens_per_s = info_.tokens / r.step_time_s;
    r.tflops_per_gpu = r.model_flops / r.step_time_s / std::max(1, info_.ranks) / 1e12;
    r.mfu = r.tflops_per_gpu * 1e12 / sc_.platform.gpu.peak_flops;
  }
}

void RankTimes::tally(const schedule::Op& op, double s, double e) {
  // Compute by layer kind is GPU time: the host lane's framework ops (category overhead) are
  // the CPU issuing that layer's kernels, not kernels.
  if (op.kind == OpKind::Compute && op.stream != schedule::stream::kHost) {
    const int layer = op.label.layer;
    const int kind = layer < 0 || layer >= sc_.model.layers ? 0
                     : model::layer_kind(sc_.model, layer) == scenario::LayerKind::FullAttention ? 1
                                                                                                : 2;
    by_kind_sum_[kind] += e - s;
    used_kind_[kind] = true;
  }
  by_category_[op.label.category] += e - s;
  by_name_[op.label.name] += e - s;
  used_category_[op.label.category] = 1;
  used_name_[op.label.name] = 1;
}

}  // namespace cpsim::report::detail
