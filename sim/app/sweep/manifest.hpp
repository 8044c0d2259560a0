#pragma once
/// DIR/sweep-slurm.json: what was submitted, so that --merge and --resume need only DIR.
#include <optional>
#include <string>
#include <vector>

#include "app/slurm.hpp"
#include "app/sweep/shards.hpp"

namespace cpsim::app::sweep {

constexpr const char* kManifest = "sweep-slurm.json";

struct Manifest {
  std::string sweep_file;  ///< absolute
  size_t shards = 0;
  std::vector<std::string> sets;
  struct Submission {
    std::string job_id;
    std::vector<size_t> shards;
  };
  std::vector<Submission> submissions;
};


/// The manifest of DIR, if any; throws std::runtime_error when it cannot be read.
std::optional<Manifest> read_manifest(const fs::path& dir);
void write_manifest(const fs::path& dir, const Manifest& m, const slurm::ArrayJob& job);

/// The Slurm log of the last task that ran shard `s`, if it is there.
std::string task_log(const fs::path& dir, const std::optional<Manifest>& m, size_t s);

/// Prints what a merge found: one summary line, then each incomplete shard. Returns the exit
/// code: 0 when every point is ok, else 1.
int report_merge(const Collected& c, const fs::path& dir, const std::string& csv_path,
                 const std::optional<Manifest>& m, const std::string& rerun_hint, bool quiet);

}  // namespace cpsim::app::sweep
