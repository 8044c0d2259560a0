#pragma once
/// Each rank's ops in id order (its compute ops, the transfers it sends and receives), with what
/// the report's per-rank timelines need to know of each, so that those timelines are built one
/// rank at a time, and the index itself a bounded number of ranks at a time.
///
/// Why: built for every rank at once, the interval lists of the 70B full replay
/// (1,024 ranks, 24.3 M ops) peaked at 455 MB (heaptrack) and set the run's peak; the index
/// of every rank at once (5 B per op end, 30 M ends) still did, by 53 MB over the replay's.
#include <cstdint>
#include <vector>

#include "report/intervals.hpp"
#include "schedule/task_graph.hpp"
#include "schedule/trace.hpp"

namespace cpsim::report {

class RankOps {
 public:
  enum Flag : uint8_t {
    kTransfer = 1,   ///< a transfer (else compute)
    kOverhead = 2,   ///< compute of category "overhead": host-side, not GPU compute
    kAttention = 4,  ///< compute of category "attention"
  };
  /// Flags, plus the transfer's kind index (comm_split.hpp comm_kind_index) from bit 4.
  static constexpr int kKindShift = 4;
  /// Entries held at once (5 B each) unless one rank has more: 8 M is 40 MB.
  static constexpr size_t kMaxEntries = size_t{8} << 20;

  /// `threads`: how many load a chunk, each a slice of the ops (0: support::threads_for).
  explicit RankOps(const schedule::TaskGraph& g, size_t max_entries = kMaxEntries, unsigned threads = 0);
  int ranks() const { return static_cast<int>(off_.size()) - 1; }
  /// Calls f(r0, r1) for every chunk of ranks [r0, r1) in order, with their entries loaded:
  /// rank r's are [begin(r), end(r)) of ids() and flags() during the call. Ranks are loaded a
  /// few hundred thousand entries at a time, each load one pass over the graph's ops.
  template <class F>
  void for_each_chunk(F&& f) {
    const int nr = ranks();
    for (int r0 = 0; r0 < nr;) {
      int r1 = r0 + 1;
      while (r1 < nr && off_[static_cast<size_t>(r1) + 1] - off_[static_cast<size_t>(r0)] <= max_) ++r1;
      load(r0, r1);
      f(r0, r1);
      r0 = r1;
    }
  }
  /// Rank r's first entry and one past its last, in the chunk loaded now.
  size_t begin(int r) const { return off_[static_cast<size_t>(r)] - off_[static_cast<size_t>(loaded_[0])]; }
  size_t end(int r) const { return off_[static_cast<size_t>(r) + 1] - off_[static_cast<size_t>(loaded_[0])]; }
  const std::vector<schedule::OpId>& ids() const { return ids_; }
  const std::vector<uint8_t>& flags() const { return flags_; }

 private:
  void load(int r0, int r1);
  /// A compute op of a mirrored replica's GPU (TaskGraph::bystander): its own optimizer step,
  /// which stands for none of the full replay's per-rank figures; left out, so that GPU reads
  /// as one that does not compute (its DP transfers and launches stay).
  bool mirrored(const schedule::Op& op) const {
    return op.kind == schedule::OpKind::Compute && g_.bystander(op.rank);
  }
  const schedule::TaskGraph& g_;
  size_t max_;
  std::vector<size_t> off_;  ///< every rank's entries, as if all were held
  /// The ops split in slices, one per loading thread: slice t is ids [cut_[t], cut_[t + 1]),
  /// and before_[t][r] rank r's entries in the slices before t (where t's start in its list).
  std::vector<schedule::OpId> cut_;
  std::vector<std::vector<size_t>> before_;
  int loaded_[2] = {0, 0};
  std::vector<schedule::OpId> ids_;
  std::vector<uint8_t> flags_;
  uint32_t overhead_, offload_, attention_;
};

/// Transfer kinds (comm_split.hpp comm_kind_index): cp, tp, dp, pp, ep, other.
inline constexpr int kCommKinds = 6;

/// One rank's merged timelines, built once from its entries for every per-rank part of the
/// report: compute (GPU kernels, not the host-side overheads), attention, and its transfers by
/// kind; and each entry's start and end, read from the trace once (a rank's ops lie ~1,000 ids
/// apart on the 70B full replay, so each read is a cache miss: ~60 ns an entry).
struct RankTimelines {
  Intervals compute, attention, by_kind[kCommKinds];
  std::vector<double> start_s, end_s;  ///< entry first + i's
  RankTimelines(const RankOps& ro, size_t first, size_t last, const schedule::Trace& tr);
};

}  // namespace cpsim::report
