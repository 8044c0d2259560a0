#include "support/bounded_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cpsim::support {

namespace {

std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "it is a directory";
  if (S_ISFIFO(m)) return "it is a FIFO; a regular file is required";
  if (S_ISCHR(m)) return "it is a character device; a regular file is required";
  if (S_ISBLK(m)) return "it is a block device; a regular file is required";
  if (S_ISSOCK(m)) return "it is a socket; a regular file is required";
  return "it is not a regular file";
}

std::string size_text(size_t bytes) {
  return bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

}  // namespace

std::optional<std::string> read_regular_file(const std::string& path, size_t max_bytes, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = kind_of(st.st_mode);
    ::close(fd);
    return std::nullopt;
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    why = "larger than " + size_text(max_bytes);
    ::close(fd);
    return std::nullopt;
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      why = std::strerror(errno);
      ::close(fd);
      return std::nullopt;
    }
    if (r == 0) break;
    text.append(buf, static_cast<size_t>(r));
    if (text.size() > max_bytes) {  // it grew while read
      why = "larger than " + size_text(max_bytes);
      ::close(fd);
      return std::nullopt;
    }
  }
  ::close(fd);
  return text;
}

}  // namespace cpsim::support
