#include "support/safe_write.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <ostream>
#include <streambuf>

#include "support/lifetime.hpp"

namespace cpsim::support {

namespace fs = std::filesystem;

namespace {

std::string random_hex() {
  unsigned char b[8] = {};
  size_t got = 0;
  while (got < sizeof b) {
    const ssize_t r = ::getrandom(b + got, sizeof b - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(r);
  }
  char out[17];
  for (size_t i = 0; i < sizeof b; ++i) std::snprintf(out + 2 * i, 3, "%02x", b[i]);
  return out;
}

/// Why `path` cannot be an output ("" = it can).
std::string refusal(const std::string& path) {
  if (path.empty()) return "the path is empty";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return "";
    if (errno == ELOOP) return "too many levels of symbolic links (a symlink loop?)";
    if (errno == ENOTDIR) return "a component of the path is not a directory";
    return "";  // e.g. EACCES: the write itself reports it with its reason
  }
  if (S_ISDIR(st.st_mode)) return "it is a directory; give a file name";
  if (S_ISBLK(st.st_mode)) return "it is a block device; cpsim writes files, FIFOs and character devices";
  if (S_ISSOCK(st.st_mode)) return "it is a socket; cpsim writes files, FIFOs and character devices";
  return "";
}

/// A FIFO or character device (/dev/null, /dev/stdout on a pipe or a terminal) is written as
/// it is: never replaced by a file. So is a regular file reached through the system's own
/// links to open descriptors (/dev/stdout, /dev/fd/N -> /proc/self/fd/N).
bool written_in_place(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) return true;
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode)) return false;
  const std::string abs = fs::absolute(path).lexically_normal().string();
  return abs.starts_with("/dev/") || abs.starts_with("/proc/");
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  return write_target(a) == write_target(b);
}

}  // namespace

std::string write_target(const std::string& path) {
  // The directory is resolved; the file name is not: a symlink there is replaced, never
  // followed (a link planted at an output would otherwise redirect the write to its target).
  const fs::path abs = fs::absolute(path).lexically_normal();
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(abs.parent_path(), ec);
  return ((ec ? abs.parent_path() : dir) / abs.filename()).string();
}

void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& o = outputs[i];
    if (o.path.empty()) continue;
    if (const std::string why = refusal(o.path); !why.empty())
      throw OutputError(o.option + " " + o.path + ": cannot write there: " + why);
    for (const NamedPath& in : inputs)
      if (!in.path.empty() && same_file(o.path, in.path))
        throw OutputError(o.option + " " + o.path + ": is the input " + (in.option.empty() ? "" : in.option + " ") +
                          in.path + "; writing it would destroy it");
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && same_file(o.path, outputs[j].path))
        throw OutputError(o.option + " " + o.path + ": is also the output of " + outputs[j].option +
                          "; give each output its own file");
  }
}

std::string temp_prefix(const std::string& file_name) {
  // A legal name is up to 255 bytes (NAME_MAX); its temporary adds 22: the name is cut to 200.
  // Appended, not "." + std::string&&: GCC 12 -O3 raises a false -Wrestrict there (bug 105651).
  std::string p = ".";
  p.append(file_name, 0, 200);
  p += ".tmp.";
  return p;
}

namespace {

/// A std::streambuf over a file descriptor we created (O_EXCL|O_NOFOLLOW), so a streamed
/// writer (the Chrome trace: millions of events) never holds the whole file in memory.
class FdBuf final : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd) { setp(buf_, buf_ + sizeof buf_); }
  int error() const { return error_; }
  int sync() override { return flush() ? 0 : -1; }

 protected:
  int_type overflow(int_type ch) override {
    if (!flush()) return traits_type::eof();
    if (ch != traits_type::eof()) {
      *pptr() = static_cast<char>(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }

 private:
  bool flush() {
    const char* p = pbase();
    while (p < pptr()) {
      const ssize_t w = ::write(fd_, p, static_cast<size_t>(pptr() - p));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = errno == 0 ? EIO : errno;
        return false;
      }
      p += w;
    }
    setp(buf_, buf_ + sizeof buf_);
    return true;
  }
  int fd_;
  int error_ = 0;
  char buf_[1 << 16];
};

}  // namespace

namespace {

/// Runs `write` into `fd` through a buffered stream; 0 or the errno of the first failed write.
int stream_into(int fd, const std::function<void(std::ostream&)>& write) {
  FdBuf buf(fd);
  std::ostream out(&buf);
  write(out);
  out.flush();
  if (!out || buf.error() != 0) return buf.error() != 0 ? buf.error() : EIO;
  return 0;
}

void write_in_place(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  int err = 0;
  try {
    err = stream_into(fd, write);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (const std::string why = refusal(path); !why.empty())
    throw OutputError("cannot write " + path + ": " + why);
  if (written_in_place(path)) return write_in_place(path, write);
  const fs::path target = write_target(path);
  const fs::path dir = target.parent_path();
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = (dir / (temp_prefix(target.filename().string()) + random_hex())).string();
    // Tracked before it exists: a signal between open and track would leave it behind.
    track_temporary(tmp);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) forget_temporary(tmp);
    if (fd < 0 && errno != EEXIST)
      throw std::runtime_error("cannot write " + path + ": cannot create a temporary file in " + dir.string() +
                               ": " + std::strerror(errno));
  }
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": no free temporary name in " + dir.string());
  auto drop = [&] {
    ::unlink(tmp.c_str());
    forget_temporary(tmp);
  };
  int err = 0;
  try {
    err = stream_into(fd, write);
  } catch (...) {
    ::close(fd);
    drop();
    throw;
  }
  // fsync before the rename: after a crash the target is the old file or the whole new one,
  // never a new name on blocks that were not written yet.
  if (err == 0 && ::fsync(fd) != 0 && errno != EINVAL) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    drop();
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    err = errno;
    drop();
    throw std::runtime_error("cannot write " + path + ": rename: " + std::strerror(err));
  }
  forget_temporary(tmp);
  if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
    ::fsync(d);  // the rename itself on disk; best effort (some file systems refuse)
    ::close(d);
  }
}

void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, [&text](std::ostream& out) { out.write(text.data(), static_cast<std::streamsize>(text.size())); });
}

std::string path_component(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
    out += ok ? c : '-';
  }
  if (!out.empty() && out.front() == '.') out.front() = '-';
  if (out.size() > 200) out.resize(200);
  return out.empty() ? "-" : out;
}

}  // namespace cpsim::support
