// `cpsim sweep --shard`, `--merge` and `--slurm` end to end, without a cluster: the sweep
// command runs in this process on a fake runner (tests/support/fake_runner.hpp) whose sbatch
// runs the array tasks at once, here (and can leave chosen tasks out, as if they were killed,
// or keep them queued), and whose squeue lists the unfinished ones; a fake clock makes --wait's
// polls instant. tests/slurm/run_slurm_test.sh runs the same flow against a real one-node Slurm.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

#include "app/commands.hpp"
#include "support/cli_dir.hpp"
#include "support/fake_runner.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;
using cpsim::app::pool::Captured;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// The rows of a results CSV by id, without sim_wall_s (host seconds: never the same twice).
std::map<std::string, std::map<std::string, std::string>> comparable(const fs::path& p) {
  std::map<std::string, std::map<std::string, std::string>> out;
  for (auto r : read_csv(p)) {
    r.erase("sim_wall_s");
    const std::string id = r.at("id");
    EXPECT_TRUE(out.emplace(id, r).second) << "duplicate id " << id << " in " << p;
  }
  return out;
}

/// `sbatch --parsable [--array=LIST] SCRIPT` and `squeue --jobs=ID ...` answered from memory.
/// sbatch runs the script's array tasks (or LIST) one after another with the real binary,
/// except those in `skip`; with `hold` they stay queued until release().
class FakeSlurm {
 public:
  std::set<size_t> skip;
  bool hold = false;
  std::string fail;        ///< sbatch refuses with this message
  bool installed = true;   ///< false: neither program exists
  std::vector<std::string> calls;  ///< sbatch's arguments, after --parsable, joined

  explicit FakeSlurm(cpsim::test::FakeRunner& r) : r_(r) {
    r.on_capture = [this](const std::vector<std::string>& argv) { return answer(argv); };
  }

  void release() {
    for (auto& [id, tasks] : queued_) {
      for (size_t i : tasks) run_task(id, i);
      tasks.clear();
    }
  }

 private:
  Captured answer(const std::vector<std::string>& argv) {
    if (!installed) return {127, "", argv[0] + ": No such file or directory\n"};
    return argv[0] == "sbatch" ? sbatch(argv) : squeue(argv);
  }

  Captured sbatch(const std::vector<std::string>& argv) {
    std::string joined, array, script;
    for (size_t k = 2; k < argv.size(); ++k) joined += (joined.empty() ? "" : " ") + argv[k];
    for (const auto& a : argv)
      if (a.starts_with("--array=")) array = a.substr(8);
      else if (!a.starts_with("-") && a != "sbatch") script = a;
    calls.push_back(joined);
    if (!fail.empty()) return {1, "", "sbatch: error: " + fail + "\n"};
    for (const auto& l : lines_of(slurp(script))) {
      if (array.empty() && l.starts_with("#SBATCH --array=")) array = l.substr(16);
      if (l.starts_with("#SBATCH --output=")) output_ = l.substr(17);
    }
    script_ = script;
    const std::string id = std::to_string(next_++);
    auto& tasks = queued_[id];
    std::istringstream parts(array);
    for (std::string part; std::getline(parts, part, ',');) {
      const size_t dash = part.find('-');
      const size_t a = std::stoul(part.substr(0, dash)), b = dash == std::string::npos ? a : std::stoul(part.substr(dash + 1));
      for (size_t i = a; i <= b; ++i)
        if (!skip.count(i)) tasks.insert(i);
    }
    if (!hold) release();
    return {0, id + "\n", ""};
  }

  Captured squeue(const std::vector<std::string>& argv) {
    std::string id;
    for (const auto& a : argv)
      if (a.starts_with("--jobs=")) id = a.substr(7);
    const auto it = queued_.find(id);
    if (it == queued_.end()) return {1, "", "slurm_load_jobs error: Invalid job id specified\n"};
    std::string out;
    for (size_t k = 0; k < it->second.size(); ++k) out += "R\n";
    return {0, out, ""};
  }

  void run_task(const std::string& id, size_t i) {
    const Captured c = r_.real().capture({"env", "SLURM_ARRAY_JOB_ID=" + id, "SLURM_ARRAY_TASK_ID=" + std::to_string(i),
                                          "bash", script_});
    std::string log = output_;
    log.replace(log.find("%A"), 2, id);
    log.replace(log.find("%a"), 2, std::to_string(i));
    write(log, c.out + c.err);
  }

  cpsim::test::FakeRunner& r_;
  int next_ = 100;
  std::string script_, output_;
  std::map<std::string, std::set<size_t>> queued_;
};

class SlurmSweepTest : public cpsim::test::CliDir {
 protected:
  void SetUp() override {
    CliDir::SetUp();
    write(dir_ / "tiny.yaml", kTinyScenario);
    // 12 points of 4 costs (GPUs x tokens): cp 2, 4, 8 at 16K and cp 8 at 32K.
    write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather, ulysses]
zip:
  - {parallel.cp: [2, 4, 8, 8], training.seq_len: [16K, 16K, 16K, 32K]}
)");
  }

  /// `cpsim sweep SWEEP ARGS` (blank-separated, no quoting) through the real command-line
  /// handling, in this process, on the fake runner and clock: exit code and what it printed.
  Output here(const std::string& args) {
    CLI::App app;
    int rc = 0;
    cpsim::app::register_sweep(app, rc, &runner_, &clock_);
    std::vector<std::string> argv = {"sweep", (dir_ / "sweep.yaml").string()};
    std::istringstream in(args);
    for (std::string w; in >> w;) argv.push_back(w);
    std::reverse(argv.begin(), argv.end());  // CLI11 takes them last first
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    try {
      app.parse(argv);
    } catch (const CLI::ParseError& e) {
      rc = e.get_exit_code() == 0 ? 0 : 2;
    }
    Output o;
    o.rc = rc;
    o.text = ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
    return o;
  }
  std::string sweep(const std::string& args) const {
    return kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " " + args;
  }

  /// The ids of shard i/K as --list prints them.
  std::vector<std::string> shard_ids(size_t i, size_t k) const {
    const Output o = run(sweep("--list --shard " + std::to_string(i) + "/" + std::to_string(k)));
    EXPECT_EQ(o.rc, 0) << o.text;
    std::vector<std::string> ids;
    for (const auto& l : lines_of(o.text)) ids.push_back(l.substr(l.rfind("# ") + 2));  // "cpsim run ...  # id"
    return ids;
  }

  cpsim::test::FakeRunner runner_;
  cpsim::test::FakeClock clock_;
  FakeSlurm slurm_{runner_};
};

TEST_F(SlurmSweepTest, ShardsAreBalancedByCostDisjointAndDeterministic) {
#ifdef CPSIM_SANITIZED
  GTEST_SKIP() << "real cpsim children under ASan (60-70 s); runs in the optimised stage";
#endif
  // Costs (GPUs x K tokens) of points 0000..0011: scheme-major, then (cp, seq_len).
  const double unit[] = {2 * 16, 4 * 16, 8 * 16, 8 * 32};
  for (size_t k : {1u, 2u, 3u, 5u, 12u}) {
    std::set<std::string> seen;
    std::vector<double> load(k, 0);
    for (size_t i = 0; i < k; ++i) {
      const auto ids = shard_ids(i, k);
      EXPECT_FALSE(ids.empty()) << "shard " << i << "/" << k << " is empty";
      EXPECT_EQ(ids, shard_ids(i, k)) << "not deterministic";
      for (const auto& id : ids) {
        EXPECT_TRUE(seen.insert(id).second) << id << " in two shards of " << k;
        load[i] += unit[std::stoi(id) % 4];
      }
    }
    EXPECT_EQ(seen.size(), 12u) << "K = " << k;
    // Greedy on sorted costs: the loads differ by at most the largest single cost.
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    EXPECT_LE(*hi - *lo, 8 * 32) << "K = " << k;
  }
  // The exact map for K = 2 (largest first, ties by id, each to the least-loaded shard, ties
  // to fewer points): loads 256+256+128+64+32 = 736 and 256+128+128+64+64+32+32 = 704; not the
  // 6 + 6 points of index % 2.
  EXPECT_EQ(shard_ids(0, 2), (std::vector<std::string>{"0003", "0008", "0009", "0010", "0011"}));
  EXPECT_EQ(shard_ids(1, 2), (std::vector<std::string>{"0000", "0001", "0002", "0004", "0005", "0006", "0007"}));

  // Equal costs deal the points round-robin: index % K.
  write(dir_ / "sweep.yaml", "base: tiny.yaml\naxes:\n  parallel.attention.scheme: [ring, allgather, ulysses]\n"
                             "  parallel.attention.layout: [zigzag, striped]\n");
  EXPECT_EQ(shard_ids(1, 4), (std::vector<std::string>{"0001", "0005"}));
  EXPECT_EQ(run(sweep("--list --shard 4/4")).rc, 2);
}

TEST_F(SlurmSweepTest, LocalShardsMergeIntoTheLocalRunsCsv) {
#ifdef CPSIM_SANITIZED
  GTEST_SKIP() << "real cpsim children under ASan (60-70 s); runs in the optimised stage";
#endif
  ASSERT_EQ(run(sweep("-j 2 -q -o " + (dir_ / "local").string())).rc, 0);
  const std::string out = (dir_ / "sharded").string();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(run(sweep("-j 2 -q --shard " + std::to_string(i) + "/3 -o " + out)).rc, 0);
  const Output m = run(sweep("--merge " + out));  // no manifest: the sweep file is named, K read from the files
  ASSERT_EQ(m.rc, 0) << m.text;
  EXPECT_NE(m.text.find("merge: 12 points from 3 shards: 12 ok"), std::string::npos) << m.text;
  EXPECT_EQ(comparable(dir_ / "local" / "results.csv"), comparable(dir_ / "sharded" / "results.csv"));
  // Rows in id order, as a local run writes them.
  const auto rows = read_csv(dir_ / "sharded" / "results.csv");
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(std::stoul(rows[i].at("id")), i);
  // Idempotent: merging again writes the same bytes.
  const std::string once = slurp(dir_ / "sharded" / "results.csv");
  ASSERT_EQ(run(sweep("--merge " + out)).rc, 0);
  EXPECT_EQ(slurp(dir_ / "sharded" / "results.csv"), once);

  // A lost shard is reported, with how to finish it.
  fs::remove(dir_ / "sharded" / "results.2-of-3.csv");
  const Output lost = run(sweep("--merge " + out));
  EXPECT_EQ(lost.rc, 1) << lost.text;
  EXPECT_NE(lost.text.find("8 ok, 4 missing"), std::string::npos) << lost.text;
  EXPECT_NE(lost.text.find("shard 2/3: 4 of 4 points missing (no results.2-of-3.csv"), std::string::npos) << lost.text;
  EXPECT_NE(lost.text.find("--shard i/3 --resume"), std::string::npos) << lost.text;
  EXPECT_EQ(read_csv(dir_ / "sharded" / "results.csv").size(), 8u);

  EXPECT_EQ(run(kCpsim + " sweep --merge " + out).rc, 2) << "no manifest and no sweep file";
}

TEST_F(SlurmSweepTest, MergeReadsEachRowsMetricsFromItsResult) {
#ifdef CPSIM_SANITIZED
  GTEST_SKIP() << "real cpsim children under ASan (60-70 s); runs in the optimised stage";
#endif
  const std::string out = (dir_ / "sharded").string();
  for (int i = 0; i < 2; ++i) ASSERT_EQ(run(sweep("-j 2 -q --shard " + std::to_string(i) + "/2 -o " + out)).rc, 0);
  // A shard's row edited (or written by another version) after its point ran: the merge keeps
  // the result its runs/ID.json holds, never the row's stale figure.
  std::string shard_file, truth;
  for (const char* f : {"results.0-of-2.csv", "results.1-of-2.csv"}) {
    for (const auto& r : read_csv(dir_ / "sharded" / f)) {
      if (std::stoul(r.at("id")) == 0) {
        shard_file = f;
        truth = r.at("step_time_s");
      }
    }
  }
  ASSERT_FALSE(truth.empty());
  std::string text = slurp(dir_ / "sharded" / shard_file);
  const size_t at = text.find("," + truth + ",");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, truth.size() + 2, ",123.5,");
  write(dir_ / "sharded" / shard_file, text);
  ASSERT_EQ(run(sweep("--merge " + out)).rc, 0);
  for (const auto& r : read_csv(dir_ / "sharded" / "results.csv")) {
    if (std::stoul(r.at("id")) == 0) {
      EXPECT_EQ(r.at("step_time_s"), truth);
    }
  }
}

TEST_F(SlurmSweepTest, SubmitsOneArrayScriptWithAbsolutePaths) {
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  slurm_.hold = true;
  CLI::App app;
  int rc = 0;
  cpsim::app::register_sweep(app, rc, &runner_, &clock_);
  ::testing::internal::CaptureStdout();
  app.parse(std::vector<std::string>{"rel/out", "-o", "--set=simulation.seed=7", "90", "--timeout", "2", "-j",
                                     "--sbatch-arg=--account=proj", "0:30:00", "--time", "gpu", "--partition", "4",
                                     "--array-size", "--slurm", "sweep.yaml", "sweep"});
  const std::string text = ::testing::internal::GetCapturedStdout();
  fs::current_path(cwd);
  ASSERT_EQ(rc, 0) << text;
  const fs::path out = fs::canonical(dir_ / "rel" / "out");
  EXPECT_NE(text.find("submitted job 100: 4 array tasks (shards 0-3 of 4) for 12 of 12 points"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cpsim sweep --merge " + out.string()), std::string::npos) << text;
  const std::string script = slurp(out / "sweep.sbatch");
  for (const std::string& line : std::vector<std::string>{
           "#SBATCH --array=0-3", "#SBATCH --output=" + (out / "slurm-%A_%a.out").string(), "#SBATCH --partition=gpu",
        "#SBATCH --time=0:30:00", "#SBATCH --account=proj", "#SBATCH --cpus-per-task=2", "#SBATCH --export=ALL",
        "exec " + fs::canonical(kCpsim).string() + " sweep " + (fs::canonical(dir_) / "sweep.yaml").string() +
            " --shard \"${SLURM_ARRAY_TASK_ID}/4\" -o " + out.string() +
            " -j 2 --timeout 90 --resume --set=simulation.seed=7"})
    EXPECT_NE(script.find("\n" + line + "\n"), std::string::npos) << line << "\n---\n" << script;
  ASSERT_EQ(slurm_.calls.size(), 1u);
  EXPECT_EQ(slurm_.calls[0], (out / "sweep.sbatch").string());
  const auto m = nlohmann::json::parse(slurp(out / "sweep-slurm.json"));
  EXPECT_EQ(m["shards"], 4);
  EXPECT_EQ(m["submissions"][0]["job_id"], "100");
  // The tasks run, then a merge from the directory alone.
  slurm_.release();
  const Output merged = run(kCpsim + " sweep --merge " + out.string());
  EXPECT_EQ(merged.rc, 0) << merged.text;
}

TEST_F(SlurmSweepTest, WaitMergesTheSameCsvAsALocalRun) {
#ifdef CPSIM_SANITIZED
  GTEST_SKIP() << "real cpsim children under ASan (60-70 s); runs in the optimised stage";
#endif
  ASSERT_EQ(run(sweep("-j 2 -q -o " + (dir_ / "local").string())).rc, 0);
  const Output o = here("--slurm --array-size 5 --wait -o " + (dir_ / "array").string());
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("left the queue"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("merge: 12 points from 5 shards: 12 ok"), std::string::npos) << o.text;
  EXPECT_EQ(comparable(dir_ / "local" / "results.csv"), comparable(dir_ / "array" / "results.csv"));
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(fs::exists(dir_ / "array" / ("slurm-100_" + std::to_string(i) + ".out"))) << i;
  // -q prints the job id alone, for scripts.
  const Output q = here("--slurm --array-size 2 -q -o " + (dir_ / "quiet").string());
  ASSERT_EQ(q.rc, 0) << q.text;
  EXPECT_EQ(q.text, "101\n");
  EXPECT_EQ(run(kCpsim + " sweep --merge " + (dir_ / "quiet").string()).rc, 0);
}

TEST_F(SlurmSweepTest, WaitPollsSqueueUntilTheJobLeavesTheQueue) {
  // While the tasks are queued, --wait asks squeue every 2 s (fake clock) and shows the count.
  int polls = 0;
  runner_.on_capture = [&, inner = runner_.on_capture](const std::vector<std::string>& argv) {
    if (argv[0] == "squeue" && ++polls == 3) slurm_.release();
    return inner(argv);
  };
  slurm_.hold = true;
  const double t0 = clock_.now_s();
  const Output o = here("--slurm --array-size 2 --wait -o " + (dir_ / "array").string());
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_EQ(polls, 3);  // the fresh directory asks nothing; 2 polls see the tasks, the third none
  EXPECT_NEAR(clock_.now_s() - t0, 2 * 2.0, 0.1);
  EXPECT_NE(o.text.find("[0/12] job 100: tasks 2 running, 0 pending"), std::string::npos) << o.text;
}

TEST_F(SlurmSweepTest, ResumeResubmitsOnlyTheMissingShards) {
#ifdef CPSIM_SANITIZED
  GTEST_SKIP() << "real cpsim children under ASan (60-70 s); runs in the optimised stage";
#endif
  ASSERT_EQ(run(sweep("-j 2 -q -o " + (dir_ / "local").string())).rc, 0);
  const std::string out = (dir_ / "array").string();
  // Tasks 1 and 3 of 4 never run (as if killed before they wrote a row). Their shards hold
  // 3 and 4 of the 12 points (see ShardsAreBalancedByCost...: K = 4 gives 2, 3, 3, 4).
  slurm_.skip = {1, 3};
  const Output first = here("--slurm --array-size 4 --wait -o " + out);
  EXPECT_EQ(first.rc, 1) << first.text;
  EXPECT_NE(first.text.find("shard 1/4: 3 of 3 points missing"), std::string::npos) << first.text;
  EXPECT_NE(first.text.find("shard 3/4: 4 of 4 points missing"), std::string::npos) << first.text;
  EXPECT_NE(first.text.find("--slurm --resume -o " + out), std::string::npos) << first.text;
  std::map<fs::path, fs::file_time_type> stamp;
  for (const auto& e : fs::directory_iterator(dir_ / "array" / "runs")) stamp[e.path()] = fs::last_write_time(e.path());
  EXPECT_EQ(stamp.size(), 5u);

  // --merge reports the same and is idempotent.
  const Output m = run(kCpsim + " sweep --merge " + out);
  EXPECT_EQ(m.rc, 1);
  EXPECT_NE(m.text.find("5 ok, 7 missing"), std::string::npos) << m.text;

  slurm_.skip.clear();
  const Output again = here("--slurm --resume --wait -o " + out);
  ASSERT_EQ(again.rc, 0) << again.text;
  EXPECT_NE(again.text.find("resuming: 5 of 12 points done; resubmitting shards 1,3 of 4"), std::string::npos)
      << again.text;
  ASSERT_EQ(slurm_.calls.size(), 2u);
  EXPECT_EQ(slurm_.calls[1].rfind("--array=1,3 ", 0), 0u) << slurm_.calls[1];
  EXPECT_EQ(comparable(dir_ / "local" / "results.csv"), comparable(dir_ / "array" / "results.csv"));
  for (const auto& [p, t] : stamp) EXPECT_EQ(fs::last_write_time(p), t) << p << " ran twice";

  // Complete: a further resume submits nothing.
  const Output done = here("--slurm --resume -o " + out);
  EXPECT_EQ(done.rc, 0) << done.text;
  EXPECT_NE(done.text.find("nothing to submit"), std::string::npos) << done.text;
  EXPECT_EQ(slurm_.calls.size(), 2u);
}

TEST_F(SlurmSweepTest, RefusesToSubmitWhileAnEarlierJobIsQueued) {
  const std::string out = (dir_ / "array").string();
  slurm_.hold = true;
  ASSERT_EQ(here("--slurm --array-size 2 -q -o " + out).rc, 0);
  const Output o = here("--slurm --resume -o " + out);
  EXPECT_EQ(o.rc, 1) << o.text;
  EXPECT_NE(o.text.find("job 100 (an earlier submission"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("2 tasks running"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("scancel it first"), std::string::npos) << o.text;
  EXPECT_EQ(slurm_.calls.size(), 1u);
  // Once it is done, a resume finds everything there.
  slurm_.release();
  const Output r = here("--slurm --resume -o " + out);
  EXPECT_EQ(r.rc, 0) << r.text;
  EXPECT_NE(r.text.find("nothing to submit"), std::string::npos) << r.text;
}

TEST_F(SlurmSweepTest, SbatchFailuresAndBadOptionsAreReported) {
  const std::string out = " -o " + (dir_ / "array").string();
  slurm_.fail = "invalid partition specified: nope";
  const Output fail = here("--slurm --partition nope" + out);
  EXPECT_EQ(fail.rc, 1);
  EXPECT_NE(fail.text.find("invalid partition specified: nope"), std::string::npos) << fail.text;
  EXPECT_FALSE(fs::exists(dir_ / "array" / "sweep-slurm.json"));

  slurm_.installed = false;
  const Output none = here("--slurm" + out);
  EXPECT_EQ(none.rc, 1);
  EXPECT_NE(none.text.find("cannot run sbatch"), std::string::npos) << none.text;

  for (const std::string& bad :
       std::vector<std::string>{"--wait", "--partition p", "--time 10", "--array-size 2", "--slurm --shard 0/2",
                                "--slurm --list", "--slurm --merge x", "--slurm --array-size 0"}) {
    const Output o = run(sweep(bad + out));
    EXPECT_EQ(o.rc, 2) << bad << ": " << o.text;
    EXPECT_NE(o.text.find("--"), std::string::npos) << bad << ": " << o.text;
  }
  const Output blank = run(sweep("--slurm -o '" + (dir_ / "a b").string() + "'"));
  EXPECT_EQ(blank.rc, 2);
  EXPECT_NE(blank.text.find("may not hold blanks"), std::string::npos) << blank.text;
  EXPECT_EQ(slurm_.calls.size(), 1u) << "only the failing submission reached sbatch";
}

}  // namespace

}  // namespace CPSIM_TEST_TU
