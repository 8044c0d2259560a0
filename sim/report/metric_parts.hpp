#pragma once
// Internal to the report stage: the metric families analyze() (metrics.cpp) composes, each in a
// file of its own: times (rank_times.cpp), waits and the critical path (waits.cpp), link loads
// (link_loads.cpp).
#include <cstddef>
#include <utility>
#include <vector>

#include "model/topology.hpp"
#include "report/intervals.hpp"
#include "report/metrics.hpp"
#include "report/rank_ops.hpp"
#include "schedule/step.hpp"
#include "schedule/task_graph.hpp"
#include "schedule/trace.hpp"
#include "support/run_sort.hpp"

namespace cpsim::report::detail {

/// Per-rank compute, communication and idle time from the trace's intervals, their averages
/// over the ranks that compute, time by category, op and layer kind, and the throughput figures.
/// In three parts, so that analyze() walks the ranks once (RankOps loads them in chunks): the
/// per-op sums, each rank in order, the averages (rank_times.cpp).
class RankTimes {
 public:
  /// The per-op sums.
  RankTimes(const scenario::Scenario& sc, const schedule::BuildInfo& info, const schedule::TaskGraph& g,
            const schedule::Trace& tr, Result& r);
  /// Rank k's own figures (any thread: they touch rank k's entry only).
  void figures(int k, const RankTimelines& t);
  /// Rank k's figures into the sums (ranks in order, so the sums are the same in any build).
  void add(int k);
  /// The averages.
  void finish();

 private:
  void tally(const schedule::Op& op, double s, double e);

  const scenario::Scenario& sc_;
  const schedule::BuildInfo& info_;
  const schedule::TaskGraph& g_;
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
/// waited_on, top_releaser), one rank at a time (waits.cpp).
class WaitCharges {
 public:
  WaitCharges(const schedule::TaskGraph& g, const schedule::Trace& tr, Result& r);

  // Every stretch of a rank's step when it computes nothing ends with the compute op
  // that starts next; that op waited on its releaser (the predecessor that finished last), and
  // the stretch is charged to the releaser's rank (for a transfer, its other end as the rank
  // sees it) and summed by the releaser's kind. The stretch after the rank's last compute waits
  // for the step to end: it is charged to the op that ends the step. So per rank, compute_s +
  // wait_s = step time.
  struct Entry {
    double start;
    schedule::OpId id;
    double end;
  };
  /// A thread's buffers, kept from one rank to the next.
  struct Scratch {
    std::vector<Entry> ops, host;
    support::RunSortScratch<Entry> sort;
    std::vector<std::pair<schedule::OpId, double>> waited;
    std::vector<schedule::OpId> preds;
  };
  /// Rank k's (any thread: it touches rank k's entry of the result only).
  void rank(int k, const RankOps& ro, size_t first, size_t end, const RankTimelines& t, Scratch& s) const;

 private:
  const schedule::TaskGraph& g_;
  const schedule::Trace& tr_;
  Result& r_;
  schedule::OpId last_ = 0;
};

/// Bytes and busy time of every link the graph's transfers cross, the `top` busiest first
/// (ties by name), and the bytes per link class (each transfer counted once per link of
/// the class its route crosses: its load), summed in op order.
void link_loads(const schedule::TaskGraph& g, const model::Topology& topo, size_t top, Result& r);

/// The critical path and the rank whose compute lies most on it (the straggler).
void critical_path(const schedule::TaskGraph& g, const schedule::Trace& tr, Result& r);

}  // namespace cpsim::report::detail
