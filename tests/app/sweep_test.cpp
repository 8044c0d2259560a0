// `cpsim sweep` end to end: the built binary on small sweep files in a temporary directory.
// Each scenario is tiny (one attention layer, analytic engine, 16K tokens) so a point takes
// a fraction of a second. Crashes and hangs are produced by a stand-in child program
// (CPSIM_SWEEP_CHILD, the sweep's test seam) that kills itself or sleeps for chosen points and
// runs the real `cpsim run` for the rest.
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

#include "support/cli.hpp"

using namespace cpsim::cli;

namespace {

/// results.csv as maps from column name to value (no quoted commas in these tests' rows
/// except the reason, which is the third field and handled by parsing quotes).
std::vector<std::map<std::string, std::string>> read_csv(const fs::path& p) {
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

std::vector<std::string> csv_header(const fs::path& p) {
  std::istringstream in(slurp(p));
  std::string line, f;
  std::getline(in, line);
  std::vector<std::string> h;
  std::istringstream ls(line);
  while (std::getline(ls, f, ',')) h.push_back(f);
  return h;
}

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("cpsim-sweep-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_TRUE(fs::exists(kCpsim)) << "build the cpsim binary first: " << kCpsim;
    write(dir_ / "tiny.yaml", kTinyScenario);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  /// A stand-in for `cpsim run`: `script` runs first with the arguments in "$*"; then the
  /// real binary runs.
  std::string child(const std::string& script) {
    const fs::path p = dir_ / "child.sh";
    write(p, "#!/bin/sh\n" + script + "\nexec " + kCpsim + " \"$@\"\n");
    fs::permissions(p, fs::perms::owner_all);
    return "env CPSIM_SWEEP_CHILD=" + p.string() + " ";
  }

  std::string sweep(const std::string& args) const {
    return kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " -o " + (dir_ / "out").string() + " " + args;
  }

  fs::path dir_;
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
  const Output o = run(child(R"(case "$*" in *scheme=allgather*) echo "boom" >&2; kill -SEGV $$;; esac)") +
                       sweep("-j 1"));
  EXPECT_EQ(o.rc, 1) << o.text;
  const auto rows = read_csv(dir_ / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].at("status"), "ok");
  EXPECT_EQ(rows[1].at("status"), "crashed");
  EXPECT_NE(rows[1].at("reason").find("signal 11"), std::string::npos) << rows[1].at("reason");
  EXPECT_NE(rows[1].at("reason").find("boom"), std::string::npos) << rows[1].at("reason");
  EXPECT_EQ(rows[2].at("status"), "ok");
}

TEST_F(SweepTest, TimeoutKillsTheScenarioAndItsChildren) {
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather]
)");
  const fs::path marker = dir_ / "grandchild-survived";
  // The hanging point starts a grandchild too: the whole process group must go. The limit
  // leaves the other point (a real run, perhaps under a sanitizer) ample time.
  const auto t0 = std::chrono::steady_clock::now();
  const Output o = run(child("case \"$*\" in *scheme=ring*) (sleep 6; touch " + marker.string() +
                             ") & sleep 60;; esac") +
                       sweep("-j 2 --timeout 3"));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(o.rc, 1) << o.text;
  EXPECT_LT(wall, 30.0);
  const auto rows = read_csv(dir_ / "out" / "results.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("status"), "timeout");
  EXPECT_EQ(rows[0].at("reason"), "killed after --timeout 3 s");
  EXPECT_EQ(rows[1].at("status"), "ok") << rows[1].at("reason");
  const auto slept = std::chrono::steady_clock::now() - t0;
  std::this_thread::sleep_for(std::chrono::milliseconds(6500) - slept);
  EXPECT_FALSE(fs::exists(marker)) << "a child of the timed-out scenario outlived it";
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

void check_resume_loses_nothing(const fs::path& dir, const std::string& slow_child,
                                const std::string& sweep_cmd, int sig) {
  const fs::path csv = dir / "out" / "results.csv";
  const int rc = interrupt_sweep(slow_child + sweep_cmd, csv, 2, sig);
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
  write(dir_ / "sweep.yaml", kEightPoints);
  check_resume_loses_nothing(dir_, child("sleep 0.3"), sweep("-j 1"), SIGINT);
}

TEST_F(SweepTest, ResumeAfterTheSweepIsKilledLosesNothing) {
  write(dir_ / "sweep.yaml", kEightPoints);
  check_resume_loses_nothing(dir_, child("sleep 0.3"), sweep("-j 2"), SIGKILL);
}

TEST_F(SweepTest, ResumeRerunsFailedAndMissingPoints) {
  write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather, ulysses]
)");
  ASSERT_EQ(run(child(R"(case "$*" in *scheme=ulysses*) exit 3;; esac)") + sweep("-j 3")).rc, 1);
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
