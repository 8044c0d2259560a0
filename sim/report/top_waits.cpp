// The summary's top waits: of every rank's most-waited-on kinds of op, one line per kind (the
// rank that waited on it most), so that a ring whose every rank waits alike reads as one line.
#include <algorithm>
#include <map>
#include <tuple>

#include "report/metrics.hpp"

namespace cpsim::report {

std::vector<TopWait> top_waits(const std::vector<RankMetrics>& ranks, size_t n) {
  // Rows before ranks: (wait, rank, op) ordering puts the group's representative first.
  auto before = [](const TopWait& a, const TopWait& b) {
    return std::forward_as_tuple(b.releaser.wait_s, a.rank, a.releaser.op) <
           std::forward_as_tuple(a.releaser.wait_s, b.rank, b.releaser.op);
  };
  std::map<std::string, std::vector<TopWait>> by_what;
  for (const RankMetrics& m : ranks)
    // A rank that computes nothing stands for a simulated one (a data-parallel replica the
    // symmetry shortcut leaves to its collectives): its whole step is a wait, not a finding.
    if (m.compute_s > 0)
      for (const auto& rel : m.top_releasers)
        if (rel.wait_s > 0) by_what[rel.what].push_back({m.rank, rel, 0, 0, 0});
  std::vector<TopWait> out;
  for (auto& [what, rows] : by_what) {
    std::sort(rows.begin(), rows.end(), before);
    TopWait top = rows.front();
    // Other ranks: a rank may wait on one kind from two peers; it counts once, with its sum.
    std::map<int, double> others;
    for (size_t i = 1; i < rows.size(); ++i)
      if (rows[i].rank != top.rank) others[rows[i].rank] += rows[i].releaser.wait_s;
    top.other_ranks = static_cast<int>(others.size());
    for (const auto& [rank, s] : others) {
      top.others_min_s = top.others_min_s == 0 ? s : std::min(top.others_min_s, s);
      top.others_max_s = std::max(top.others_max_s, s);
    }
    out.push_back(std::move(top));
  }
  std::sort(out.begin(), out.end(), before);
  if (out.size() > n) out.resize(n);
  return out;
}

}  // namespace cpsim::report
