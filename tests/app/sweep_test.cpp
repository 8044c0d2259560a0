// `cpsim sweep` end to end: the built binary on small sweep files in a temporary directory.
// Each scenario is tiny (one attention layer, analytic engine, 16K tokens) so a point takes
// a fraction of a second. Crashes, failures, hangs and a Ctrl-C come from a fake runner
// (tests/support/fake_runner.hpp) given to the sweep's runner in this process; the other
// points run the real `cpsim run`.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

#include "app/sweep/runner.hpp"
#include "support/cli_dir.hpp"
#include "support/fake_runner.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;
using namespace cpsim::app;
using cpsim::test::Act;
using cpsim::test::FakeRunner;

namespace {

std::vector<std::string> csv_header(const fs::path& p) {
  std::istringstream in(slurp(p));
  std::string line, f;
  std::getline(in, line);
  std::vector<std::string> h;
  std::istringstream ls(line);
  while (std::getline(ls, f, ',')) h.push_back(f);
  return h;
}

class SweepTest : public cpsim::test::CliDir {
 protected:
  void SetUp() override {
    CliDir::SetUp();
    write(dir_ / "tiny.yaml", kTinyScenario);
  }

  std::string sweep(const std::string& args) const {
    return kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " -o " + (dir_ / "out").string() + " " + args;
  }

  /// Runs sweep.yaml in this process as `cpsim sweep -o out -j JOBS` would, on `runner`.
  int sweep_here(cpsim::test::FakeRunner& runner, int jobs, double timeout_s = 600, bool resume = false) {
    sweep::SweepArgs a;
    a.sweep_file = (dir_ / "sweep.yaml").string();
    a.out_dir = (dir_ / "out").string();
    a.jobs = jobs;
    a.timeout_s = timeout_s;
    a.resume = resume;
    a.quiet = true;
    const auto points = sweep::load_points(a.sweep_file, {});
    EXPECT_TRUE(points);
    fs::create_directories(dir_ / "out" / "runs");
    fs::create_directories(dir_ / "out" / "logs");
    std::vector<size_t> todo;
    for (size_t i = 0; i < points->points.size(); ++i) todo.push_back(i);
    sweep::SweepRunner r(a, points->points, "results.csv", runner, clock_);
    if (resume) r.load_previous(todo);
    return r.run(todo);
  }

  cpsim::test::FakeClock clock_;
};

TEST_F(SweepTest, ListShowsCartesianAndZippedExpansion) {
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather]
  training.seq_len: [16K, 32K]
zip:
  - {parallel.cp: [4, 8], parallel.attention.layout: [contiguous, zigzag]}
)");
  const Output o = run(sweep("--list"));
  ASSERT_EQ(o.rc, 0) << o.text;
  std::istringstream in(o.text);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 8u) << o.text;
  // First axis slowest, zipped keys together, ids zero-padded indices; each line a runnable
  // command with its id as a trailing comment.
  EXPECT_EQ(lines[0].rfind("cpsim run ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find("  # 0000"), std::string::npos);
  EXPECT_NE(lines[0].find(" --set parallel.attention.scheme=ring --set training.seq_len=16K "
                          "--set parallel.cp=4 --set parallel.attention.layout=contiguous"),
            std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("parallel.cp=8 --set parallel.attention.layout=zigzag"), std::string::npos);
  EXPECT_NE(lines[2].find("training.seq_len=32K"), std::string::npos);
  EXPECT_NE(lines[7].find("# 0007"), std::string::npos);
  EXPECT_NE(lines[7].find("scheme=allgather --set training.seq_len=32K --set parallel.cp=8"),
            std::string::npos) << lines[7];
  // Pasted into a shell, the first line runs the point: the same step time as the sweep's row.
  const std::string line0 = lines[0].substr(0, lines[0].find("  #"));
  const Output direct = run("cd " + dir_.string() + " && " + kCpsim + line0.substr(5) + " --json one.json -q");
  EXPECT_EQ(direct.rc, 0) << direct.text;

  // A shard keeps the points the cost-balanced assignment gives it (GPUs x tokens, largest
  // first to the least-loaded shard; see slurm_test.cpp): shard 1/3 of these 8 is 0006, 0007.
  const Output s = run(sweep("--list --shard 1/3"));
  ASSERT_EQ(s.rc, 0) << s.text;
  EXPECT_NE(s.text.substr(0, s.text.find('\n')).find("# 0006"), std::string::npos) << s.text;
  EXPECT_NE(s.text.find("# 0007"), std::string::npos);
  EXPECT_EQ(s.text.find("# 0000"), std::string::npos);
  EXPECT_EQ(run(sweep("--list --shard 3/3")).rc, 2);
}

TEST_F(SweepTest, WritesOneRowAndOneJsonPerPoint) {
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather, ulysses]
)");
  const Output o = run(sweep("-j 2"));
  ASSERT_EQ(o.rc, 0) << o.text;
  const fs::path csv = dir_ / "out" / "results.csv";
  const std::vector<std::string> want = {
      "id", "status", "reason", "parallel.attention.scheme", "step_time_s", "tokens_per_s",
      "tflops_per_gpu", "mfu", "exposed_comm_s", "overlap_fraction", "imbalance",
      "peak_bytes_per_rank", "fits", "sim_wall_s", "scheme", "layout", "platform_name", "gpus", "peak_mem_gb",
      "tp_comm_s", "tp_exposed_s", "cp_comm_s", "cp_exposed_s", "pp_comm_s", "pp_exposed_s", "dp_comm_s",
      "dp_exposed_s", "ep_comm_s", "ep_exposed_s"};
  EXPECT_EQ(csv_header(csv), want);
  const auto rows = read_csv(csv);
  ASSERT_EQ(rows.size(), 3u);
  const char* schemes[] = {"ring", "allgather", "ulysses"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    EXPECT_EQ(r.at("status"), "ok") << r.at("reason");
    EXPECT_EQ(r.at("parallel.attention.scheme"), schemes[i]);
    const fs::path js = dir_ / "out" / "runs" / (r.at("id") + ".json");
    ASSERT_TRUE(fs::exists(js)) << js;
    const auto j = nlohmann::json::parse(slurp(js));
    EXPECT_NEAR(std::stod(r.at("step_time_s")), j["step_time_s"].get<double>(),
                1e-6 * j["step_time_s"].get<double>());
    EXPECT_GT(j["step_time_s"].get<double>(), 0);
    EXPECT_EQ(j["scenario"]["parallel"]["attention"]["scheme"], schemes[i]);
    // The readable columns come from the result: the scheme as the loader spells it, the
    // platform's name, GPUs, memory in GB; communication by kind only when the result has it.
    EXPECT_EQ(r.at("scheme"), schemes[i]);
    EXPECT_EQ(r.at("layout"), "zigzag");
    EXPECT_EQ(r.at("platform_name"), j["scenario"]["platform"]["name"].get<std::string>());
    EXPECT_EQ(r.at("gpus"), std::to_string(j["gpus"].get<long>()));
    EXPECT_NEAR(std::stod(r.at("peak_mem_gb")), j["memory"]["peak_bytes_per_rank"].get<double>() / 1e9, 1e-4);
    if (j.contains("communication"))
      EXPECT_NEAR(std::stod(r.at("cp_comm_s")), j["communication"]["cp"]["total_s"].get<double>(), 1e-9);
    else
      EXPECT_EQ(r.at("cp_comm_s"), "");
  }
  // Not a terminal: one plain line per finished point, no carriage returns.
  EXPECT_EQ(o.text.find('\r'), std::string::npos);
  EXPECT_NE(o.text.find("[3/3]"), std::string::npos) << o.text;
}

TEST_F(SweepTest, OnATerminalOneLineUpdatesInPlace) {
  if (!fs::exists("/usr/bin/script")) GTEST_SKIP() << "needs script(1) for a pseudo-terminal";
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather, ulysses]
)");
  const Output o = run("/usr/bin/script -qec '" + sweep("-j 1") + "' /dev/null");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("\r\033[K[3/3] failed 0  ETA"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("] ok 0000"), std::string::npos) << "a line per point on a terminal";
}

TEST_F(SweepTest, BadCombinationIsRecordedAndTheSweepGoesOn) {
  // The sweep loader checks each value alone; Ulysses over 5 GPUs with 24 query heads is a
  // combination only the point itself can reject.
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ulysses, ring]
  parallel.cp: [5, 8]
)");
  const Output o = run(sweep("-j 2"));
  EXPECT_EQ(o.rc, 1) << o.text;
  const auto rows = read_csv(dir_ / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].at("status"), "failed");
  EXPECT_FALSE(rows[0].at("reason").empty());
  EXPECT_EQ(rows[0].at("step_time_s"), "");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "runs" / "0000.json"));
  EXPECT_TRUE(fs::exists(dir_ / "out" / "logs" / "0000.log"));
  EXPECT_EQ(rows[1].at("status"), "ok") << rows[1].at("reason");
  EXPECT_EQ(rows[3].at("status"), "ok") << rows[3].at("reason");
}

TEST_F(SweepTest, CrashingScenarioIsRecordedAndTheSweepCompletes) {
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather, ulysses]
)");
  FakeRunner runner;
  runner.rules = {{"scheme=allgather", {Act::Crash, SIGSEGV, "boom\n"}}};
  EXPECT_EQ(sweep_here(runner, 1), 1);
  const auto rows = read_csv(dir_ / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].at("status"), "ok");
  EXPECT_EQ(rows[1].at("status"), "crashed");
  EXPECT_NE(rows[1].at("reason").find("signal 11"), std::string::npos) << rows[1].at("reason");
  EXPECT_NE(rows[1].at("reason").find("boom"), std::string::npos) << rows[1].at("reason");
  EXPECT_EQ(rows[2].at("status"), "ok");
}

TEST_F(SweepTest, TimeoutKillsTheScenario) {
  // (That the kill takes the command's whole process group: process_pool_test.cpp.) The
  // limit is on the fake clock, which runs ~20x faster than real time while the sweep waits:
  // it leaves the real point (perhaps under a sanitizer) ample time.
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather]
)");
  FakeRunner runner;
  runner.rules = {{"scheme=ring", {Act::Hang}}};
  EXPECT_EQ(sweep_here(runner, 2, 120), 1);
  const auto rows = read_csv(dir_ / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("status"), "timeout");
  EXPECT_EQ(rows[0].at("reason"), "killed after --timeout 120 s");
  EXPECT_EQ(rows[1].at("status"), "ok") << rows[1].at("reason");
  EXPECT_EQ(runner.killed.size(), 1u);
}

TEST_F(SweepTest, SweepFileErrorExitsTwoWithTheLoadersMessage) {
  write(dir_ / "sweep.yaml", "base: tiny.yaml\naxes:\n  parallel.cpx: [1, 2]\n");
  const Output o = run(sweep(""));
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.text.find("sweep.yaml:3:"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("error:"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(dir_ / "out" / "results.csv"));
}

/// Interrupts a running sweep after `rows_before` points finished, with `sig`.
int interrupt_sweep(const std::string& cmd, const fs::path& csv, size_t rows_before, int sig) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd + " >/dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(csv) && read_csv(csv).size() >= rows_before) break;
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, sig);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/// After an interrupted sweep (exit code `rc`): what was written is whole, and a resume runs
/// only the rest.
void check_resume_loses_nothing(const fs::path& dir, int rc, const std::string& sweep_cmd) {
  const fs::path csv = dir / "out" / "results.csv";
  EXPECT_TRUE(rc == 130 || rc == 128 + SIGKILL) << "rc " << rc;
  // What was written is whole: every row parses and every ok row has its JSON.
  const auto before = read_csv(csv);
  ASSERT_GE(before.size(), 2u);
  ASSERT_LT(before.size(), 8u) << "the sweep finished before it could be interrupted";
  std::map<std::string, fs::file_time_type> stamp;
  for (const auto& r : before) {
    ASSERT_EQ(r.at("status"), "ok");
    const fs::path js = dir / "out" / "runs" / (r.at("id") + ".json");
    ASSERT_TRUE(fs::exists(js));
    EXPECT_FALSE(nlohmann::json::parse(slurp(js), nullptr, false).is_discarded()) << "torn " << js;
    stamp[r.at("id")] = fs::last_write_time(js);
  }
  // A point lost after its JSON was written but before its row: it must simply run again.
  const Output o = run(sweep_cmd + " --resume");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("resuming: " + std::to_string(before.size()) + " of 8"), std::string::npos) << o.text;
  const auto after = read_csv(csv);
  ASSERT_EQ(after.size(), 8u);
  for (size_t i = 0; i < after.size(); ++i) {
    char id[24];
    std::snprintf(id, sizeof id, "%04zu", i);
    EXPECT_EQ(after[i].at("id"), id);
    EXPECT_EQ(after[i].at("status"), "ok");
    EXPECT_TRUE(fs::exists(dir / "out" / "runs" / (std::string(id) + ".json")));
  }
  // The points done before the interruption were not run again.
  for (const auto& [id, t0] : stamp) EXPECT_EQ(fs::last_write_time(dir / "out" / "runs" / (id + ".json")), t0) << id;
  for (const auto& e : fs::directory_iterator(dir / "out" / "runs"))
    EXPECT_EQ(e.path().extension(), ".json") << "left behind: " << e.path();
}

/// Eight points over the tiny base: two schemes x two lengths x two layouts.
constexpr const char* kEightPoints = R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather]
  training.seq_len: [16K, 32K]
  parallel.attention.layout: [zigzag, striped]
)";

TEST_F(SweepTest, ResumeAfterInterruptLosesNothing) {
  // Ctrl-C (a real SIGINT to this process) once two of the eight points are done.
  write(dir_ / "sweep.yaml", kEightPoints);
  FakeRunner runner;
  runner.on_end = [](size_t ended) {
    if (ended == 2) ::raise(SIGINT);
  };
  const int rc = sweep_here(runner, 1);
  EXPECT_EQ(runner.started.size(), 2u);
  check_resume_loses_nothing(dir_, rc, sweep("-j 1"));
}

TEST_F(SweepTest, ResumeAfterTheSweepIsKilledLosesNothing) {
#ifdef CPSIM_SANITIZED
  GTEST_SKIP() << "real cpsim children under ASan (60-70 s); runs in the optimised stage";
#endif
  // The real binary, SIGKILLed once two points are in its CSV (eight points, two at a time,
  // each a real run of a few tenths of a second at 1M tokens).
  write(dir_ / "sweep.yaml", kEightPoints);
  const std::string cmd = sweep("-j 2 --set training.seq_len=1M");
  const int rc = interrupt_sweep(cmd, dir_ / "out" / "results.csv", 2, SIGKILL);
  check_resume_loses_nothing(dir_, rc, cmd);
}

TEST_F(SweepTest, ResumeRerunsFailedAndMissingPoints) {
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather, ulysses]
)");
  FakeRunner failing;
  failing.rules = {{"scheme=ulysses", {Act::Exit, 3}}};
  ASSERT_EQ(sweep_here(failing, 3), 1);
  auto rows = read_csv(dir_ / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].at("status"), "failed");
  EXPECT_EQ(rows[2].at("reason"), "exit code 3");
  fs::remove(dir_ / "out" / "runs" / "0000.json");  // an ok row whose JSON went missing
  const auto kept = fs::last_write_time(dir_ / "out" / "runs" / "0001.json");
  const Output o = run(sweep("-j 3 --resume"));
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("resuming: 1 of 3"), std::string::npos) << o.text;
  rows = read_csv(dir_ / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& r : rows) EXPECT_EQ(r.at("status"), "ok") << r.at("id");
  EXPECT_EQ(fs::last_write_time(dir_ / "out" / "runs" / "0001.json"), kept);
}

TEST_F(SweepTest, ResumeRerunsPointsWhoseValuesChanged) {
  write(dir_ / "sweep.yaml", "base: tiny.yaml\naxes:\n  parallel.attention.scheme: [ring, allgather]\n");
  ASSERT_EQ(run(sweep("-j 2")).rc, 0);
  write(dir_ / "sweep.yaml", "base: tiny.yaml\naxes:\n  parallel.attention.scheme: [ring, ulysses]\n");
  const Output o = run(sweep("-j 2 --resume"));
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("resuming: 1 of 2"), std::string::npos) << o.text;
  const auto rows = read_csv(dir_ / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].at("parallel.attention.scheme"), "ulysses");
  const auto j = nlohmann::json::parse(slurp(dir_ / "out" / "runs" / "0001.json"));
  EXPECT_EQ(j["scenario"]["parallel"]["attention"]["scheme"], "ulysses");
}

}  // namespace

}  // namespace CPSIM_TEST_TU
