#include "app/sweep/common.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "support/bounded_read.hpp"
#include "scenario/load.hpp"

namespace cpsim::app::sweep {

int usage_error(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 2;
}

fs::path absolute_dir(const std::string& d) {
  fs::path p = fs::absolute(d).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p;
}

std::string read_file(const std::string& path) {
  // 256 MiB: a results table of a million points; a shard that is a FIFO or /dev/zero is
  // refused at once (support/bounded_read.hpp), never waited on or read without end.
  std::string why;
  std::optional<std::string> text = support::read_regular_file(path, 256u << 20, why);
  if (!text) throw std::invalid_argument("cannot read " + path + ": " + why);
  return std::move(*text);
}

std::optional<scenario::Sweep> load_points(const std::string& file, const std::vector<std::string>& sets) {
  scenario::Sweep sweep;
  try {
    sweep = scenario::load_sweep_file(file);
  } catch (const scenario::InputError& e) {
    std::cerr << e.what() << "\n";
    return std::nullopt;
  }
  for (auto& p : sweep.points) p.overrides.insert(p.overrides.end(), sets.begin(), sets.end());
  std::set<std::string> seen;
  for (const auto& p : sweep.points)
    if (!seen.insert(p.id).second) {
      std::cerr << file << ": error: two points share the id '" << p.id << "'\n";
      return std::nullopt;
    }
  return sweep;
}

std::string format_duration(double s) {
  char buf[32];
  if (s < 10) std::snprintf(buf, sizeof buf, "%.1fs", std::max(0.0, s));
  else if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  return buf;
}

OutputLock::OutputLock(const fs::path& dir, const std::string& csv_name) {
  const std::string path = (dir / ("." + csv_name + ".lock")).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open the lock file " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK)
      throw std::runtime_error("another sweep (pid " + (holder.empty() ? std::string("unknown") : holder) +
                               ") is writing " + (dir / csv_name).string() +
                               "; wait for it or give this one its own -o directory");
    throw std::runtime_error("cannot lock " + path + ": " + std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t w = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock; the file stays (removing it would race)
}

}  // namespace cpsim::app::sweep
