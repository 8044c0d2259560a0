#include "app/sweep/slurm_job.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <set>

#include "app/process_pool.hpp"
#include "app/slurm.hpp"
#include "app/sweep/manifest.hpp"
#include "report/output.hpp"
#include "support/safe_write.hpp"

namespace cpsim::app::sweep {

namespace {

/// How often --wait asks squeue: a query costs slurmctld one RPC, and array tasks run minutes.
constexpr double kPollS = 2.0;

/// Waits until `job_id` has left the queue, showing how many points its shards finished.
/// Returns false when interrupted.
bool wait_for_job(pool::Runner& runner, pool::Clock& clock, const std::string& job_id, const fs::path& dir,
                  const std::vector<size_t>& shard_of,
                  const std::vector<size_t>& shards, size_t k, bool quiet) {
  std::set<size_t> mine(shards.begin(), shards.end());
  size_t total = 0;
  for (size_t s : shard_of) total += mine.count(s);
  const bool tty = ::isatty(STDERR_FILENO) && !quiet;
  const double t0 = clock.now_s();
  std::string last_line, last_error;
  pool::InterruptGuard guard;
  while (!pool::interrupted()) {
    const slurm::QueueState q = slurm::query(runner, job_id);
    if (q.gone()) break;
    if (!q.answered) {
      if (q.error != last_error)
        std::cerr << (tty ? "\r\033[K" : "") << "sweep: squeue: " << q.error << " (still waiting)\n";
      last_error = q.error;
    } else if (!quiet) {
      size_t done = 0;
      for (size_t s : shards) done += read_rows((dir / shard_csv_name(s, k)).string()).size();
      const std::string line = "[" + std::to_string(std::min(done, total)) + "/" + std::to_string(total) + "] job " +
                               job_id + ": tasks " + std::to_string(q.running) + " running, " +
                               std::to_string(q.pending) + " pending";
      if (line != last_line) std::cerr << (tty ? "\r\033[K" : "") << line << (tty ? "" : "\n") << std::flush;
      last_line = line;
    }
    // In short naps, so that Ctrl-C is noticed at once.
    const double until = clock.now_s() + kPollS;
    while (!pool::interrupted() && clock.now_s() < until) clock.sleep_s(0.02);
  }
  if (tty) std::cerr << "\r\033[K" << std::flush;
  if (pool::interrupted()) {
    std::cerr << "sweep: stopped waiting; job " << job_id << " goes on. Merge when it is done: cpsim sweep --merge "
              << slurm::shell_quote(dir.string()) << "\n";
    return false;
  }
  if (!quiet)
    std::cerr << "sweep: job " << job_id << " left the queue after "
              << format_duration(clock.now_s() - t0) << "\n";
  return true;
}

}  // namespace

int run_slurm(const SweepArgs& a, const scenario::Sweep& sweep, pool::Runner& runner, pool::Clock& clock) {
  const size_t n = sweep.points.size();
  const fs::path dir = absolute_dir(a.out_dir.empty() ? support::path_component(sweep.name) + "-sweep" : a.out_dir);
  if (dir.string().find_first_of(" \t\n%") != std::string::npos)
    return usage_error("--slurm: the output directory's path goes into `#SBATCH --output` and may not hold "
                       "blanks or '%': " + dir.string());
  if (n == 0) return usage_error("--slurm: the sweep has no points");
  for (const auto* v : {&a.partition, &a.time_limit})
    if (v->find_first_of("\n\r") != std::string::npos) return usage_error("--partition and --time take one line");
  for (const auto& v : a.sbatch_args)
    if (v.empty() || v.find_first_of("\n\r") != std::string::npos)
      return usage_error("--sbatch-arg takes one sbatch option on one line, e.g. --sbatch-arg=--account=proj");
  std::error_code ec;
  fs::create_directories(dir / "runs", ec);
  if (!ec) fs::create_directories(dir / "logs", ec);
  if (ec) {
    std::cerr << "error: cannot create " << dir.string() << ": " << ec.message() << "\n";
    return 1;
  }
  std::optional<Manifest> m;
  try {
    m = read_manifest(dir);
  } catch (const std::exception& e) {
    std::cerr << "sweep: " << e.what() << "\n";
    return 1;
  }
  // A submission still queued would write the same shard files as a new one.
  if (m)
    for (const auto& sub : m->submissions) {
      const slurm::QueueState q = slurm::query(runner, sub.job_id);
      if (!q.answered) {
        std::cerr << "sweep: cannot tell whether job " << sub.job_id << " (an earlier submission to " << dir.string()
                  << ") is still queued: " << q.error << "\n";
        return 1;
      }
      if (!q.gone()) {
        std::cerr << "sweep: job " << sub.job_id << " (an earlier submission to " << dir.string() << ") still has "
                  << q.running << " tasks running and " << q.pending
                  << " pending; wait for it (cpsim sweep --merge shows its progress) or scancel it first\n";
        return 1;
      }
    }

  size_t k = a.array_size ? a.array_size : std::min(n, kDefaultArraySize);
  if (a.resume && m && m->shards != k) {
    if (a.array_size)
      return usage_error("--resume: " + dir.string() + " was submitted as " + std::to_string(m->shards) +
                         " shards; drop --array-size or give the same K");
    k = m->shards;
  }
  if (k > n && !(a.resume && m)) {
    if (!a.quiet) std::cerr << "sweep: --array-size " << k << " > " << n << " points: using " << n << " array tasks\n";
    k = n;
  }
  const auto shard_of = assign_shards(point_costs(sweep.points), k);

  std::vector<size_t> to_run;
  Manifest next;
  next.sweep_file = fs::absolute(sweep.file).lexically_normal().string();
  next.shards = k;
  next.sets = a.sets;
  if (a.resume) {
    const Collected c = collect_shards(dir, sweep.points, shard_of, k);
    to_run = c.incomplete();
    if (m && m->shards == k) next.submissions = m->submissions;
    if (to_run.empty()) {
      if (!a.quiet) std::cerr << "sweep: resuming: all " << n << " points are done; nothing to submit\n";
      return report_merge(c, dir, write_merged(dir, sweep.points, c), m, "", a.quiet);
    }
    if (!a.quiet)
      std::cerr << "sweep: resuming: " << c.ok << " of " << n << " points done; resubmitting "
                << (to_run.size() == 1 ? "shard " : "shards ") << slurm::array_list(to_run) << " of " << k << "\n";
  } else {
    for (size_t s = 0; s < k; ++s) to_run.push_back(s);
    // A fresh sweep, as a local run without --resume: no row of an earlier run survives.
    std::vector<fs::path> stale;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name == "results.csv" || (name.starts_with("results.") && name.find("-of-") != std::string::npos &&
                                    name.ends_with(".csv")))
        stale.push_back(e.path());
    }
    for (const auto& p : stale) fs::remove(p, ec);
  }

  slurm::ArrayJob job;
  std::string name = "cpsim-" + sweep.name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '-';
  job.job_name = name;
  job.cpsim = fs::weakly_canonical(fs::absolute(runner.cpsim())).string();
  job.sweep_file = next.sweep_file;
  job.out_dir = dir.string();
  job.shards = k;
  job.cpus_per_task = a.jobs > 0 ? a.jobs : 1;
  job.timeout_s = a.timeout_s;
  job.partition = a.partition;
  job.time_limit = a.time_limit;
  job.sets = a.sets;
  job.sbatch_args = a.sbatch_args;
  const std::string script = (dir / "sweep.sbatch").string();
  try {
    report::write_atomic(script, slurm::batch_script(job));
    fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  } catch (const std::exception& e) {
    std::cerr << "sweep: " << e.what() << "\n";
    return 1;
  }
  const slurm::Submitted sub = slurm::submit(runner, script, to_run.size() == k ? "" : slurm::array_list(to_run));
  if (!sub.ok) {
    std::cerr << "sweep: sbatch " << script << ": " << sub.error << "\n";
    return 1;
  }
  next.submissions.push_back({sub.job_id, to_run});
  try {
    write_manifest(dir, next, job);
  } catch (const std::exception& e) {
    std::cerr << "sweep: job " << sub.job_id << " submitted, but " << e.what() << "\n";
    return 1;
  }
  size_t points_submitted = 0;
  for (size_t s : shard_of) points_submitted += std::binary_search(to_run.begin(), to_run.end(), s);
  if (a.quiet) {
    if (!a.wait) std::cout << sub.job_id << "\n";
  } else {
    std::cout << "sweep: submitted job " << sub.job_id << ": " << to_run.size()
              << (to_run.size() == 1 ? " array task (shard " : " array tasks (shards ") << slurm::array_list(to_run)
              << " of " << k << ") for " << points_submitted << " of " << n << " points -> " << dir.string() << "\n";
    if (!a.wait)
      std::cout << "sweep: when it is done: cpsim sweep --merge " << slurm::shell_quote(dir.string()) << "\n";
  }
  if (!a.wait) return 0;
  if (!wait_for_job(runner, clock, sub.job_id, dir, shard_of, to_run, k, a.quiet)) return pool::interrupted_exit_code();
  const std::optional<Manifest> now = next;
  Collected c = collect_shards(dir, sweep.points, shard_of, k);
  // On a shared filesystem the last files a node wrote may take a moment to show here.
  for (int retry = 0; retry < 3 && c.missing > 0 && !pool::interrupted(); ++retry) {
    clock.sleep_s(kPollS);
    c = collect_shards(dir, sweep.points, shard_of, k);
  }
  try {
    const std::string csv = write_merged(dir, sweep.points, c);
    return report_merge(c, dir, csv, now,
                        "cpsim sweep " + slurm::shell_quote(next.sweep_file) + " --slurm --resume -o " +
                            slurm::shell_quote(dir.string()),
                        a.quiet);
  } catch (const std::exception& e) {
    std::cerr << "merge: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace cpsim::app::sweep
