#include "support/std_streams.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

namespace cpsim::support {

namespace {

bool g_closed[3] = {false, false, false};

void write_stderr(const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void guard_std_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    g_closed[fd] = true;
    // open() returns the lowest free descriptor: this one, since the lower ones are open by now.
    // stdout read-only: writes to it fail with EBADF, which finish_stdout reports.
    const int got = ::open("/dev/null", fd == STDERR_FILENO ? O_WRONLY : O_RDONLY);
    if (got >= 0 && got != fd) {
      ::dup2(got, fd);
      ::close(got);
    }
  }
  ::signal(SIGXFSZ, SIG_IGN);
}

bool was_closed(int fd) { return fd >= 0 && fd <= 2 && g_closed[fd]; }

int finish_stdout(int rc) {
  // The reason is the errno of the last flush that failed: a failed write keeps its bytes in
  // stdio's buffer, so the flush at the end retries and fails the same way.
  errno = 0;
  std::cout.flush();
  const bool stream_failed = std::cout.fail();
  const int cout_err = errno;
  errno = 0;
  const bool flush_failed = std::fflush(stdout) != 0;
  const int err = errno != 0 ? errno : cout_err;
  if (!stream_failed && !flush_failed && !std::ferror(stdout)) return rc;
  std::string why = g_closed[STDOUT_FILENO] ? "it is closed"
                    : err != 0              ? std::strerror(err)
                                            : "a write failed";
  write_stderr("cpsim: error: cannot write standard output: " + why + "\n");
  return rc != 0 ? rc : 1;
}

}  // namespace cpsim::support
