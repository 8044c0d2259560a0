#pragma once
/// With worker_pool.hpp (children that serve many jobs), the only code of cpsim that starts
/// processes, each through support/lifetime.hpp's start_child (the one owner: a child dies with
/// cpsim and is killed and reaped on SIGINT/SIGTERM). SimGrid allows one engine per process, so
/// every replay beyond the first runs in a child: a function in a child process that sends its
/// bytes back (run_in_child, run_in_children), or `cpsim run` exec'd with a log (Runner,
/// run_batch for sweeps). Commands go through the Runner interface and time through Clock, so
/// the sweep and Slurm code is tested with fakes (as ninja tests its SubprocessSet through a
/// fake CommandRunner) instead of environment variables or scripts on PATH. POSIX.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cpsim::app::pool {

// ---- one interrupt flag -------------------------------------------------------------------------

/// Set by SIGINT/SIGTERM/SIGHUP while an InterruptGuard lives, or by request_interrupt().
bool interrupted();
/// 128 + the signal that interrupted (130 for SIGINT, 143 for SIGTERM), as a shell reports it.
int interrupted_exit_code();
/// Sets the flag as a signal would (tests, and fakes that stand for an impatient user).
void request_interrupt();

/// Installs SIGINT/SIGTERM/SIGHUP handlers for its lifetime (in place of support/lifetime.hpp's,
/// which end the process at once) and clears the flag; commands run in their own process
/// groups, so a terminal's Ctrl-C reaches only cpsim, which then stops them.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct Saved;
  Saved* saved_;
};

// ---- functions in child processes ----------------------------------------------------------------

/// Runs `fn` in a child process and returns the bytes it returned there. Throws
/// std::runtime_error with the child's exception message, or saying which signal killed it.
std::string run_in_child(const std::function<std::string()>& fn);

/// Each job in its own child process, at most `parallel` at once; results in job order. After
/// the first failure no further job starts, the running ones finish, and its error is thrown.
std::vector<std::string> run_in_children(const std::vector<std::function<std::string()>>& jobs,
                                         int parallel);

/// One job's end in run_each_in_children: its bytes, or why it gave none.
struct ChildOutcome {
  bool ok = false;
  bool over_memory = false;  ///< stopped at its memory limit (error says how far it got)
  std::string value;         ///< the bytes it returned (ok)
  std::string error;         ///< its exception's message, or the signal that killed it (!ok)
  /// WorkerPool only: its worker stopped at the memory limit or died. The job's own answer is
  /// not known: a worker's heap holds what its earlier jobs left (fragments included), so a
  /// fresh process may finish where the worker did not.
  bool lost = false;
};

/// This process's resident bytes (/proc/self/statm), 0 when unknown. A child process starts
/// with its parent's resident pages counted in its own.
double resident_bytes();

/// A child's resident memory went over its limit (run_each_in_children).
class MemoryLimitExceeded : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Like run_in_children, but a job that throws or is killed (the kernel's OOM killer, a
/// crash) fails alone: every job runs and each reports its own outcome. For searches, where
/// one candidate's failure is an answer about that candidate, not about the search. With
/// `limit_bytes` > 0, a child whose resident memory passes it stops there (over_memory), so
/// that children side by side never add up to more than the machine has.
std::vector<ChildOutcome> run_each_in_children(const std::vector<std::function<std::string()>>& jobs,
                                               int parallel, double limit_bytes = 0);
/// Like run_each_in_children, with job k's child stopped at `limits[k]` resident bytes, and
/// children started (the first waiting job that fits, in job order) only while their limits
/// add up to at most `total_bytes`: a large job runs beside small ones instead of alone, and
/// no two large ones meet. A job whose limit alone is over the total runs when nothing else
/// does.
std::vector<ChildOutcome> run_each_in_children(const std::vector<std::function<std::string()>>& jobs,
                                               int parallel, const std::vector<double>& limits,
                                               double total_bytes);

// ---- commands -----------------------------------------------------------------------------------

/// How a command ended.
struct Exit {
  enum class How { Exited, Signaled, NotStarted };
  How how = How::NotStarted;
  int code = 0;  ///< exit code, signal number, or errno (NotStarted)
  /// waitpid-style: exit code, 128 + signal, or 127 when it never ran.
  int shell_code() const { return how == How::Exited ? code : how == How::Signaled ? 128 + code : 127; }
};

/// What a captured command printed.
struct Captured {
  int rc = -1;  ///< exit code (128 + signal); 127 when the program could not be executed
  std::string out, err;
};

/// Starts and watches commands. The system one starts processes and execs; tests pass fakes.
class Runner {
 public:
  using Id = long;
  virtual ~Runner() = default;
  /// Starts `cpsim ARGS` in its own process group, stdin and stdout on /dev/null, stderr into
  /// `log_path` (a new file: what was there, a symlink included, is removed first). Never throws: a command that cannot start reports
  /// Exit::How::NotStarted from poll().
  virtual Id start_cpsim(const std::vector<std::string>& args, const std::string& log_path) = 0;
  /// The command's exit once it ended (and is reaped); nullopt while it runs. Never blocks.
  virtual std::optional<Exit> poll(Id id) = 0;
  /// SIGKILL to the command and its process group; poll() then reports it.
  virtual void kill(Id id) = 0;
  /// Runs argv (argv[0] looked up on PATH) to its end with stdin on /dev/null, collecting
  /// stdout and stderr.
  virtual Captured capture(const std::vector<std::string>& argv) = 0;
  /// The cpsim binary start_cpsim runs (what a Slurm batch script execs).
  virtual std::string cpsim() const = 0;
};

/// Wall-clock time and sleeping; tests pass one whose sleep only advances its count.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now_s() = 0;
  virtual void sleep_s(double s) = 0;
};

/// The path of the running binary (/proc/self/exe).
std::string self_exe();

/// Runner of real processes; `cpsim` is the binary start_cpsim execs.
class SystemRunner : public Runner {
 public:
  explicit SystemRunner(std::string cpsim = self_exe());
  ~SystemRunner() override;
  Id start_cpsim(const std::vector<std::string>& args, const std::string& log_path) override;
  std::optional<Exit> poll(Id id) override;
  void kill(Id id) override;
  Captured capture(const std::vector<std::string>& argv) override;
  std::string cpsim() const override { return cpsim_; }

 private:
  std::string cpsim_;
  Id next_ = 0;
  std::map<Id, long> running_;  ///< id -> pid
  std::map<Id, Exit> ended_;    ///< ended, not yet polled (commands that could not start)
};

class SystemClock : public Clock {
 public:
  double now_s() override;
  void sleep_s(double s) override;
};

/// One finished command of run_batch.
struct Finished {
  size_t index = 0;  ///< which command (0 .. count-1)
  Exit exit;
  bool timed_out = false;  ///< killed after timeout_s
  double wall_s = 0;
};

/// Runs commands 0 .. count-1, `launch(i)` starting command i on `runner`, at most `jobs` at
/// once; kills one that runs longer than `timeout_s` (> 0); calls `done` as each finishes and
/// `tick(changed)` after each look at the running ones (about every 20 ms). Once interrupted(),
/// it starts no more, kills and reaps the running ones and returns false.
bool run_batch(Runner& runner, Clock& clock, size_t count, int jobs, double timeout_s,
               const std::function<Runner::Id(size_t)>& launch,
               const std::function<void(const Finished&)>& done,
               const std::function<void(bool changed)>& tick);

}  // namespace cpsim::app::pool
