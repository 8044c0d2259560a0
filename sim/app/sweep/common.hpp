#pragma once
/// What every part of `cpsim sweep` shares: its arguments and the small helpers for errors,
/// paths and loading the sweep file.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "scenario/sweep.hpp"

namespace cpsim::app::sweep {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct SweepArgs {
  std::string sweep_file;
  std::string out_dir;
  int jobs = 0;
  double timeout_s = 600;
  bool resume = false;
  bool list = false;
  bool quiet = false;
  std::string shard;
  std::vector<std::string> sets;  ///< extra overrides applied to every point, after its own
  // Slurm and merging.
  bool slurm = false;
  size_t array_size = 0;          ///< K shards / array tasks; 0 = default
  std::string partition;
  std::string time_limit;
  bool wait = false;
  std::string merge_dir;
  std::vector<std::string> sbatch_args;
  std::string pivot;              ///< "KEY1,KEY2": print a step-time table after the sweep
};


constexpr size_t kDefaultArraySize = 32;
/// The most shards (--array-size, --shard i/K, a manifest's "shards"): each is a Slurm array task
/// and a results CSV; Slurm's own MaxArraySize defaults to 1,001 (slurm.conf(5)).
constexpr size_t kMaxShards = 100000;

/// Prints "error: message" and returns exit code 2.
int usage_error(const std::string& message);

/// An absolute, normalised directory path without a trailing slash.
fs::path absolute_dir(const std::string& d);

/// The whole file; std::invalid_argument naming it when it is not a regular file (a FIFO, a
/// device), is over 256 MiB or cannot be read.
std::string read_file(const std::string& path);

/// Loads the sweep, appends the --set overrides to every point, rejects duplicate ids.
std::optional<scenario::Sweep> load_points(const std::string& file, const std::vector<std::string>& sets);

/// "12.3s", "4m05s", "2h10m".
std::string format_duration(double s);

}  // namespace cpsim::app::sweep

namespace cpsim::app::sweep {

/// An exclusive lock on one results file of an output directory (DIR/.<csv>.lock, flock), held
/// while a sweep writes it: two sweeps into one -o would otherwise overwrite each other's rows.
/// The shards of a Slurm array write different CSVs and lock different files. The kernel
/// drops the lock when the process dies, so a killed sweep never leaves it stuck.
class OutputLock {
 public:
  /// Throws std::runtime_error naming the holder's pid when another process holds it.
  OutputLock(const fs::path& dir, const std::string& csv_name);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace cpsim::app::sweep
