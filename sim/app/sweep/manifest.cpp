#include "app/sweep/manifest.hpp"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "report/output.hpp"

namespace cpsim::app::sweep {

std::optional<Manifest> read_manifest(const fs::path& dir) {
  const fs::path path = dir / kManifest;
  if (!fs::exists(path)) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(read_file(path.string()));
    Manifest m;
    m.sweep_file = j.at("sweep_file").get<std::string>();
    // As a signed number: get<size_t> would turn -1 into 2^64 - 1 shards.
    const long long shards = j.at("shards").get<long long>();
    if (shards < 1 || static_cast<size_t>(shards) > kMaxShards)
      throw std::runtime_error("\"shards\": " + std::to_string(shards) + " is not between 1 and " +
                               std::to_string(kMaxShards));
    m.shards = static_cast<size_t>(shards);
    m.sets = j.value("sets", std::vector<std::string>{});
    for (const auto& s : j.value("submissions", nlohmann::json::array()))
    {
      std::vector<size_t> ss;
      for (const auto& v : s.at("shards")) {
        const long long x = v.get<long long>();
        if (x < 0 || x >= shards) throw std::runtime_error("a submission names shard " + std::to_string(x));
        ss.push_back(static_cast<size_t>(x));
      }
      m.submissions.push_back({s.at("job_id").get<std::string>(), ss});
    }
    if (m.shards == 0) throw std::runtime_error("shards is 0");
    return m;
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot read " + path.string() + ": " + e.what());
  }
}

void write_manifest(const fs::path& dir, const Manifest& m, const slurm::ArrayJob& job) {
  nlohmann::json j;
  j["sweep_file"] = m.sweep_file;
  j["shards"] = m.shards;
  j["sets"] = m.sets;
  j["cpsim"] = job.cpsim;
  j["script"] = (dir / "sweep.sbatch").string();
  auto subs = nlohmann::json::array();
  for (const auto& s : m.submissions) subs.push_back({{"job_id", s.job_id}, {"shards", s.shards}});
  j["submissions"] = subs;
  report::write_atomic((dir / kManifest).string(), j.dump(2) + "\n");
}

/// The Slurm log of the last task that ran shard `s`, if it is there.
std::string task_log(const fs::path& dir, const std::optional<Manifest>& m, size_t s) {
  if (!m) return "";
  for (auto it = m->submissions.rbegin(); it != m->submissions.rend(); ++it)
    if (std::find(it->shards.begin(), it->shards.end(), s) != it->shards.end()) {
      const fs::path log = dir / ("slurm-" + it->job_id + "_" + std::to_string(s) + ".out");
      return fs::exists(log) ? log.string() : "";
    }
  return "";
}

/// Prints what a merge found: one summary line, then each incomplete shard. Returns the exit
/// code: 0 when every point is ok, else 1.
int report_merge(const Collected& c, const fs::path& dir, const std::string& csv_path,
                 const std::optional<Manifest>& m, const std::string& rerun_hint, bool quiet) {
  const size_t k = c.shards.size(), n = c.rows.size();
  if (!quiet) {
    std::string counts = std::to_string(c.ok) + " ok";
    if (c.failed) counts += ", " + std::to_string(c.failed) + " failed";
    if (c.missing) counts += ", " + std::to_string(c.missing) + " missing";
    std::cout << "merge: " << n << " points from " << k << " shards: " << counts << " -> " << csv_path << "\n";
  }
  for (size_t s = 0; s < k; ++s) {
    const ShardReport& r = c.shards[s];
    if (r.ok == r.points) continue;
    std::ostringstream line;
    line << "merge: shard " << s << "/" << k << ": ";
    if (r.missing) {
      line << r.missing << " of " << r.points << " points missing";
      if (!r.has_csv) line << " (no " << shard_csv_name(s, k) << ": the task never wrote a row)";
    }
    if (r.failed) {
      line << (r.missing ? "; " : "") << r.failed << " of " << r.points << " failed:";
      for (size_t f = 0; f < r.failed_ids.size() && f < 5; ++f) line << " " << r.failed_ids[f];
      if (r.failed_ids.size() > 5) line << " ...";
    }
    const std::string log = task_log(dir, m, s);
    if (!log.empty()) line << " (task log " << log << ")";
    std::cerr << line.str() << "\n";
  }
  if (c.ok < n && !rerun_hint.empty()) std::cerr << "merge: run the incomplete shards again: " << rerun_hint << "\n";
  return c.ok == n ? 0 : 1;
}


}  // namespace cpsim::app::sweep
