#pragma once
/// Communication split by parallelism kind, so that a summary's "exposed communication" can be
/// read next to "CP comm 92 % hidden": TP, CP, PP, DP and EP traffic each with its own total and
/// exposed time. Transfers are classified by the stream the schedule put them on.
#include <map>
#include <string>
#include <vector>

#include "report/intervals.hpp"
#include "report/rank_ops.hpp"
#include "schedule/trace.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::report {

struct CommKind {
  double total_s = 0;    ///< mean over computing ranks of the union of this kind's transfers
  double exposed_s = 0;  ///< ... of that union minus the rank's compute
  double bytes = 0;      ///< mean over computing ranks of the bytes the rank sends of this kind
};

/// "tp", "cp", "pp", "dp", "ep" or "other" for a transfer stream: CP per schedule::stream::is_cp,
/// TP 3/4, DP 5/6, PP 7-10, EP 17/18.
const char* comm_kind(uint16_t stream);
/// Its index: cp 0, tp 1, dp 2, pp 3, ep 4, other 5.
int comm_kind_index(uint16_t stream);

/// Every kind that has transfers, plus tp, cp, pp and dp always (zero when absent). Means over
/// the ranks that compute (ranks that only mirror a replica in DP collectives do not count), as
/// the other per-rank means of Result. Kinds overlap in time, so their exposed times can add up
/// to more than the total exposed communication. Built rank by rank, in order, beside the
/// report's other per-rank parts (metrics.cpp analyze).
class CommSplit {
 public:
  explicit CommSplit(const schedule::TaskGraph& g);
  /// Rank r's transfers of each kind: their union's length and what of it no compute covers
  /// (any thread); `computes` false for a rank that does not compute.
  struct Share {
    bool computes = false;
    double total_s[kCommKinds] = {}, exposed_s[kCommKinds] = {};
  };
  Share share(const RankTimelines& t) const;
  /// Rank r's share into the means (ranks in order, so the sums are the same in any build).
  void add(int r, const Share& s);
  std::map<std::string, CommKind> result() const;

 private:
  bool present_[kCommKinds] = {};
  std::vector<double> sent_[kCommKinds];
  std::map<std::string, CommKind> out_;
  int active_ = 0;
};

}  // namespace cpsim::report
