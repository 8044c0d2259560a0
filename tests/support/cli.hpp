#pragma once
// Running the built cpsim binary from tests (tests/app): its path, a command's exit code and
// output, and small file helpers.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace cpsim::cli {

inline const std::string kCpsim = CPSIM_BINARY_DIR "/cpsim";
/// The source tree: bundled scenario paths (scenarios/x.yaml) are relative to it.
inline const std::string kSource = CPSIM_SOURCE_DIR;

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

/// `cmd` run from the source tree.
inline Output in_source(const std::string& cmd) { return run("cd " + kSource + " && " + cmd); }

/// A scenario written as `yaml` into a temporary folder named cpsim_<tag>, run by `cpsim run`
/// with `args` and `--json r.json` there: the command's result and the folder.
struct YamlRun {
  Output out;
  std::filesystem::path dir;
};
inline YamlRun run_yaml(const std::string& yaml, const std::string& tag, const std::string& args);

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

/// A results CSV as rows of column name -> value (quoted fields, doubled quotes).
inline std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& p) {
  std::vector<std::vector<std::string>> recs;
  std::vector<std::string> row;
  std::string field, text = slurp(p);
  bool q = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (q) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') q = false;
      else field += c;
    } else if (c == '"') {
      q = true;
    } else if (c == ',') {
      row.push_back(field), field.clear();
    } else if (c == '\n') {
      row.push_back(field), field.clear();
      recs.push_back(row), row.clear();
    } else {
      field += c;
    }
  }
  std::vector<std::map<std::string, std::string>> out;
  for (size_t r = 1; r < recs.size(); ++r) {
    std::map<std::string, std::string> m;
    for (size_t c = 0; c < recs[0].size() && c < recs[r].size(); ++c) m[recs[0][c]] = recs[r][c];
    out.push_back(m);
  }
  return out;
}

inline YamlRun run_yaml(const std::string& yaml, const std::string& tag, const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path() / ("cpsim_" + tag);
  std::filesystem::create_directories(dir);
  const auto file = dir / "s.yaml";
  std::ofstream(file) << yaml;
  return {run(kCpsim + " run " + file.string() + " " + args + " --json " + (dir / "r.json").string()), dir};
}

}  // namespace cpsim::cli
