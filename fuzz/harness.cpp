#include "harness.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <typeinfo>

namespace fs = std::filesystem;

namespace cpsim::fuzz {
namespace {

fs::path sandbox_root() {
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  return tmp / ("cpsim-fuzz-" + std::to_string(::getpid()));
}

void remove_sandbox() {
  std::error_code ec;
  fs::remove_all(sandbox_root(), ec);  // symlinks are removed, never followed
}

[[noreturn]] void setup_failed(const std::string& what) {
  std::fprintf(stderr, "fuzz harness: cannot set up the sandbox: %s\n", what.c_str());
  std::abort();
}

/// libFuzzer leaves without running atexit handlers (-max_total_time, a finding): sandboxes of
/// processes that are gone are removed by the next one.
void remove_stale_sandboxes(const fs::path& tmp) {
  std::error_code ec;
  for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("cpsim-fuzz-")) continue;
    const std::string digits = name.substr(11);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code rm;
      fs::remove_all(it->path(), rm);
    }
  }
}

fs::path make_sandbox() {
  const fs::path src = CPSIM_SOURCE_DIR;
  const fs::path root = sandbox_root();
  const fs::path work = root / "work";
  remove_stale_sandboxes(root.parent_path());
  try {
    fs::remove_all(root);
    fs::create_directories(work);
    for (const char* sub : {"scenarios", "platforms", "sweeps", "kernels"})
      if (fs::exists(src / sub)) fs::create_directory_symlink(src / sub, root / sub);
    for (const auto& e : fs::directory_iterator(src / "tests" / "scenario" / "data"))
      if (e.is_regular_file()) fs::create_symlink(e.path(), work / e.path().filename());
  } catch (const fs::filesystem_error& e) {
    setup_failed(e.what());
  }
  std::atexit(remove_sandbox);
  return work;
}

}  // namespace

const std::string& work_dir() {
  static const std::string dir = make_sandbox().string();
  return dir;
}

std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = work_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) setup_failed("cannot write " + path);
  return path;
}

std::vector<std::string> directive_lines(std::string_view text, std::string_view prefix, size_t max) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size() && out.size() < max) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with(prefix)) out.emplace_back(line.substr(prefix.size()));
    at = end + 1;
  }
  return out;
}

void check(bool ok, const char* target, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_%s: check failed: %s\n", target, what.c_str());
  std::abort();
}

void unexpected_exception(const char* target) {
  try {
    throw;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_%s: unexpected exception %s: %s\n", target, typeid(e).name(), e.what());
  } catch (...) {
    std::fprintf(stderr, "fuzz_%s: unexpected exception of a non-standard type\n", target);
  }
  std::abort();
}

}  // namespace cpsim::fuzz
