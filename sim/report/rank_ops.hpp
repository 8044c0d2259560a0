#pragma once
/// Each rank's ops in id order (its compute ops, the transfers it sends and receives), with what
/// the report's per-rank timelines need to know of each, so that those timelines are built one
/// rank at a time.
///
/// Why (issue 20): built for every rank at once, the interval lists of the 70B full replay
/// (1,024 ranks, 24.3 M ops) peaked at 455 MB (heaptrack), more than this index costs (5 B per
/// op end), and pushed the run's peak past the replay's own.
#include <cstdint>
#include <vector>

#include "schedule/task_graph.hpp"

namespace cpsim::report {

class RankOps {
 public:
  enum Flag : uint8_t {
    kTransfer = 1,   ///< a transfer (else compute)
    kOverhead = 2,   ///< compute of category "overhead": host-side, not GPU compute
    kAttention = 4,  ///< compute of category "attention"
    kCp = 8,         ///< a transfer on a context-parallel stream
  };
  /// Flags, plus the transfer's kind index (comm_split.hpp comm_kinds()) from bit 4.
  static constexpr int kKindShift = 4;

  explicit RankOps(const schedule::TaskGraph& g);
  int ranks() const { return static_cast<int>(off_.size()) - 1; }
  /// Rank r's entries: [begin(r), end(r)) into ids() and flags().
  size_t begin(int r) const { return off_[static_cast<size_t>(r)]; }
  size_t end(int r) const { return off_[static_cast<size_t>(r) + 1]; }
  const std::vector<schedule::OpId>& ids() const { return ids_; }
  const std::vector<uint8_t>& flags() const { return flags_; }

 private:
  std::vector<size_t> off_;
  std::vector<schedule::OpId> ids_;
  std::vector<uint8_t> flags_;
};

}  // namespace cpsim::report
