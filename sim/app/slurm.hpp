#pragma once
/// The Slurm client side of `cpsim sweep --slurm`: the array batch script, `sbatch` and
/// `squeue`. Slurm is reached only through its command-line tools (found on PATH), never a
/// library, so cpsim builds and runs where Slurm is not installed. The tools run through a
/// pool::Runner (tests pass a fake one).
#include <cstddef>
#include <string>
#include <vector>

#include "app/process_pool.hpp"
#include "support/shell_quote.hpp"

namespace cpsim::app::slurm {

/// What one array job runs: task i runs `cpsim sweep SWEEP --shard i/K -o DIR ...`.
struct ArrayJob {
  std::string job_name;               ///< `#SBATCH --job-name`
  std::string cpsim;                  ///< absolute path of the cpsim binary
  std::string sweep_file;             ///< absolute path of the sweep file
  std::string out_dir;                ///< absolute path of the shared output directory
  size_t shards = 1;                  ///< K: the array is 0-(K-1)
  int cpus_per_task = 1;              ///< also the task's `-j`
  double timeout_s = 600;             ///< the task's `--timeout` per scenario
  std::string partition;              ///< empty: the cluster's default
  std::string time_limit;             ///< per array task, Slurm syntax ("30", "2:00:00"); empty: default
  std::vector<std::string> sets;      ///< `--set` overrides passed to every task
  std::vector<std::string> sbatch_args;  ///< extra `#SBATCH` options, verbatim ("--account=x")
};

/// The batch script's text: `#SBATCH` directives (array 0-(K-1), output DIR/slurm-%A_%a.out,
/// one task, exported environment) and one `exec` of cpsim with absolute paths. The tasks
/// always run with --resume: a task Slurm requeues, or one resubmitted, keeps the points its
/// shard finished (a fresh submission first removes the shard files, so it starts clean).
std::string batch_script(const ArrayJob& job);

/// Shard indices as a Slurm array list, ranges compressed: {0,1,2,5,7,8} -> "0-2,5,7-8".
std::string array_list(const std::vector<size_t>& indices);

/// The quoting a POSIX shell needs to read `s` as one word (support/shell_quote.hpp).
using support::shell_quote;

struct Submitted {
  bool ok = false;
  std::string job_id;  ///< the array's job id (%A)
  std::string error;   ///< sbatch's message when !ok
};

/// `sbatch --parsable [--array=LIST] SCRIPT`; an empty list keeps the script's own array.
Submitted submit(pool::Runner& runner, const std::string& script_path, const std::string& array);

/// What `squeue` says of one job's array tasks.
struct QueueState {
  bool answered = false;   ///< false: squeue failed (error says why); nothing is known
  size_t pending = 0;      ///< tasks waiting for resources
  size_t running = 0;      ///< tasks running, completing, or in any other live state
  std::string error;
  bool gone() const { return answered && pending == 0 && running == 0; }
};

/// Asks squeue about `job_id` (all its array tasks). A job squeue no longer knows ("Invalid
/// job id") has left the queue: answered, nothing pending or running.
QueueState query(pool::Runner& runner, const std::string& job_id);

}  // namespace cpsim::app::slurm
