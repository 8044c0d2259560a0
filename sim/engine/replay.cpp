// Engine dispatch, and replays in a child process (SimGrid allows one Engine per process).
#include "engine/replay.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

namespace cpsim::engine {

Trace replay(const schedule::TaskGraph& g, const model::Topology& topo, scenario::EngineKind kind,
             const ReplayOptions& opt) {
  return kind == scenario::EngineKind::SimGrid ? replay_simgrid(g, topo, opt)
                                               : replay_analytic(g, topo, opt);
}

namespace {

// A flat byte stream: the child writes it into a pipe, the parent reads it back.
struct Writer {
  std::string buf;
  void raw(const void* p, size_t n) { buf.append(static_cast<const char*>(p), n); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void vec(const std::vector<double>& v) {
    u64(v.size());
    raw(v.data(), v.size() * sizeof(double));
  }
};

struct Reader {
  const std::string& buf;
  size_t at = 0;
  void raw(void* p, size_t n) {
    if (at + n > buf.size()) throw std::runtime_error("replay child: truncated result");
    std::memcpy(p, buf.data() + at, n);
    at += n;
  }
  uint64_t u64() {
    uint64_t v;
    raw(&v, sizeof v);
    return v;
  }
  double f64() {
    double v;
    raw(&v, sizeof v);
    return v;
  }
  std::string str() {
    std::string s(u64(), '\0');
    raw(s.data(), s.size());
    return s;
  }
  std::vector<double> vec() {
    std::vector<double> v(u64());
    raw(v.data(), v.size() * sizeof(double));
    return v;
  }
};

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

Trace replay_in_child(const schedule::TaskGraph& g, const model::Topology& topo,
                      scenario::EngineKind kind, const ReplayOptions& opt) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    Writer w;
    int code = 0;
    try {
      Trace t = replay(g, topo, kind, opt);
      w.u64(0);
      w.vec(t.start_s);
      w.vec(t.end_s);
      w.f64(t.makespan_s);
      w.str(t.engine);
      w.f64(t.wall_s);
    } catch (const std::exception& e) {
      w.buf.clear();
      w.u64(1);
      w.str(e.what());
      code = 1;
    }
    // _exit: the child must not run the parent's atexit handlers or flush its stdio buffers.
    ::_exit(write_all(fds[1], w.buf) ? code : 3);
  }
  ::close(fds[1]);
  std::string buf;
  char chunk[1 << 16];
  for (;;) {
    ssize_t r = ::read(fds[0], chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    buf.append(chunk, static_cast<size_t>(r));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    throw std::runtime_error("replay child killed by signal " + std::to_string(WTERMSIG(status)) +
                             " (" + strsignal(WTERMSIG(status)) + ")");
  Reader r{buf};
  if (buf.empty()) throw std::runtime_error("replay child exited without a result");
  if (r.u64() != 0) throw std::runtime_error(r.str());
  Trace t;
  t.start_s = r.vec();
  t.end_s = r.vec();
  t.makespan_s = r.f64();
  t.engine = r.str();
  t.wall_s = r.f64();
  return t;
}

}  // namespace cpsim::engine
