#include "report/metrics.hpp"

#include "report/comm_split.hpp"
#include "report/intervals.hpp"
#include "report/rank_ops.hpp"
#include "support/run_sort.hpp"
#include "support/threads.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>

namespace cpsim::report {

using schedule::OpId;
using schedule::OpKind;
using schedule::TaskGraph;

namespace {

bool is_cp_stream(uint16_t s) { return schedule::stream::is_cp(s); }

/// Op `id`'s predecessors (explicit edges and stream order), each passed to f.
template <class F>
void for_each_releasing(const TaskGraph& g, OpId id, F&& f) {
  g.for_each_pred(id, f);
  for (int side = 0; side < 2; ++side)
    if (const OpId p = g.queue_prev(id, side); p != schedule::kNoOp) f(p);
}

/// Of the predecessors shown to it, the one whose completion released the op: the last to
/// end, the larger id among those ending together (so the order they come in does not
/// matter); kNoOp if none (the op started unblocked at time 0).
struct Releaser {
  const schedule::Trace& tr;
  OpId best = schedule::kNoOp;
  double best_end = -1;
  void operator()(OpId p) {
    if (tr.end_s[p] > best_end || (tr.end_s[p] == best_end && p > best)) {
      best_end = tr.end_s[p];
      best = p;
    }
  }
};

OpId releaser(const TaskGraph& g, const schedule::Trace& tr, OpId id) {
  Releaser r{tr};
  for_each_releasing(g, id, [&](OpId p) { r(p); });
  return r.best;
}

/// An op's kind for wait attribution: what describe() says without layer, micro-batch, step
/// and chunk.
struct ReleaserKind {
  uint32_t name, scheme;
  schedule::Phase phase;
  int rank, peer;  ///< peer -1 for compute
  auto operator<=>(const ReleaserKind&) const = default;
};

std::string describe_kind(const TaskGraph& g, const ReleaserKind& k) {
  std::string s;
  if (k.phase == schedule::Phase::Forward) s += "fwd ";
  if (k.phase == schedule::Phase::Backward) s += "bwd ";
  if (k.phase == schedule::Phase::Optimizer) s += "opt ";
  if (k.scheme) s += g.str(k.scheme) + " ";
  s += g.str(k.name);
  s += k.peer >= 0 ? " [r" + std::to_string(k.rank) + "->r" + std::to_string(k.peer) + "]"
                   : " [r" + std::to_string(k.rank) + "]";
  return s;
}

/// Bytes and busy time of every link the graph's transfers cross, the `top` busiest first
/// (ties by name), and the bytes per link class (each transfer counted once per link of
/// the class its route crosses: its load), summed in op order.
void link_loads(const TaskGraph& g, const model::Topology& topo, size_t top, Result& r) {
  constexpr int kClasses = 5;  // model::LinkClass values
  struct Route {
    std::vector<uint32_t> links;
    uint8_t of_class[kClasses] = {};
  };
  std::vector<double> bytes(topo.links().size(), 0.0);
  double by_class[kClasses] = {};
  std::unordered_map<uint64_t, Route> routes;
  g.for_each_op([&](OpId, const schedule::Op& op) {
    if (op.kind != OpKind::Transfer || op.bytes <= 0 || op.rank == op.peer) return;
    const uint64_t key = (static_cast<uint64_t>(op.rank) << 32) | static_cast<uint32_t>(op.peer);
    auto it = routes.find(key);
    if (it == routes.end()) {
      Route rt;
      rt.links = topo.route(op.rank, op.peer);
      for (uint32_t l : rt.links) rt.of_class[static_cast<int>(topo.links()[l].cls)]++;
      it = routes.emplace(key, std::move(rt)).first;
    }
    for (uint32_t l : it->second.links) bytes[l] += op.bytes;
    for (int c = 0; c < kClasses; ++c) by_class[c] += op.bytes * it->second.of_class[c];
  });
  for (int c = 0; c < kClasses; ++c)
    if (by_class[c] > 0)
      r.bytes_per_link_class.emplace_back(model::link_class_name(static_cast<model::LinkClass>(c)),
                                          by_class[c]);
  std::vector<LinkLoad> out;
  for (size_t l = 0; l < bytes.size(); ++l) {
    if (bytes[l] <= 0) continue;
    const auto& link = topo.links()[l];
    LinkLoad ll;
    ll.name = link.name;
    ll.cls = model::link_class_name(link.cls);
    ll.bytes = bytes[l];
    ll.bw_Bps = link.bw_Bps;
    ll.busy_s = bytes[l] / link.bw_Bps;  // (utilisation: once the step time is known)
    out.push_back(std::move(ll));
  }
  std::sort(out.begin(), out.end(), [](const LinkLoad& a, const LinkLoad& b) {
    return a.busy_s != b.busy_s ? a.busy_s > b.busy_s : a.name < b.name;
  });
  if (out.size() > top) out.resize(top);
  r.links = std::move(out);
}

}  // namespace

void sample_stats(Samples& s) {
  std::vector<double> v = s.step_time_s;
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  double sum = 0;
  for (double x : v) sum += x;
  s.mean_s = sum / static_cast<double>(n);
  double ss = 0;
  for (double x : v) ss += (x - s.mean_s) * (x - s.mean_s);
  s.stdev_s = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0.0;
  s.min_s = v.front();
  s.max_s = v.back();
  auto pct = [&](double p) {
    const double pos = p / 100.0 * static_cast<double>(n - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, n - 1);
    return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  s.p50_s = pct(50);
  s.p95_s = pct(95);
  s.p99_s = pct(99);
}

namespace {

/// Per-rank compute, communication and idle time from the trace's intervals, their averages
/// over the ranks that compute, time by category, op and layer kind, and the throughput figures.
/// In three parts, so that analyze() walks the ranks once (RankOps loads them in chunks): the
/// per-op sums, each rank in order, the averages.
class RankTimes {
 public:
  RankTimes(const scenario::Scenario& sc, const schedule::BuildInfo& info, const TaskGraph& g,
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
        if (is_cp_stream(op.stream)) cp_bytes_ += op.bytes;
      }
    });
  }

  /// Rank k's own figures (any thread: they touch rank k's entry only).
  void figures(int k, const RankTimelines& t) {
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

  /// Rank k's figures into the sums (ranks in order, so the sums are the same in any build).
  void add(int k) {
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

  void finish() {
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

 private:
  void tally(const schedule::Op& op, double s, double e) {
    if (op.kind == OpKind::Compute) {
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

  const scenario::Scenario& sc_;
  const schedule::BuildInfo& info_;
  const TaskGraph& g_;
  const schedule::Trace& tr_;
  Result& r_;
  int nr_;
  std::vector<double> by_name_, by_category_;
  double by_kind_sum_[3] = {0, 0, 0};  // other, full-attention, linear-attention
  std::vector<char> used_name_, used_category_;
  bool used_kind_[3] = {false, false, false};
  std::vector<char> computes_;
  int active_ = 0;
  double attn_max_ = 0, attn_sum_ = 0;
  double cp_bytes_ = 0;  ///< bytes on the context-parallel streams, summed in op order
};

/// Per rank: the waits before its compute ops, charged to what released them (wait_s,
/// waited_on, top_releaser), one rank at a time.
class WaitCharges {
 public:
  WaitCharges(const TaskGraph& g, const schedule::Trace& tr, Result& r) : g_(g), tr_(tr), r_(r) {
    for (OpId id = 0; id < g.size(); ++id)
      if (tr.end_s[id] > tr.end_s[last_]) last_ = id;
  }

  // Every stretch of a rank's step when it computes nothing ends with the compute op
  // that starts next; that op waited on its releaser (the predecessor that finished last), and
  // the stretch is charged to the releaser's rank (for a transfer, its other end as the rank
  // sees it) and summed by the releaser's kind. The stretch after the rank's last compute waits
  // for the step to end: it is charged to the op that ends the step. So per rank, compute_s +
  // wait_s = step time.
  struct Entry {
    double start;
    OpId id;
    double end;
  };
  /// A thread's buffers, kept from one rank to the next.
  struct Scratch {
    std::vector<Entry> ops, host;
    support::RunSortScratch<Entry> sort;
    std::vector<std::pair<OpId, double>> waited;
    std::vector<OpId> preds;
  };
  /// Rank k's (any thread: it touches rank k's entry of the result only).
  void rank(int k, const RankOps& ro, size_t first, size_t end, const RankTimelines& t, Scratch& s) const {
    const TaskGraph& g = g_;
    const schedule::Trace& tr = tr_;
    std::map<ReleaserKind, double> by_releaser;
    auto charge = [&](OpId rel, double wait) {
      int32_t shift;  // (a copied op read in place: copying it was ~6 % of this walk's samples)
      const schedule::Op& rop = g.stored_op(rel, shift);
      const bool transfer = rop.kind == OpKind::Transfer;
      const int rank = rop.rank + shift, peer = transfer ? rop.peer + shift : -1;
      const int who = transfer && rank == k ? peer : rank;
      r_.ranks[k].wait_s += wait;
      r_.ranks[k].waited_on[who] += wait;
      by_releaser[{rop.label.name, rop.label.scheme, rop.label.phase, rank, peer}] += wait;
    };
    // Rank k's compute ops by start, then id, sorted with their times beside them (t's): a
    // comparator reading the trace at random was 4.4 % of the 70B full replay. The host-side
    // overheads run ahead of the kernels, so the id order interleaves two runs that are each
    // in start order as a rule: each is sorted only if it is not, then the two are merged.
    auto before = [](const Entry& a, const Entry& b) {
      return a.start != b.start ? a.start < b.start : a.id < b.id;
    };
    std::vector<Entry>& ops = s.ops;
    std::vector<Entry>& host = s.host;
    ops.clear();
    host.clear();
    for (size_t i = first; i < end; ++i) {
      const uint8_t f = ro.flags()[i];
      if (f & RankOps::kTransfer) continue;
      (f & RankOps::kOverhead ? host : ops).push_back({t.start_s[i - first], ro.ids()[i], t.end_s[i - first]});
    }
    if (ops.empty() && host.empty()) return;
    for (std::vector<Entry>* v : {&ops, &host})
      support::sort_runs(*v, before, s.sort);
    const size_t kernels = ops.size();
    ops.insert(ops.end(), host.begin(), host.end());
    std::inplace_merge(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(kernels), ops.end(), before);
    // The ops that waited and how long, then their releasers a batch at a time: a batch's
    // predecessors gathered, their ends fetched, before any is read (each a cache miss, and
    // one after another they were ~5 % of the 70B full replay's samples).
    std::vector<std::pair<OpId, double>>& waited = s.waited;
    waited.clear();
    double busy_until = 0;
    for (const Entry& e : ops) {
      if (e.start > busy_until) waited.emplace_back(e.id, e.start - busy_until);
      busy_until = std::max(busy_until, e.end);
    }
    constexpr size_t kBatch = 32;
    std::vector<OpId>& preds = s.preds;
    size_t at[kBatch + 1];
    for (size_t b = 0; b < waited.size(); b += kBatch) {
      const size_t n = std::min(kBatch, waited.size() - b);
      preds.clear();
      for (size_t i = 0; i < n; ++i) {
        at[i] = preds.size();
        for_each_releasing(g, waited[b + i].first, [&](OpId p) {
          __builtin_prefetch(&tr.end_s[p]);
          preds.push_back(p);
        });
      }
      at[n] = preds.size();
      for (size_t i = 0; i < n; ++i) {
        Releaser rel{tr};
        for (size_t j = at[i]; j < at[i + 1]; ++j) rel(preds[j]);
        if (rel.best != schedule::kNoOp) charge(rel.best, waited[b + i].second);
      }
    }
    if (tr.makespan_s > busy_until) charge(last_, tr.makespan_s - busy_until);
    const ReleaserKind* best = nullptr;
    double best_wait = 0;
    for (const auto& [kind, wait] : by_releaser)
      if (wait > best_wait) {
        best_wait = wait;
        best = &kind;
      }
    if (!best) return;
    auto& top = r_.ranks[k].top_releaser;
    top.op = describe_kind(g, *best);
    top.rank = best->rank;
    top.wait_s = best_wait;
  }

 private:
  const TaskGraph& g_;
  const schedule::Trace& tr_;
  Result& r_;
  OpId last_ = 0;
};

/// The report's per-rank parts read each op's times at random (a rank's ops lie ~1,000 ids
/// apart on the 70B full replay): memory-bound work that scales with cores. Measured on that
/// replay (1,024 ranks, 24.3 M ops) on this 2-core VM: the whole report 4.4 s -> 2.6-2.9 s.
/// (How many threads and how they run: support/threads.hpp.)
using support::on_threads;
using support::threads_for;

/// The critical path and the rank whose compute lies most on it (the straggler).
void critical_path(const TaskGraph& g, const schedule::Trace& tr, Result& r) {
  // Walk back from the op that ends last through releasers.
  if (g.size() > 0) {
    OpId cur = 0;
    for (OpId id = 0; id < g.size(); ++id)
      if (tr.end_s[id] > tr.end_s[cur]) cur = id;
    r.critical_path.length_s = tr.makespan_s;
    while (cur != schedule::kNoOp) {
      r.critical_path.ops.push_back(cur);
      const auto& op = g.op(cur);
      const double d = tr.end_s[cur] - tr.start_s[cur];
      const std::string cat = g.str(op.label.category).empty() ? "other" : g.str(op.label.category);
      r.critical_path.by_category[cat] += d;
      if (op.kind == OpKind::Compute) r.critical_path.compute_by_rank[op.rank] += d;
      cur = releaser(g, tr, cur);
    }
    std::reverse(r.critical_path.ops.begin(), r.critical_path.ops.end());
    const auto& path = r.critical_path.ops;
    for (size_t i = path.size() > CriticalPath::kLastOps ? path.size() - CriticalPath::kLastOps : 0;
         i < path.size(); ++i)
      r.critical_path.last_described.push_back(g.describe(path[i]));
    double best = 0;
    for (const auto& [rank, s] : r.critical_path.compute_by_rank)
      if (s > best * (1 + 1e-9)) {
        best = s;
        r.straggler_rank = rank;
      }
  }
}

}  // namespace

struct GraphPart::Impl {
  std::optional<RankOps> ranks;
  std::optional<CommSplit> comm;
  Result links;  ///< links and bytes_per_link_class only
};

GraphPart::GraphPart(const TaskGraph& g, const model::Topology& topo, size_t top_links, unsigned threads)
    : impl_(std::make_unique<Impl>()) {
  impl_->ranks.emplace(g, RankOps::kMaxEntries, threads);
  impl_->comm.emplace(g);
  link_loads(g, topo, top_links, impl_->links);
}
GraphPart::~GraphPart() = default;
GraphPart::GraphPart(GraphPart&&) noexcept = default;
GraphPart& GraphPart::operator=(GraphPart&&) noexcept = default;

namespace {

/// analyze() once the graph's part is there, or being built on another thread (build_part).
Result analyze_with(const schedule::Plan& plan, const schedule::Trace& tr, const model::MemoryEstimate& memory,
                    std::optional<GraphPart>& part, const std::function<void()>& build_part, unsigned threads) {
  const scenario::Scenario& sc = plan.scenario;
  const TaskGraph& g = plan.graph;
  const schedule::BuildInfo& info = plan.info;
  Result r;
  r.name = sc.name;
  r.engine = tr.engine;
  r.scope = info.scope;
  r.step_time_s = tr.makespan_s;
  r.ops = g.size();
  r.sim_wall_s = tr.wall_s;
  r.symmetry = info.symmetry;
  r.replicas_copied = info.replicas_copied;
  r.why_not_copied = info.why_not_copied;
  r.pricing = plan.pricing;
  r.extrapolated_ops = plan.extrapolated_ops;
  r.memory = memory;
  r.model_flops = info.model_flops;

  // First the passes over the whole graph, two at a time (each writes its own fields of r
  // only): the per-op sums, the critical path, and the graph's part when it is not built yet.
  // Measured in one process on the 70B full replay, the whole report with two at a time and
  // one after the other, three times each: 2.15-2.70 s against 2.60-2.93 s.
  std::optional<RankTimes> times;
  std::optional<WaitCharges> waits;
  auto sums = [&] {
    times.emplace(sc, info, g, tr, r);
    waits.emplace(g, tr, r);
  };
  const unsigned passes = std::min(threads_for(threads, g.size()), 2u);
  on_threads(passes, [&](unsigned w) {
    if (w == 0) {
      sums();
      if (build_part || passes == 1) critical_path(g, tr, r);
      if (build_part && passes == 1) build_part();
    } else if (build_part) {
      build_part();
    } else {
      critical_path(g, tr, r);
    }
  });
  GraphPart::Impl& gp = part->impl();
  r.links = std::move(gp.links.links);
  for (LinkLoad& ll : r.links) ll.utilisation = r.step_time_s > 0 ? ll.busy_s / r.step_time_s : 0;
  r.bytes_per_link_class = std::move(gp.links.bytes_per_link_class);
  RankOps& ranks = *gp.ranks;
  CommSplit& comm = *gp.comm;
  // Then one walk over the ranks in order, each loaded once (RankOps), for the three per-rank
  // parts: each chunk's ranks on the machine's cores, then summed in rank order.
  ranks.for_each_chunk([&](int r0, int r1) {
    std::vector<CommSplit::Share> shares(static_cast<size_t>(r1 - r0));
    const unsigned n = threads_for(threads, ranks.end(r1 - 1));
    on_threads(n, [&](unsigned w) {
      WaitCharges::Scratch scratch;
      for (int k = r0 + static_cast<int>(w); k < r1; k += static_cast<int>(n)) {
        const RankTimelines t(ranks, ranks.begin(k), ranks.end(k), tr);  // merged once for the parts
        times->figures(k, t);
        shares[static_cast<size_t>(k - r0)] = comm.share(t);
        waits->rank(k, ranks, ranks.begin(k), ranks.end(k), t, scratch);
      }
    });
    for (int k = r0; k < r1; ++k) {
      times->add(k);
      comm.add(k, shares[static_cast<size_t>(k - r0)]);
    }
  });
  times->finish();
  r.communication = comm.result();
  return r;
}

}  // namespace

Result analyze(const schedule::Plan& plan, const schedule::Trace& tr, const model::Topology& topo,
               const model::MemoryEstimate& memory, size_t top_links, unsigned threads) {
  std::optional<GraphPart> part;
  return analyze_with(plan, tr, memory, part, [&] { part.emplace(plan.graph, topo, top_links, threads); }, threads);
}

Result analyze(const schedule::Plan& plan, const schedule::Trace& tr, const model::MemoryEstimate& memory,
               GraphPart built, unsigned threads) {
  std::optional<GraphPart> part(std::move(built));
  return analyze_with(plan, tr, memory, part, {}, threads);
}

}  // namespace cpsim::report
