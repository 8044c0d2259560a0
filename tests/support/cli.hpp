#pragma once
// Running the built cpsim binary from tests (tests/app): its path, a command's exit code and
// output, and small file helpers.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace cpsim::cli {

inline const std::string kCpsim = CPSIM_BINARY_DIR "/cpsim";

/// One attention layer at 16K on one DGX H100, analytic: the base of the tests' small sweeps.
inline constexpr const char* kTinyScenario = R"(name: tiny
platform: dgx-h100
model: qwen3.8-27b
training:
  seq_len: 16K
parallel:
  cp: 8
  attention:
    scheme: ring
    layout: zigzag
simulation:
  engine: analytic
  scope: attention-layer
)";

struct Output {
  int rc = -1;
  std::string text;  ///< stdout and stderr together
};

/// Runs `cmd` through the shell; rc is the exit code, or 128 + signal.
inline Output run(const std::string& cmd) {
  Output o;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return o;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) o.text.append(buf, n);
  const int st = ::pclose(p);
  o.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return o;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace cpsim::cli
