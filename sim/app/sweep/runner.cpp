#include "app/sweep/runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "report/output.hpp"
#include "report/safe_write.hpp"

namespace cpsim::app::sweep {

namespace {
volatile sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }


std::string self_exe() {
  // A test seam: run another program (same arguments) in place of `cpsim run`.
  if (const char* p = std::getenv("CPSIM_SWEEP_CHILD"); p && *p) return p;
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : p.string();
}
}  // namespace

bool interrupted() { return g_interrupted != 0; }

struct InterruptGuard::Saved {
  struct sigaction old_int {}, old_term {};
};

InterruptGuard::InterruptGuard() : saved_(new Saved) {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &saved_->old_int);
  sigaction(SIGTERM, &sa, &saved_->old_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &saved_->old_int, nullptr);
  sigaction(SIGTERM, &saved_->old_term, nullptr);
  delete saved_;
}

/// The first line of a child's stderr that says what went wrong.
std::string failure_reason(const std::string& log) {
  std::istringstream in(log);
  std::string line, first;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    const size_t b = line.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    line = line.substr(b);
    if (first.empty()) first = line;
    // "file:line:col: error: what" and "scenario: simulation failed: what" -> "what": the
    // status column already says it failed, and every point shares the base file.
    for (const char* mark : {"error: ", "failed: "}) {
      const size_t at = line.find(mark);
      if (at != std::string::npos) return line.substr(at + std::strlen(mark));
    }
  }
  return first;
}


struct Child {
  size_t point = 0;
  pid_t pid = -1;
  Clock::time_point started;
  bool timed_out = false;
  int fork_errno = 0;   ///< set when fork failed (pid == -1)
};

SweepRunner::SweepRunner(const SweepArgs& a, std::vector<scenario::SweepPoint> points, std::string csv_name)
    : args_(a), points_(std::move(points)), dir_(a.out_dir), csv_path_((dir_ / csv_name).string()), exe_(self_exe()) {
  for (const auto& p : points_)
    for (const auto& [k, v] : p.values)
      if (std::find(swept_.begin(), swept_.end(), k) == swept_.end()) swept_.push_back(k);
  header_ = csv_header(swept_);
  rows_.resize(points_.size());
}

std::string SweepRunner::json_path(size_t i) const { return (dir_ / "runs" / (points_[i].id + ".json")).string(); }
std::string SweepRunner::log_path(size_t i) const { return (dir_ / "logs" / (points_[i].id + ".log")).string(); }

/// Keeps the rows of a previous run that succeeded and whose JSON is still there.
size_t SweepRunner::load_previous(const std::vector<size_t>& todo) {
  std::map<std::string, size_t> by_id;
  for (size_t i : todo) by_id[points_[i].id] = i;
  size_t kept = 0;
  for (Row& row : read_rows(csv_path_)) {
    const auto it = by_id.find(row.id);
    if (it == by_id.end() || row.status != "ok") continue;
    if (!same_values(row, points_[it->second])) continue;
    // The row's metrics come again from its JSON: a row whose JSON does not parse (a
    // truncated or corrupted file) runs again, and a corrupted CSV cell is not kept.
    const auto j = read_result_json(json_path(it->second));
    if (!j) continue;
    fill_metrics(row, *j);
    if (!rows_[it->second]) ++kept;
    rows_[it->second] = std::move(row);
  }
  return kept;
}

/// Runs the points in `todo` that have no row yet. Returns the process exit code.
int SweepRunner::run(const std::vector<size_t>& todo) {
  std::vector<size_t> queue;
  size_t done = 0;
  for (size_t i : todo) {
    if (rows_[i]) ++done;
    else queue.push_back(i);
  }
  const size_t total = todo.size(), resumed = done;
  remove_stale_temporaries(todo);
  if (args_.resume && !args_.quiet)
    std::cerr << "sweep: resuming: " << resumed << " of " << total << " points already done\n";
  write_csv();

  const int jobs = std::max(1, args_.jobs);
  tty_ = ::isatty(STDERR_FILENO) && !args_.quiet;
  const auto t0 = Clock::now();
  auto last_draw = t0 - std::chrono::seconds(10);
  std::vector<Child> running;
  size_t next = 0, failed = 0;
  InterruptGuard guard;
  while ((next < queue.size() || !running.empty()) && !interrupted()) {
    while (next < queue.size() && running.size() < static_cast<size_t>(jobs) && !interrupted()) {
      running.push_back(spawn(queue[next++]));
    }
    bool changed = false;
    for (size_t c = 0; c < running.size();) {
      Child& ch = running[c];
      int status = 0;
      const pid_t r = ch.pid < 0 ? -1 : ::waitpid(ch.pid, &status, WNOHANG);
      if (r == 0) {
        const double age = std::chrono::duration<double>(Clock::now() - ch.started).count();
        if (args_.timeout_s > 0 && age > args_.timeout_s && !ch.timed_out) {
          ch.timed_out = true;
          ::kill(-ch.pid, SIGKILL);
          ::kill(ch.pid, SIGKILL);
        }
        ++c;
        continue;
      }
      if (r < 0 && ch.pid >= 0 && errno == EINTR) continue;
      const double wall = std::chrono::duration<double>(Clock::now() - ch.started).count();
      const Row& row = record(ch, r < 0 ? -1 : status);
      ++done;
      if (row.status != "ok") ++failed;
      report_point(ch.point, done, total, wall);
      running.erase(running.begin() + static_cast<long>(c));
      changed = true;
    }
    if (changed) write_csv();
    const auto now = Clock::now();
    if (tty_ && (changed || now - last_draw > std::chrono::milliseconds(500))) {
      const double el = std::chrono::duration<double>(now - t0).count();
      const size_t ran = done - resumed;
      std::string eta = "--";
      if (ran > 0) eta = format_duration(el / static_cast<double>(ran) * static_cast<double>(total - done));
      std::cerr << "\r\033[K[" << done << "/" << total << "] failed " << failed << "  ETA " << eta << std::flush;
      last_draw = now;
    }
    if (!changed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (tty_) std::cerr << "\r\033[K" << std::flush;
  if (interrupted()) {
    for (const Child& ch : running) {
      ::kill(-ch.pid, SIGKILL);
      ::kill(ch.pid, SIGKILL);
    }
    for (const Child& ch : running) ::waitpid(ch.pid, nullptr, 0);
    write_csv();
    std::cerr << "sweep: interrupted after " << done << " of " << total << " points; "
              << "rerun with --resume to finish (" << csv_path_ << ")\n";
    return 130;
  }
  const double el = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!args_.quiet) {
    std::map<std::string, size_t> by_status;
    for (size_t i : todo) by_status[rows_[i] ? rows_[i]->status : "not run"]++;
    std::string counts;
    for (const char* s : {"ok", "failed", "crashed", "timeout", "not run"})
      if (by_status[s]) counts += (counts.empty() ? "" : ", ") + std::to_string(by_status[s]) + " " + s;
    std::cout << "sweep: " << total << " points: " << counts;
    if (resumed) std::cout << " (" << resumed << " kept from the previous run)";
    std::cout << " in " << format_duration(el) << " -> " << csv_path_ << "\n";
  }
  return failed > 0 ? 1 : 0;
}

Child SweepRunner::spawn(size_t i) {
  const auto& p = points_[i];
  std::vector<std::string> argv = {exe_, "run", p.base_path};
  for (const auto& o : p.overrides) argv.push_back("--set=" + o);
  argv.insert(argv.end(), {"--json", json_path(i), "-q"});
  std::vector<char*> cargv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);

  std::error_code ec;
  fs::remove(json_path(i), ec);  // a stale result must not pass for this run's
  const int log = ::open(log_path(i).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const pid_t parent = ::getpid();
  Child ch;
  ch.point = i;
  ch.started = Clock::now();
  ch.pid = ::fork();
  if (ch.pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDOUT_FILENO);
    }
    if (log >= 0) ::dup2(log, STDERR_FILENO);
    ::execv(cargv[0], cargv.data());
    const char msg[] = "error: cannot execute the cpsim binary\n";
    [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  if (ch.pid > 0) ::setpgid(ch.pid, ch.pid);  // also here: no race with the first kill
  if (log >= 0) ::close(log);
  if (devnull >= 0) ::close(devnull);
  if (ch.pid < 0) {
    ch.fork_errno = errno;
    ch.pid = -1;
  }
  return ch;
}

/// Drops the half-written result files (report::write_atomic's "<id>.json.tmp.<pid>") that
/// children killed with an earlier sweep left behind; only this run's points, since other
/// shards may share the directory.
void SweepRunner::remove_stale_temporaries(const std::vector<size_t>& todo) const {
  std::set<std::string> ids;
  for (size_t i : todo) ids.insert(points_[i].id);
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir_ / "runs", ec)) {
    const std::string name = e.path().filename().string();
    for (const auto& id : ids)
      if (name.starts_with(report::temp_prefix(id + ".json")) || name.starts_with(id + ".json.tmp."))
        stale.push_back(e.path());
  }
  for (const auto& p : stale) fs::remove(p, ec);
}

/// Turns a finished child into its row. `status` is waitpid's, or -1 if it could not run.
Row& SweepRunner::record(const Child& ch, int status) {
  const size_t i = ch.point;
  Row& row = rows_[i].emplace();
  row.id = points_[i].id;
  for (const auto& [k, v] : points_[i].values) row.cells[k] = v;
  const std::string log = read_file(log_path(i));
  const std::string why = failure_reason(log);
  if (ch.pid < 0 || status < 0) {
    row.status = "failed";
    row.reason = "cannot start a process: " + std::string(std::strerror(ch.fork_errno));
  } else if (ch.timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", args_.timeout_s);
    row.status = "timeout";
    row.reason = std::string("killed after --timeout ") + buf + " s";
  } else if (WIFSIGNALED(status)) {
    row.status = "crashed";
    row.reason = std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                 ::strsignal(WTERMSIG(status)) + ")" + (why.empty() ? "" : ": " + why);
  } else if (WEXITSTATUS(status) != 0) {
    row.status = "failed";
    row.reason = why.empty() ? "exit code " + std::to_string(WEXITSTATUS(status)) : why;
  } else {
    if (const auto j = read_result_json(json_path(i))) {
      fill_metrics(row, *j);
      row.status = "ok";
    } else {
      row.status = "failed";
      row.reason = "no readable result JSON (" + json_path(i) + ")";
    }
  }
  // Keep a log only when it says something; drop what a killed child was writing
  // (report::write_atomic's temporary file).
  std::error_code ec;
  if (log.empty()) fs::remove(log_path(i), ec);
  if (ch.pid > 0) {
    std::vector<fs::path> tmp;
    const std::string prefix = report::temp_prefix(points_[i].id + ".json");
    for (const auto& e : fs::directory_iterator(dir_ / "runs", ec))
      if (e.path().filename().string().starts_with(prefix)) tmp.push_back(e.path());
    for (const auto& p : tmp) fs::remove(p, ec);
  }
  return row;
}

void SweepRunner::report_point(size_t i, size_t done, size_t total, double wall_s) {
  if (args_.quiet) return;
  const Row& row = *rows_[i];
  std::ostringstream line;
  line << "[" << done << "/" << total << "] " << row.status << " " << row.id;
  for (const auto& [k, v] : points_[i].values) line << " " << k << "=" << v;
  if (row.status == "ok") {
    const auto it = row.cells.find("step_time_s");
    if (it != row.cells.end()) {
      char t[48];
      std::snprintf(t, sizeof t, "  time %.4g s", std::atof(it->second.c_str()));
      line << t;
    }
  } else {
    line << ": " << row.reason;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "  (%.1f s)", wall_s);
  line << buf;
  // On a terminal only failures stay on screen; the progress line says the rest.
  if (tty_ && row.status == "ok") return;
  std::cerr << (tty_ ? "\r\033[K" : "") << line.str() << "\n";
}

void SweepRunner::write_csv() {
  std::vector<const Row*> rows;
  for (const auto& r : rows_)
    if (r) rows.push_back(&*r);
  report::write_atomic(csv_path_, csv_text(header_, rows));
}


}  // namespace cpsim::app::sweep
