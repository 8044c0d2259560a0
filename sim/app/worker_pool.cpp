// Workers that serve many jobs (worker_pool.hpp says why). A request is a command byte ('J' a
// job, 'T' give memory back), the job's memory limit (double) and a length-prefixed payload; a
// reply is a tag byte ('0' bytes follow, '1' an error message, '2' over its memory limit, 'T'
// trimmed), the worker's resident bytes (double) and a length-prefixed payload.
#include "app/worker_pool.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <thread>

#include "app/pool_fd.hpp"
#include "support/lifetime.hpp"

namespace cpsim::app::pool {

namespace {

using detail::read_exact;
using detail::write_all;

std::string frame(char tag, double value, const std::string& payload) {
  std::string out(1, tag);
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
  const uint64_t n = payload.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  return out + payload;
}

/// One frame from `fd`; false at end of file (the other side exited or closed its end).
bool read_frame(int fd, char& tag, double& value, std::string& payload) {
  uint64_t n = 0;
  if (!read_exact(fd, &tag, 1) || !read_exact(fd, &value, sizeof value) || !read_exact(fd, &n, sizeof n))
    return false;
  payload.assign(n, '\0');
  return n == 0 || read_exact(fd, payload.data(), n);
}

/// Writes to a worker that may have died since its last answer (the OOM killer takes idle ones
/// too) without dying of SIGPIPE: the signal is blocked for the write and a pending one taken.
/// 0 or the write's errno.
int send(int fd, const std::string& bytes) {
  sigset_t pipe_sig, old;
  sigemptyset(&pipe_sig);
  sigaddset(&pipe_sig, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_sig, &old);
  const int err = write_all(fd, bytes) ? 0 : (errno != 0 ? errno : EPIPE);
  if (err == EPIPE) {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_sig, nullptr, &zero) > 0) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return err;
}

// ---- the worker's side ---------------------------------------------------------------------------

/// The running job's limit (infinite between jobs) and whether its answer is being written:
/// the watchdog thread and the job's end race for it, as in process_pool.cpp's children.
std::atomic<double> g_limit{std::numeric_limits<double>::infinity()};
std::atomic<bool> g_answering{false};

[[noreturn]] void worker_main(const std::function<std::string(const std::string&)>& serve, int in, int out) {
  // Keep what jobs free: no block of the heap goes back to the system between jobs (mmap'd
  // blocks are unmapped when freed, and the heap's top is trimmed past 128 KB by default), so
  // the next job's graph lands on pages already faulted in. trim() gives it back on request.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  std::thread([out] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const double rss = resident_bytes();
      if (rss <= g_limit.load() || g_answering.exchange(true)) continue;
      char msg[160];
      std::snprintf(msg, sizeof msg, "resident memory reached %.3g GB, over its limit of %.3g GB", rss / 1e9,
                    g_limit.load() / 1e9);
      ::_exit(write_all(out, frame('2', rss, msg)) ? 4 : 3);
    }
  }).detach();
  for (;;) {
    char cmd = 0;
    double limit = 0;
    std::string request;
    if (!read_frame(in, cmd, limit, request)) ::_exit(0);
    if (cmd == 'T') {
      malloc_trim(0);
      if (!write_all(out, frame('T', resident_bytes(), ""))) ::_exit(3);
      continue;
    }
    g_limit = limit > 0 ? limit : std::numeric_limits<double>::infinity();
    std::string reply;
    char tag = '0';
    try {
      reply = serve(request);
    } catch (const std::exception& e) {
      reply = e.what();
      tag = '1';
    }
    if (g_answering.exchange(true)) for (;;) ::pause();  // the watchdog is answering and exiting
    g_limit = std::numeric_limits<double>::infinity();
    if (!write_all(out, frame(tag, resident_bytes(), reply))) ::_exit(3);
    g_answering = false;
  }
}

}  // namespace

// ---- the parent's side ---------------------------------------------------------------------------

WorkerPool::WorkerPool(std::function<std::string(const std::string&)> serve, int workers, double total_bytes)
    : serve_(std::move(serve)), max_workers_(std::max(1, workers)), total_(total_bytes) {}

WorkerPool::~WorkerPool() {
  for (Worker& w : workers_) end(w);
}

void WorkerPool::start_worker(Worker& w) {
  int req[2], rep[2];
  if (::pipe2(req, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(rep, O_CLOEXEC) != 0) {
    ::close(req[0]);
    ::close(req[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  std::cout.flush();
  std::cerr.flush();
  // support::start_child: a worker never outlives the search that started it (killed or crashed).
  const pid_t pid = support::start_child(false);
  if (pid < 0) {
    for (int fd : {req[0], req[1], rep[0], rep[1]}) ::close(fd);
    throw std::runtime_error(std::string("cannot start a worker process: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(req[1]);
    ::close(rep[0]);
    // The other workers' pipes, inherited: closed, so that each worker sees its own end of file.
    for (const Worker& o : workers_)
      if (&o != &w && o.pid > 0) {
        ::close(o.to);
        ::close(o.from);
      }
    worker_main(serve_, req[0], rep[1]);
  }
  ::close(req[0]);
  ::close(rep[1]);
  w = Worker{};
  w.pid = pid;
  w.to = req[1];
  w.from = rep[0];
  ++starts_;
}

void WorkerPool::end(Worker& w) {
  if (w.pid <= 0) return;
  ::close(w.to);
  ::close(w.from);
  if (w.job >= 0) ::kill(static_cast<pid_t>(w.pid), SIGKILL);  // abandoned mid-job (an exception)
  detail::wait_for(static_cast<pid_t>(w.pid));
  w = Worker{};
}

void WorkerPool::trim(Worker& w) {
  char tag = 0;
  double rss = 0;
  std::string none;
  if (send(w.to, frame('T', 0, "")) != 0 || !read_frame(w.from, tag, rss, none) || tag != 'T') {
    end(w);  // a worker that cannot trim is gone: the next job starts another
    return;
  }
  w.kept = rss;
}

double WorkerPool::held_by_others(const Worker& w) const {
  double sum = 0;
  for (const Worker& o : workers_)
    if (&o != &w && o.pid > 0) sum += o.job >= 0 ? std::max(o.hold, o.kept) : o.kept;
  return sum;
}

std::vector<double> WorkerPool::kept_bytes() const {
  std::vector<double> out;
  for (const Worker& w : workers_)
    if (w.pid > 0) out.push_back(w.kept);
  return out;
}

std::vector<ChildOutcome> WorkerPool::run(const std::vector<std::string>& requests, const std::vector<double>& limits) {
  std::vector<ChildOutcome> out(requests.size());
  std::vector<char> started(requests.size(), 0);
  workers_.resize(static_cast<size_t>(max_workers_));
  auto limit_of = [&](size_t k) { return k < limits.size() ? limits[k] : 0.0; };
  auto busy = [&] {
    int n = 0;
    for (const Worker& w : workers_) n += w.job >= 0;
    return n;
  };
  size_t left = requests.size();
  while (left > 0 || busy() > 0) {
    for (size_t k = 0; k < requests.size(); ++k) {
      if (started[k]) continue;
      // The idle worker holding the most (its heap is the likeliest to hold this job), or a
      // slot without a worker yet.
      Worker* w = nullptr;
      for (Worker& c : workers_)
        if (c.job < 0 && (w == nullptr || (c.pid > 0 && (w->pid <= 0 || c.kept > w->kept)))) w = &c;
      if (w == nullptr) break;
      const double need = std::max(limit_of(k), w->kept);
      if (total_ > 0 && held_by_others(*w) + need > total_) {
        for (Worker& o : workers_)  // idle workers give back what they kept
          if (&o != w && o.pid > 0 && o.job < 0 && o.kept > 0) trim(o);
        if (held_by_others(*w) + need > total_) {
          if (w->pid > 0 && w->job < 0 && w->kept > limit_of(k)) trim(*w);
          if (busy() > 0 && held_by_others(*w) + std::max(limit_of(k), w->kept) > total_) continue;
        }
      }
      if (w->pid <= 0) start_worker(*w);
      // The job may use what its worker already holds: those pages are its heap.
      int err = send(w->to, frame('J', limit_of(k) > 0 ? std::max(limit_of(k), w->kept) : 0, requests[k]));
      if (err != 0) {  // the worker died while idle: the job goes to a fresh one
        end(*w);
        start_worker(*w);
        err = send(w->to, frame('J', limit_of(k), requests[k]));
      }
      if (err != 0) {
        out[k].error = "worker: cannot send the job (" + std::string(std::strerror(err)) + ")";
        end(*w);
      } else {
        w->job = static_cast<long>(k);
        w->hold = limit_of(k);
      }
      started[k] = 1;
      --left;
    }
    if (busy() == 0) continue;
    std::vector<pollfd> fds;
    std::vector<Worker*> who;
    for (Worker& w : workers_)
      if (w.job >= 0) {
        fds.push_back({w.from, POLLIN, 0});
        who.push_back(&w);
      }
    while (::poll(fds.data(), fds.size(), -1) < 0 && errno == EINTR) {
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Worker& w = *who[i];
      ChildOutcome& o = out[static_cast<size_t>(w.job)];
      char tag = 0;
      double rss = 0;
      std::string payload;
      if (!read_frame(w.from, tag, rss, payload)) {
        ::close(w.to);
        ::close(w.from);
        o.error = "worker process " + detail::describe_status(detail::wait_for(static_cast<pid_t>(w.pid)));
        o.lost = true;
        w = Worker{};
        continue;
      }
      w.job = -1;
      w.kept = rss;
      if (tag == '0') {
        o.ok = true;
        o.value = std::move(payload);
      } else {
        o.error = std::move(payload);
        o.over_memory = tag == '2';
        o.lost = o.over_memory;
        if (o.over_memory) {  // it exits after answering
          ::close(w.to);
          ::close(w.from);
          detail::wait_for(static_cast<pid_t>(w.pid));
          w = Worker{};
        }
      }
    }
  }
  return out;
}

}  // namespace cpsim::app::pool
