// The pools of child processes (process_pool.hpp says why there are any); each is started and
// reaped through support/lifetime.hpp, the one owner of cpsim's processes.
#include "app/process_pool.hpp"

#include "app/pool_fd.hpp"
#include "support/lifetime.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace cpsim::app::pool {

namespace detail {

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

bool read_exact(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

int wait_for(pid_t pid) { return support::wait_child(pid); }

std::string describe_status(int status) {
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace detail

using detail::wait_for;
using detail::write_all;

namespace {

volatile sig_atomic_t g_interrupted = 0;  ///< the signal's number, SIGINT when requested
extern "C" void on_interrupt(int sig) { g_interrupted = sig; }

std::string read_all(int fd) {
  std::string buf;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    buf.append(chunk, static_cast<size_t>(r));
  }
  return buf;
}

Exit exit_of(int status) {
  Exit e;
  if (WIFSIGNALED(status)) {
    e.how = Exit::How::Signaled;
    e.code = WTERMSIG(status);
  } else {
    e.how = Exit::How::Exited;
    e.code = WEXITSTATUS(status);
  }
  return e;
}

/// A child process running one function: its pid and the pipe its answer comes through.
struct FnChild {
  size_t job;
  pid_t pid;
  int fd;
};

}  // namespace

double resident_bytes() {
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128] = {};
  const ssize_t r = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  unsigned long size = 0, resident = 0;
  if (r <= 0 || std::sscanf(buf, "%lu %lu", &size, &resident) != 2) return 0;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
}

namespace {

/// The child's answer goes out once: from its function, or from the memory watchdog.
std::atomic<bool> g_answered{false};

/// In a child with a memory limit: every 10 ms, compares the resident bytes with the limit and,
/// over it, answers '2' (over the limit) and exits, before the kernel's OOM killer picks a
/// victim among the siblings. Resident, not virtual: the op arrays reserve address space
/// before they touch it (the 405B children: 28 GB virtual for 19 GB resident).
void watch_memory(int fd, double limit_bytes) {
  auto check = [fd, limit_bytes] {
    const double rss = resident_bytes();
    if (rss <= limit_bytes || g_answered.exchange(true)) return;
    char msg[160];
    std::snprintf(msg, sizeof msg, "2resident memory reached %.3g GB, over its limit of %.3g GB", rss / 1e9,
                  limit_bytes / 1e9);
    ::_exit(write_all(fd, msg) ? 4 : 3);
  };
  check();  // a child already over its limit (the parent's pages) does not start
  std::thread([check] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      check();
    }
  }).detach();
}

/// Forks a child that runs `fn` and writes back one tag byte ('0' = bytes follow, '1' = an
/// error message follows, '2' = over its memory limit, see watch_memory) and the payload.
FnChild start_fn(const std::function<std::string()>& fn, size_t job, double limit_bytes = 0) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = support::start_child(false);
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("cannot start a child process: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (limit_bytes > 0) watch_memory(fds[1], limit_bytes);
    std::string out;
    int code = 0;
    try {
      out = "0" + fn();
    } catch (const std::exception& e) {
      out = std::string("1") + e.what();
      code = 1;
    }
    if (g_answered.exchange(true)) for (;;) ::pause();  // the watchdog is answering and exiting
    // _exit: the child must not run the parent's atexit handlers or flush its stdio buffers.
    ::_exit(write_all(fds[1], out) ? code : 3);
  }
  ::close(fds[1]);
  return {job, pid, fds[0]};
}

/// Reads the child's answer to its end (so a child never blocks on a full pipe) and reaps it.
/// `who` names the child in errors ("" leaves the child's own message as it is).
std::string finish_fn(const FnChild& c, const std::string& who) {
  const std::string name = who.empty() ? "child process" : who;
  const std::string buf = read_all(c.fd);
  ::close(c.fd);
  const int status = wait_for(c.pid);
  if (WIFSIGNALED(status)) throw std::runtime_error(name + " " + detail::describe_status(status));
  if (buf.empty()) throw std::runtime_error(name + " exited without a result");
  if (buf[0] == '2') throw MemoryLimitExceeded(buf.substr(1));
  if (buf[0] == '1') throw std::runtime_error(who.empty() ? buf.substr(1) : who + ": " + buf.substr(1));
  return buf.substr(1);
}

}  // namespace

bool interrupted() { return g_interrupted != 0; }
int interrupted_exit_code() { return 128 + (g_interrupted != 0 ? static_cast<int>(g_interrupted) : SIGINT); }
void request_interrupt() { g_interrupted = SIGINT; }

struct InterruptGuard::Saved {
  struct sigaction old_int {}, old_term {}, old_hup {};
};

InterruptGuard::InterruptGuard() : saved_(new Saved) {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &saved_->old_int);
  sigaction(SIGTERM, &sa, &saved_->old_term);
  sigaction(SIGHUP, &sa, &saved_->old_hup);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &saved_->old_int, nullptr);
  sigaction(SIGTERM, &saved_->old_term, nullptr);
  sigaction(SIGHUP, &saved_->old_hup, nullptr);
  delete saved_;
}

std::string run_in_child(const std::function<std::string()>& fn) {
  return finish_fn(start_fn(fn, 0), "");
}

namespace {

/// Index into `running` of a child whose answer can be read (its pipe readable or closed),
/// the first started among those ready; waits until one is.
size_t first_ready(const std::deque<FnChild>& running) {
  std::vector<pollfd> fds;
  for (const FnChild& c : running) fds.push_back({c.fd, POLLIN, 0});
  for (;;) {
    const int r = ::poll(fds.data(), fds.size(), -1);
    if (r > 0) break;
    if (r < 0 && errno != EINTR) return 0;  // cannot wait on them all: the oldest, blocking
  }
  for (size_t i = 0; i < fds.size(); ++i)
    if (fds[i].revents != 0) return i;
  return 0;
}

/// The children of run_in_children and run_each_in_children: every job runs unless
/// `stop_on_failure`, when none starts after the first failure (the running ones finish).
/// `limits[k]` > 0: job k's child stops at that resident memory, and children start (the
/// first waiting one that fits, in job order) only while their limits add up to at most
/// `total` (> 0); one whose limit alone is over `total` runs when nothing else does.
std::vector<ChildOutcome> run_children(const std::vector<std::function<std::string()>>& jobs, int parallel,
                                       bool stop_on_failure, const std::vector<double>& limits, double total) {
  std::vector<ChildOutcome> out(jobs.size());
  std::deque<FnChild> running;
  std::vector<char> started(jobs.size(), 0);
  size_t left = jobs.size();
  double reserved = 0;
  auto limit_of = [&](size_t k) { return k < limits.size() ? limits[k] : 0.0; };
  bool failed = false;
  while (left > 0 || !running.empty()) {
    for (size_t k = 0; !(failed && stop_on_failure) && k < jobs.size() &&
                       running.size() < static_cast<size_t>(std::max(1, parallel));
         ++k) {
      if (started[k]) continue;
      if (total > 0 && !running.empty() && reserved + limit_of(k) > total) continue;
      running.push_back(start_fn(jobs[k], k, limit_of(k)));
      started[k] = 1;
      reserved += limit_of(k);
      --left;
    }
    if (running.empty()) break;
    // The first child to answer (a child writes its answer once, when done): one long job does
    // not hold the free slots behind it. (Reaping in start order left a core idle for most of
    // a 20 s child while the 3 s ones behind it had finished: cpsim plan's steps and attention
    // layers.)
    const size_t i = first_ready(running);
    const FnChild c = running[i];
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    reserved -= limit_of(c.job);
    try {
      out[c.job].value = finish_fn(c, stop_on_failure ? "child run " + std::to_string(c.job + 1) : "");
      out[c.job].ok = true;
    } catch (const MemoryLimitExceeded& e) {
      out[c.job].error = e.what();
      out[c.job].over_memory = true;
      failed = true;
    } catch (const std::exception& e) {
      out[c.job].error = e.what();
      failed = true;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> run_in_children(const std::vector<std::function<std::string()>>& jobs,
                                         int parallel) {
  std::vector<ChildOutcome> each = run_children(jobs, parallel, true, {}, 0);
  std::vector<std::string> out(jobs.size());
  // The first failure in the order the children were reaped (their start order).
  for (size_t k = 0; k < each.size(); ++k) {
    if (!each[k].ok && !each[k].error.empty()) throw std::runtime_error(each[k].error);
    out[k] = std::move(each[k].value);
  }
  return out;
}

std::vector<ChildOutcome> run_each_in_children(const std::vector<std::function<std::string()>>& jobs,
                                               int parallel, double limit_bytes) {
  return run_children(jobs, parallel, false, std::vector<double>(jobs.size(), limit_bytes), 0);
}

std::vector<ChildOutcome> run_each_in_children(const std::vector<std::function<std::string()>>& jobs,
                                               int parallel, const std::vector<double>& limits,
                                               double total_bytes) {
  return run_children(jobs, parallel, false, limits, total_bytes);
}

std::string self_exe() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : p.string();
}

SystemRunner::SystemRunner(std::string cpsim) : cpsim_(std::move(cpsim)) {}

SystemRunner::~SystemRunner() {
  for (const auto& [id, pid] : running_) {
    ::kill(-static_cast<pid_t>(pid), SIGKILL);
    ::kill(static_cast<pid_t>(pid), SIGKILL);
    wait_for(static_cast<pid_t>(pid));
  }
}

Runner::Id SystemRunner::start_cpsim(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> argv = {cpsim_};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  // A new file, never through a link: whatever was at the log's path (a previous run's log, a
  // planted symlink) is removed, not truncated or followed.
  ::unlink(log_path.c_str());
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = support::start_child(true);
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
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
  const int start_errno = errno;
  if (log >= 0) ::close(log);
  if (devnull >= 0) ::close(devnull);
  const Id id = next_++;
  if (pid < 0) ended_[id] = Exit{Exit::How::NotStarted, start_errno};
  else running_[id] = pid;
  return id;
}

std::optional<Exit> SystemRunner::poll(Id id) {
  if (const auto e = ended_.find(id); e != ended_.end()) {
    const Exit x = e->second;
    ended_.erase(e);
    return x;
  }
  const auto it = running_.find(id);
  if (it == running_.end()) return Exit{Exit::How::NotStarted, ECHILD};
  int status = 0;
  if (!support::poll_child(static_cast<pid_t>(it->second), status)) return std::nullopt;
  running_.erase(it);
  if (status < 0) return Exit{Exit::How::NotStarted, errno};
  return exit_of(status);
}

void SystemRunner::kill(Id id) {
  const auto it = running_.find(id);
  if (it == running_.end()) return;
  ::kill(-static_cast<pid_t>(it->second), SIGKILL);
  ::kill(static_cast<pid_t>(it->second), SIGKILL);
}

Captured SystemRunner::capture(const std::vector<std::string>& argv) {
  Captured r;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.err = std::strerror(errno);
    return r;
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.err = std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return r;
  }
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& s : args) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = support::start_child(false);
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execvp(cargv[0], cargv.data());
    const std::string msg = std::string(cargv[0]) + ": " + std::strerror(errno) + "\n";
    [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    r.err = std::string("cannot start a child process: ") + std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return r;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[k]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  r.rc = exit_of(wait_for(pid)).shell_code();
  return r;
}

double SystemClock::now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void SystemClock::sleep_s(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

bool run_batch(Runner& runner, Clock& clock, size_t count, int jobs, double timeout_s,
               const std::function<Runner::Id(size_t)>& launch,
               const std::function<void(const Finished&)>& done,
               const std::function<void(bool changed)>& tick) {
  struct Running {
    size_t index;
    Runner::Id id;
    double started;
    bool timed_out = false;
  };
  std::vector<Running> running;
  size_t next = 0;
  while ((next < count || !running.empty()) && !interrupted()) {
    while (next < count && running.size() < static_cast<size_t>(std::max(1, jobs)) && !interrupted()) {
      const double t = clock.now_s();
      running.push_back({next, launch(next), t});
      ++next;
    }
    bool changed = false;
    for (size_t c = 0; c < running.size();) {
      Running& r = running[c];
      const std::optional<Exit> e = runner.poll(r.id);
      if (!e) {
        if (timeout_s > 0 && clock.now_s() - r.started > timeout_s && !r.timed_out) {
          r.timed_out = true;
          runner.kill(r.id);
        }
        ++c;
        continue;
      }
      done(Finished{r.index, *e, r.timed_out, clock.now_s() - r.started});
      running.erase(running.begin() + static_cast<long>(c));
      changed = true;
    }
    tick(changed);
    // 20 ms: a finished point is noticed at once on the scale of a scenario's run (0.1 s+).
    if (!changed) clock.sleep_s(0.02);
  }
  if (!interrupted()) return true;
  for (const Running& r : running) runner.kill(r.id);
  for (const Running& r : running)
    while (!runner.poll(r.id)) clock.sleep_s(0.005);
  return false;
}

}  // namespace cpsim::app::pool
