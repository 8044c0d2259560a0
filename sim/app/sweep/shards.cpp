#include "app/sweep/shards.hpp"

#include <algorithm>
#include <map>
#include <queue>
#include <tuple>

#include "report/output.hpp"
#include "scenario/load.hpp"

namespace cpsim::app::sweep {

std::optional<std::pair<size_t, size_t>> parse_shard(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos) return std::nullopt;
  try {
    size_t used = 0;
    const long i = std::stol(s.substr(0, slash), &used);
    if (used != slash) return std::nullopt;
    const std::string ks = s.substr(slash + 1);
    const long k = std::stol(ks, &used);
    if (used != ks.size() || k < 1 || static_cast<size_t>(k) > kMaxShards || i < 0 || i >= k) return std::nullopt;
    return std::make_pair(static_cast<size_t>(i), static_cast<size_t>(k));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::vector<double> point_costs(const std::vector<scenario::SweepPoint>& points) {
  std::vector<double> cost(points.size(), 0.0);
  for (size_t i = 0; i < points.size(); ++i) {
    try {
      const scenario::Scenario s = scenario::load_scenario(points[i].base_path, points[i].overrides);
      const auto& p = s.parallel;
      cost[i] = static_cast<double>(p.tp) * p.cp * p.pp * p.dp * static_cast<double>(s.training.seq_len);
    } catch (const std::exception&) {
      cost[i] = 0;
    }
  }
  return cost;
}

/// Point -> shard, a pure function of the costs and K (so of the sweep file, the --set
/// overrides and K): points by cost, largest first (ties by index), each to the shard with the
/// least cost so far (ties: fewer points, then the lower shard). Equal costs deal the points
/// round-robin (index % K); with K <= points no shard is empty.
std::vector<size_t> assign_shards(const std::vector<double>& cost, size_t k) {
  std::vector<size_t> order(cost.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&cost](size_t a, size_t b) { return cost[a] > cost[b]; });
  using Slot = std::tuple<double, size_t, size_t>;  // load, points, shard
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> least;
  for (size_t s = 0; s < k; ++s) least.emplace(0.0, 0, s);
  std::vector<size_t> shard(cost.size(), 0);
  for (size_t i : order) {
    const auto [load, n, s] = least.top();
    least.pop();
    shard[i] = s;
    least.emplace(load + cost[i], n + 1, s);
  }
  return shard;
}

Collected collect_shards(const fs::path& dir, const std::vector<scenario::SweepPoint>& points,
                         const std::vector<size_t>& shard_of, size_t k) {
  Collected c;
  c.rows.resize(points.size());
  c.shards.resize(k);
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < points.size(); ++i) by_id[points[i].id] = i;
  for (size_t s = 0; s < k; ++s) {
    const fs::path csv = dir / shard_csv_name(s, k);
    c.shards[s].has_csv = fs::exists(csv);
    for (Row& row : read_rows(csv.string())) {
      const auto it = by_id.find(row.id);
      if (it == by_id.end() || !same_values(row, points[it->second])) continue;
      const size_t i = it->second;
      const bool ok = row.status == "ok";
      if (ok) {  // as --resume: the row stands only for the result its JSON holds now
        const auto j = read_result_json(point_json(dir, points[i]));
        if (!j || !result_of_point(points[i], *j)) continue;
        fill_metrics(row, *j);
      }
      auto& have = c.rows[i];
      const bool have_ok = have && have->status == "ok";
      if (!have || (ok && !have_ok) || (ok == have_ok && s == shard_of[i])) have = std::move(row);
    }
  }
  for (size_t i = 0; i < points.size(); ++i) {
    ShardReport& r = c.shards[shard_of[i]];
    ++r.points;
    if (!c.rows[i]) {
      ++r.missing, ++c.missing;
    } else if (c.rows[i]->status == "ok") {
      ++r.ok, ++c.ok;
    } else {
      ++r.failed, ++c.failed;
      r.failed_ids.push_back(points[i].id);
    }
  }
  return c;
}

std::string write_merged(const fs::path& dir, const std::vector<scenario::SweepPoint>& points,
                         const Collected& c) {
  std::vector<const Row*> rows;
  for (const auto& r : c.rows)
    if (r) rows.push_back(&*r);
  const std::string path = (dir / "results.csv").string();
  report::write_atomic(path, csv_text(csv_header(swept_keys(points)), rows));
  return path;
}

}  // namespace cpsim::app::sweep
