// Fuzz target: cpsim's command line. The input is split into arguments (at NUL, newline and
// space; at most kMaxArgs of at most kMaxArgLen bytes) and run through app::dispatch, the same
// code main() runs, in-process, for every subcommand. A finding: a crash, an abort, a sanitizer
// report, a hang (-timeout), an exit code other than 0/1/2, a failure (exit 1 or 2) that prints
// no reason, or an internal error (a std::logic_error that reached the error boundary).
//
// The input runs in the harness's sandbox (the working directory is fuzz::work_dir() while it
// runs), and the command line is made safe and quick first (sandboxed()):
//  - the value of every output option (--json, --trace, -o/--out/--output, --merge) becomes a
//    plain file name in the sandbox, so no input can write outside it;
//  - what would start other processes or unbounded work is dropped: --samples, -j/--jobs,
//    --what-if-straggler, --slurm/--wait/--shard (sbatch, and a sweep's children exec
//    /proc/self/exe, the fuzzer), --force, --max-memory, --engine, --timeout, --verify, --budget,
//    and any `simulation...` override;
//  - each subcommand gets bounding arguments right after its name: the analytic engine (SimGrid
//    holds one engine per process, and the SimGrid paths fork), simulation.scope=layer, a 64 MiB
//    --max-memory for run (and CPSIM_MAX_MEMORY for every estimate), `memory --no-simulate`,
//    `sweep --list`, a plan of at most 4 GPUs and a budget of 2 runs.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "app/dispatch.hpp"
#include "harness.hpp"

namespace {

constexpr size_t kMaxArgs = 24;
constexpr size_t kMaxArgLen = 256;

std::vector<std::string> split_args(const uint8_t* data, size_t size) {
  std::vector<std::string> out;
  std::string cur;
  bool pending = false;  // a NUL ends an argument even when it is empty ("--json\0\0")
  for (size_t i = 0; i < size && out.size() < kMaxArgs; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == '\n' || c == ' ') {
      if (!cur.empty() || (c == '\0' && pending)) out.push_back(cur.substr(0, kMaxArgLen));
      cur.clear();
      pending = c == '\0';
      continue;
    }
    cur.push_back(c);
    pending = true;
  }
  if (!cur.empty() && out.size() < kMaxArgs) out.push_back(cur.substr(0, kMaxArgLen));
  return out;
}

/// A name safe to write in the sandbox: path separators and dots at the start removed.
std::string plain_name(const std::string& v) {
  std::string s;
  for (char c : v)
    if (c != '/' && c != '\\') s.push_back(c);
  while (!s.empty() && s.front() == '.') s.erase(s.begin());
  return s.empty() ? std::string() : "out-" + s;
}

bool one_of(const std::string& a, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (a == n) return true;
  return false;
}

/// `--name=value`, or `-xvalue` for a short option: the option name, else "".
std::string option_of(const std::string& a) {
  if (a.starts_with("--")) return a.substr(0, a.find('='));
  if (a.size() > 2 && a[0] == '-' && a[1] != '-') return a.substr(0, 2);
  return a;
}

const std::initializer_list<const char*> kOutputs = {"--json", "--trace", "--out", "--output", "--merge"};
const std::initializer_list<const char*> kDropped = {
    "--samples", "-j",      "--jobs",  "--what-if-straggler", "--slurm",  "--wait",   "--shard",
    "--force",   "--max-memory", "--engine", "--timeout", "--verify", "--budget", "--array-size",
    "--sbatch-arg", "--partition", "--time", "--resume"};
// Options of those that take a value (the next argument, when not attached with '=').
const std::initializer_list<const char*> kDroppedWithValue = {
    "--samples", "-j", "--jobs", "--shard", "--max-memory", "--engine", "--timeout", "--verify",
    "--budget",  "--array-size", "--sbatch-arg", "--partition", "--time"};

std::vector<std::string> sandboxed(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  const std::string sub = in.empty() ? "" : in[0];
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& a = in[i];
    const std::string name = option_of(a);
    // `-o` is collective's --redop (a value, not a path): only sweep and import write there. A
    // cluster of short flags ending in it ("-qo DIR") or with a value attached ("-oDIR") too.
    const size_t short_o = a.size() > 1 && a[0] == '-' && a[1] != '-' ? a.find('o') : std::string::npos;
    if (sub != "collective" && short_o != std::string::npos) {
      if (short_o + 1 == a.size()) {
        out.push_back(a);
        if (i + 1 < in.size()) out.push_back(plain_name(in[++i]));
      } else {
        out.push_back(a.substr(0, short_o + 1) + plain_name(a.substr(short_o + 1)));
      }
      continue;
    }
    if (one_of(name, kOutputs) && name.starts_with("--")) {
      if (name == a) {  // the value is the next argument
        out.push_back(a);
        if (i + 1 < in.size()) out.push_back(plain_name(in[++i]));
      } else {
        out.push_back(name + "=" + plain_name(a.substr(name.size() + 1)));
      }
      continue;
    }
    // An override of simulation.* would undo the bounds below (scope, engine); --set takes every
    // value up to the next option, so any argument that reads as one is dropped.
    {
      std::string v = a.starts_with("--set=") ? a.substr(6) : a;
      v.erase(0, std::min(v.size(), v.find_first_not_of(' ')));
      if (v.starts_with("simulation")) continue;
    }
    // plan searches every layout of --gpus GPUs: at most 4 keep an input near a second.
    if (sub == "plan" && name == "--gpus" && (a != name || i + 1 < in.size())) {
      const std::string v = a == name ? in[++i] : a.substr(a.find('=') + 1);
      const bool big = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos && std::stod(v) > 4;
      out.push_back("--gpus");
      out.push_back(big ? "4" : v);
      continue;
    }
    if (one_of(name, kDropped)) {
      if (name == a && one_of(name, kDroppedWithValue) && i + 1 < in.size()) ++i;
      continue;
    }
    out.push_back(a);
  }
  // The bounds go right after the subcommand: at the end, an option of the input that expects a
  // value would take the first of them as its value (`--set --list` ran the sweep).
  const bool shapes = sub == "kernels" && in.size() > 1 && in[1] == "shapes";
  std::vector<std::string> bounds;
  auto add = [&](std::initializer_list<const char*> args) { bounds.insert(bounds.end(), args.begin(), args.end()); };
  // One layer, not the whole step: a step of the bundled 1,024-GPU scenarios takes 20-110 s on
  // the analytic engine (its work estimate only probes more than 16 micro-batches).
  if (sub == "run" || sub == "memory" || shapes) add({"--set", "simulation.scope=layer"});
  if (sub == "run") add({"--engine", "analytic", "--no-what-if-straggler", "--max-memory", "64MiB"});
  if (sub == "collective") add({"--engine", "analytic"});
  if (sub == "memory" || sub == "plan" || shapes) add({"--set", "simulation.engine=analytic"});
  if (sub == "memory") add({"--no-simulate"});
  if (sub == "plan") add({"--verify", "0", "--budget", "2", "-j", "1"});
  // A sweep only lists its points (its runs exec /proc/self/exe); --merge only reads.
  const bool merge = std::any_of(in.begin(), in.end(), [](const std::string& a) { return option_of(a) == "--merge"; });
  if (sub == "sweep" && !merge) add({"--list"});
  const size_t at = std::min(out.size(), size_t{shapes ? 2u : 1u});
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), bounds.begin(), bounds.end());
  return out;
}

/// stdout and stderr go to strings while an input runs (and fd 1 to /dev/null, for printf).
struct Captured {
  std::ostringstream out, err;
  std::streambuf* old_out;
  std::streambuf* old_err;
  Captured() : old_out(std::cout.rdbuf(out.rdbuf())), old_err(std::cerr.rdbuf(err.rdbuf())) {}
  ~Captured() {
    std::cout.rdbuf(old_out);
    std::cerr.rdbuf(old_err);
  }
};

/// fd 1 goes to /dev/null once (printf); the working directory is the sandbox only while an
/// input runs (libFuzzer reads and writes its corpus by relative paths in between).
struct InSandbox {
  int home;
  InSandbox() : home(::open(".", O_RDONLY | O_DIRECTORY)) {
    static const bool once = [] {
      // Every work estimate (run, check, kernels shapes) is held to 64 MiB: a larger graph is
      // refused with its estimate instead of taking seconds and gigabytes.
      ::setenv("CPSIM_MAX_MEMORY", "64MiB", 1);
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) ::dup2(null, STDOUT_FILENO);
      return true;
    }();
    (void)once;
    if (home < 0 || ::chdir(cpsim::fuzz::work_dir().c_str()) != 0) std::abort();
  }
  ~InSandbox() {
    if (::fchdir(home) != 0) std::abort();
    ::close(home);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = sandboxed(split_args(data, size));
  std::vector<std::string> owned{"cpsim"};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string what = "cpsim";
  for (size_t i = 1; i < owned.size(); ++i) what += " '" + owned[i] + "'";

  int rc = 0;
  std::string err;
  {
    InSandbox sandbox;
    Captured cap;
    try {
      rc = cpsim::app::dispatch(static_cast<int>(owned.size()), argv.data());
    } catch (...) {
      std::cerr.rdbuf(cap.old_err);
      std::fprintf(stderr, "input: %s\n", what.c_str());
      cpsim::fuzz::unexpected_exception("argv");
    }
    std::fflush(stdout);
    err = cap.err.str();
  }
  if (std::getenv("CPSIM_FUZZ_VERBOSE") != nullptr)  // what each input ran and said
    std::fprintf(stderr, "%s\n  -> exit %d\n%s", what.c_str(), rc, err.substr(0, 2000).c_str());
  using cpsim::fuzz::check;
  check(rc == 0 || rc == 1 || rc == 2, "argv", what + ": exit code " + std::to_string(rc));
  check(rc == 0 || err.find_first_not_of(" \n") != std::string::npos, "argv",
        what + ": exit code " + std::to_string(rc) + " with no message");
  check(err.find("internal error") == std::string::npos, "argv", what + ":\n" + err);
  return 0;
}
