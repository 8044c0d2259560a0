#include "support/lifetime.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

namespace cpsim::support {

namespace {

// Fixed tables, so the signal handler reads them without allocating or locking. 256 children:
// a sweep runs at most --jobs at once (bounded far below), a search one per core. 64
// temporaries: a command writes a handful of files, one at a time.
constexpr int kMaxChildren = 256;
constexpr int kMaxTemporaries = 64;

struct ChildSlot {
  std::atomic<pid_t> pid{0};
  std::atomic<bool> group{false};
};
ChildSlot g_children[kMaxChildren];

struct TempSlot {
  std::atomic<int> state{0};  ///< 0 free, 1 being filled, 2 holds a path
  char path[PATH_MAX];
};
TempSlot g_temps[kMaxTemporaries];

extern "C" void on_fatal_signal(int sig) {
  for (ChildSlot& c : g_children) {
    const pid_t pid = c.pid.load();
    if (pid <= 0) continue;
    if (c.group.load()) ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
  }
  for (ChildSlot& c : g_children) {
    const pid_t pid = c.pid.load();
    if (pid <= 0) continue;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (TempSlot& t : g_temps)
    if (t.state.load() == 2) ::unlink(t.path);
  ::_exit(128 + sig);
}

void forget_all() {
  for (ChildSlot& c : g_children) c.pid = 0;
  for (TempSlot& t : g_temps) t.state = 0;
}

}  // namespace

namespace {
bool g_installed = false;  ///< install_signal_cleanup ran: reclaim_signals puts the handler back
}  // namespace

void install_signal_cleanup() {
  g_installed = true;
  reclaim_signals();
}

void reclaim_signals() {
  if (!g_installed) return;
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigfillset(&sa.sa_mask);  // one cleanup, never interrupted by the next signal
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    // A signal the shell told us to ignore (nohup, `cmd &` in a script) stays ignored.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

pid_t start_child(bool own_group) {
  const pid_t parent = ::getpid();
  // Signals blocked across the fork: a signal arriving between fork and the registration would
  // otherwise miss this child.
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  const pid_t pid = ::fork();
  if (pid == 0) {
    forget_all();
    if (own_group) ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return 0;
  }
  const int err = errno;
  if (pid > 0) {
    if (own_group) ::setpgid(pid, pid);  // also here: no race with the first kill
    for (ChildSlot& c : g_children) {
      pid_t free_slot = 0;
      if (!c.pid.compare_exchange_strong(free_slot, pid)) continue;
      c.group = own_group;  // signals are blocked: the handler cannot see the slot half filled
      break;
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return pid;
}

namespace {

void forget_child(pid_t pid) {
  for (ChildSlot& c : g_children) {
    pid_t expected = pid;
    if (c.pid.compare_exchange_strong(expected, 0)) return;
  }
}

/// Reaps `pid` after forgetting it (waitid with WNOWAIT left it a zombie, its pid still taken).
int reap(pid_t pid) {
  forget_child(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

int wait_child(pid_t pid) {
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  return reap(pid);
}

bool poll_child(pid_t pid, int& status) {
  siginfo_t info{};
  int r;
  while ((r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT | WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r < 0) {
    const int err = errno;
    forget_child(pid);
    status = -1;
    errno = err;
    return true;
  }
  if (info.si_pid == 0) return false;  // still running
  status = reap(pid);
  return true;
}

void track_temporary(const std::string& path) {
  if (path.size() >= PATH_MAX) return;
  for (TempSlot& t : g_temps) {
    int free_slot = 0;
    if (!t.state.compare_exchange_strong(free_slot, 1)) continue;
    std::memcpy(t.path, path.c_str(), path.size() + 1);
    t.state = 2;
    return;
  }
}

void forget_temporary(const std::string& path) {
  for (TempSlot& t : g_temps) {
    int held = 2;
    if (t.state.load() == 2 && path == t.path && t.state.compare_exchange_strong(held, 1)) {
      t.state = 0;
      return;
    }
  }
}

}  // namespace cpsim::support
