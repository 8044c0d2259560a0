#pragma once
/// Sharding a sweep (`--shard i/K`, Slurm array tasks) by expected cost, and merging the K
/// shards' CSVs back into one results.csv.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/sweep/results_csv.hpp"

namespace cpsim::app::sweep {

/// Parses "i/K" with 0 <= i < K.
std::optional<std::pair<size_t, size_t>> parse_shard(const std::string& s);

/// A point's expected cost: GPUs (tp x cp x pp x dp) x tokens per sequence, what its run time
/// grows with. A point its scenario rejects costs 0: it fails at once.
std::vector<double> point_costs(const std::vector<scenario::SweepPoint>& points);

/// Point -> shard, a pure function of the costs and K (so of the sweep file, the --set
/// overrides and K): points by cost, largest first (ties by index), each to the shard with the
/// least cost so far (ties: fewer points, then the lower shard). Equal costs deal the points
/// round-robin (index % K); with K <= points no shard is empty.
std::vector<size_t> assign_shards(const std::vector<double>& cost, size_t k);

struct ShardReport {
  size_t points = 0, ok = 0, failed = 0, missing = 0;
  bool has_csv = false;
  std::vector<std::string> failed_ids;
};

/// What K shard CSVs in a directory hold, point by point.
struct Collected {
  std::vector<std::optional<Row>> rows;  ///< by point: its best row, if any
  std::vector<ShardReport> shards;
  size_t ok = 0, failed = 0, missing = 0;

  /// The shards with a point that is not ok: what a resume runs again.
  std::vector<size_t> incomplete() const {
    std::vector<size_t> out;
    for (size_t s = 0; s < shards.size(); ++s)
      if (shards[s].ok < shards[s].points) out.push_back(s);
    return out;
  }
};

/// Reads results.i-of-K.csv for every shard. A row counts for a point when its values are the
/// point's and, if ok, the point's JSON is there (as --resume decides). A row is looked for in
/// every shard's file, not only in the point's own, so a merge never loses a result; an ok row
/// wins over another, then the row of the point's own shard.
Collected collect_shards(const fs::path& dir, const std::vector<scenario::SweepPoint>& points,
                         const std::vector<size_t>& shard_of, size_t k);

/// Writes DIR/results.csv from the collected rows, in point order: the same file a local run of
/// the whole sweep writes. Merging again gives the same bytes.
std::string write_merged(const fs::path& dir, const std::vector<scenario::SweepPoint>& points,
                         const Collected& c);

}  // namespace cpsim::app::sweep
