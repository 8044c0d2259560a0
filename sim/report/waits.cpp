// The report's wait family: who each rank waited for (WaitCharges) and the critical path,
// both by releaser: the predecessor whose end let an op start.
#include <algorithm>
#include <map>
#include <string>

#include "report/metric_parts.hpp"
#include "support/run_sort.hpp"

namespace cpsim::report::detail {

using schedule::OpId;
using schedule::OpKind;
using schedule::TaskGraph;

namespace {

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

/// The kind without its ranks: "fwd ring-zigzag kv_p2p".
std::string describe_what(const TaskGraph& g, const ReleaserKind& k) {
  std::string s;
  if (k.phase == schedule::Phase::Forward) s += "fwd ";
  if (k.phase == schedule::Phase::Backward) s += "bwd ";
  if (k.phase == schedule::Phase::Optimizer) s += "opt ";
  if (k.scheme) s += g.str(k.scheme) + " ";
  return s + g.str(k.name);
}

std::string describe_kind(const TaskGraph& g, const ReleaserKind& k) {
  return describe_what(g, k) + (k.peer >= 0 ? " [r" + std::to_string(k.rank) + "->r" + std::to_string(k.peer) + "]"
                                            : " [r" + std::to_string(k.rank) + "]");
}

/// A rank's waits released by one kind of op: their total, and the longest one with where it
/// was (the releasing op's layer, micro-batch and step).
struct KindWaits {
  double total = 0, longest = 0;
  int32_t layer = -1, micro = -1, step = -1;
};

}  // namespace

WaitCharges::WaitCharges(const TaskGraph& g, const schedule::Trace& tr, Result& r) : g_(g), tr_(tr), r_(r) {
  for (OpId id = 0; id < g.size(); ++id)
    if (tr.end_s[id] > tr.end_s[last_]) last_ = id;
}

void WaitCharges::rank(int k, const RankOps& ro, size_t first, size_t end, const RankTimelines& t, Scratch& s) const {
  const TaskGraph& g = g_;
  const schedule::Trace& tr = tr_;
  std::map<ReleaserKind, KindWaits> by_releaser;
  auto charge = [&](OpId rel, double wait) {
    int32_t shift;  // (a copied op read in place: copying it was ~6 % of this walk's samples)
    const schedule::Op& rop = g.stored_op(rel, shift);
    const bool transfer = rop.kind == OpKind::Transfer;
    const int rank = rop.rank + shift, peer = transfer ? rop.peer + shift : -1;
    const int who = transfer && rank == k ? peer : rank;
    r_.ranks[k].wait_s += wait;
    r_.ranks[k].waited_on[who] += wait;
    KindWaits& w = by_releaser[{rop.label.name, rop.label.scheme, rop.label.phase, rank, peer}];
    w.total += wait;
    // The first of equal waits (ops come in start order): the same on every run.
    if (wait > w.longest) w = {w.total, wait, rop.label.layer, rop.label.micro, rop.label.step};
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
  // The kinds that released the most, most first (equal totals in the kinds' order, which
  // is fixed by the graph's interned names and the ranks).
  std::vector<std::pair<const ReleaserKind*, const KindWaits*>> kinds;
  for (const auto& [kind, w] : by_releaser)
    if (w.total > 0) kinds.emplace_back(&kind, &w);
  const size_t keep = std::min(kinds.size(), RankMetrics::kTopReleasers);
  std::partial_sort(kinds.begin(), kinds.begin() + static_cast<std::ptrdiff_t>(keep), kinds.end(),
                    [](const auto& a, const auto& b) {
                      return a.second->total != b.second->total ? a.second->total > b.second->total
                                                                : *a.first < *b.first;
                    });
  auto& out = r_.ranks[k].top_releasers;
  out.clear();
  for (size_t i = 0; i < keep; ++i) {
    const ReleaserKind& kind = *kinds[i].first;
    const KindWaits& w = *kinds[i].second;
    out.push_back({describe_kind(g, kind), kind.rank, w.total, describe_what(g, kind), w.longest, w.layer, w.micro,
                   w.step});
  }
  if (!out.empty()) r_.ranks[k].top_releaser = out.front();
}

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

}  // namespace cpsim::report::detail
