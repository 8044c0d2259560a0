#include "report/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <utility>

#include "report/comm_split.hpp"
#include "report/intervals.hpp"
#include "report/metric_parts.hpp"
#include "report/rank_ops.hpp"
#include "support/threads.hpp"

namespace cpsim::report {

using schedule::TaskGraph;
using detail::RankTimes;
using detail::WaitCharges;
using detail::critical_path;
using detail::link_loads;

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

/// The report's per-rank parts read each op's times at random (a rank's ops lie ~1,000 ids
/// apart on the 70B full replay): memory-bound work that scales with cores. Measured on that
/// replay (1,024 ranks, 24.3 M ops) on a 2-core virtual machine: the whole report 4.4 s ->
/// 2.6-2.9 s. (How many threads and how they run: support/threads.hpp.)
using support::on_threads;
using support::threads_for;

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
  r.pricing_time_s = plan.pricing_time_s;
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
