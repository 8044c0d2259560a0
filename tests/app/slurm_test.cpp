// `cpsim sweep --shard`, `--merge` and `--slurm` end to end, without a cluster: stand-in
// `sbatch` and `squeue` scripts, first on PATH, run the array tasks at once on this machine (and
// can leave chosen tasks out, as if they were killed). tests/slurm/run_slurm_test.sh runs the
// same flow against a real one-node Slurm.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

#include "support/cli.hpp"

using namespace cpsim::cli;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

/// A results CSV as rows of column -> value (these tests' rows hold no quoted commas).
std::vector<std::map<std::string, std::string>> read_csv(const fs::path& p) {
  const auto lines = lines_of(slurp(p));
  std::vector<std::map<std::string, std::string>> out;
  if (lines.empty()) return out;
  auto split = [](const std::string& l) {
    std::vector<std::string> f;
    std::string cur;
    std::istringstream ls(l);
    while (std::getline(ls, cur, ',')) f.push_back(cur);
    if (!l.empty() && l.back() == ',') f.emplace_back();
    return f;
  };
  const auto head = split(lines[0]);
  for (size_t r = 1; r < lines.size(); ++r) {
    const auto f = split(lines[r]);
    std::map<std::string, std::string> m;
    for (size_t c = 0; c < head.size() && c < f.size(); ++c) m[head[c]] = f[c];
    out.push_back(m);
  }
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

/// A stand-in for sbatch: reads the script's #SBATCH --array (or --array=LIST from its
/// arguments) and --output, starts every array task in the background at once (minus those in
/// FAKE_SLURM_SKIP, "1,3"), and prints a job id. Each task marks itself done when it exits.
constexpr const char* kFakeSbatch = R"(#!/bin/bash
state=$FAKE_SLURM_STATE
array=""; script=""
for a in "$@"; do
  case $a in --parsable) ;; --array=*) array=${a#--array=} ;; -*) ;; *) script=$a ;; esac
done
echo "$*" >>"$state/sbatch.calls"
if [ -n "${FAKE_SBATCH_FAIL:-}" ]; then echo "sbatch: error: $FAKE_SBATCH_FAIL" >&2; exit 1; fi
[ -n "$array" ] || array=$(sed -n 's/^#SBATCH --array=//p' "$script")
out=$(sed -n 's/^#SBATCH --output=//p' "$script")
id=$(cat "$state/next" 2>/dev/null || echo 100)
echo $((id + 1)) >"$state/next"
: >"$state/job-$id"
for part in ${array//,/ }; do
  for ((i = ${part%-*}; i <= ${part#*-}; i++)); do
    case ",${FAKE_SLURM_SKIP:-}," in *",$i,"*) continue ;; esac
    log=${out//%A/$id}; log=${log//%a/$i}
    echo "$i" >>"$state/job-$id"
    (SLURM_ARRAY_JOB_ID=$id SLURM_ARRAY_TASK_ID=$i bash "$script" >"$log" 2>&1 </dev/null
     touch "$state/done-$id-$i") >/dev/null 2>&1 &
  done
done
echo "$id"
)";

/// A stand-in for squeue --noheader --array --jobs=ID --format=%t: "R" per unfinished task.
constexpr const char* kFakeSqueue = R"(#!/bin/bash
state=$FAKE_SLURM_STATE
for a in "$@"; do case $a in --jobs=*) id=${a#--jobs=} ;; esac; done
[ -f "$state/job-$id" ] || { echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }
while read -r i; do [ -e "$state/done-$id-$i" ] || echo R; done <"$state/job-$id"
)";

class SlurmSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("cpsim-slurm-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    fs::create_directories(dir_ / "state");
    ASSERT_TRUE(fs::exists(kCpsim)) << "build the cpsim binary first: " << kCpsim;
    write(dir_ / "bin" / "sbatch", kFakeSbatch);
    write(dir_ / "bin" / "squeue", kFakeSqueue);
    fs::permissions(dir_ / "bin" / "sbatch", fs::perms::owner_all);
    fs::permissions(dir_ / "bin" / "squeue", fs::perms::owner_all);
    write(dir_ / "tiny.yaml", kTinyScenario);
    // 12 points of 4 costs (GPUs x tokens): cp 2, 4, 8 at 16K and cp 8 at 32K.
    write(dir_ / "sweep.yaml", R"(base: tiny.yaml
axes:
  parallel.attention.scheme: [ring, allgather, ulysses]
zip:
  - {parallel.cp: [2, 4, 8, 8], training.seq_len: [16K, 16K, 16K, 32K]}
)");
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  /// The environment that puts the stand-ins first on PATH and polls squeue often.
  std::string env(const std::string& extra = "") const {
    return "env PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin FAKE_SLURM_STATE=" + (dir_ / "state").string() +
           " CPSIM_SLURM_POLL_S=0.05 " + extra + " ";
  }
  std::string sweep(const std::string& args) const {
    return kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " " + args;
  }
  std::vector<std::string> sbatch_calls() const { return lines_of(slurp(dir_ / "state" / "sbatch.calls")); }

  /// The ids of shard i/K as --list prints them.
  std::vector<std::string> shard_ids(size_t i, size_t k) const {
    const Output o = run(sweep("--list --shard " + std::to_string(i) + "/" + std::to_string(k)));
    EXPECT_EQ(o.rc, 0) << o.text;
    std::vector<std::string> ids;
    for (const auto& l : lines_of(o.text)) ids.push_back(l.substr(l.rfind("# ") + 2));  // "cpsim run ...  # id"
    return ids;
  }

  fs::path dir_;
};

TEST_F(SlurmSweepTest, ShardsAreBalancedByCostDisjointAndDeterministic) {
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

TEST_F(SlurmSweepTest, SubmitsOneArrayScriptWithAbsolutePaths) {
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_);
  const Output o = run(env() + kCpsim +
                       " sweep sweep.yaml --slurm --array-size 4 --partition gpu --time 0:30:00 "
                       "--sbatch-arg=--account=proj -j 2 --timeout 90 --set simulation.seed=7 -o rel/out");
  fs::current_path(cwd);
  ASSERT_EQ(o.rc, 0) << o.text;
  const fs::path out = fs::canonical(dir_ / "rel" / "out");
  EXPECT_NE(o.text.find("submitted job 100: 4 array tasks (shards 0-3 of 4) for 12 of 12 points"), std::string::npos)
      << o.text;
  EXPECT_NE(o.text.find("cpsim sweep --merge " + out.string()), std::string::npos) << o.text;
  const std::string script = slurp(out / "sweep.sbatch");
  for (const std::string& line : std::vector<std::string>{
           "#SBATCH --array=0-3", "#SBATCH --output=" + (out / "slurm-%A_%a.out").string(), "#SBATCH --partition=gpu",
        "#SBATCH --time=0:30:00", "#SBATCH --account=proj", "#SBATCH --cpus-per-task=2", "#SBATCH --export=ALL",
        "exec " + fs::canonical(kCpsim).string() + " sweep " + (fs::canonical(dir_) / "sweep.yaml").string() +
            " --shard \"${SLURM_ARRAY_TASK_ID}/4\" -o " + out.string() +
            " -j 2 --timeout 90 --resume --set=simulation.seed=7"})
    EXPECT_NE(script.find("\n" + line + "\n"), std::string::npos) << line << "\n---\n" << script;
  ASSERT_EQ(sbatch_calls().size(), 1u);
  EXPECT_EQ(sbatch_calls()[0], "--parsable " + (out / "sweep.sbatch").string());
  const auto m = nlohmann::json::parse(slurp(out / "sweep-slurm.json"));
  EXPECT_EQ(m["shards"], 4);
  EXPECT_EQ(m["submissions"][0]["job_id"], "100");
  // Wait for the stand-in tasks, then merge from the directory alone.
  Output merged;
  for (int t = 0; t < 600; ++t) {
    merged = run(env() + kCpsim + " sweep --merge " + out.string());
    if (merged.rc == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(merged.rc, 0) << merged.text;
}

TEST_F(SlurmSweepTest, WaitMergesTheSameCsvAsALocalRun) {
  ASSERT_EQ(run(sweep("-j 2 -q -o " + (dir_ / "local").string())).rc, 0);
  const Output o = run(env() + sweep("--slurm --array-size 5 --wait -o " + (dir_ / "array").string()));
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("left the queue"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("merge: 12 points from 5 shards: 12 ok"), std::string::npos) << o.text;
  EXPECT_EQ(comparable(dir_ / "local" / "results.csv"), comparable(dir_ / "array" / "results.csv"));
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(fs::exists(dir_ / "array" / ("slurm-100_" + std::to_string(i) + ".out"))) << i;
  // -q prints the job id alone, for scripts.
  const Output q = run(env() + sweep("--slurm --array-size 2 -q -o " + (dir_ / "quiet").string()));
  ASSERT_EQ(q.rc, 0) << q.text;
  EXPECT_EQ(q.text, "101\n");
  for (int t = 0; t < 600 && run(env() + kCpsim + " sweep --merge " + (dir_ / "quiet").string()).rc != 0; ++t)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

TEST_F(SlurmSweepTest, ResumeResubmitsOnlyTheMissingShards) {
  ASSERT_EQ(run(sweep("-j 2 -q -o " + (dir_ / "local").string())).rc, 0);
  const std::string out = (dir_ / "array").string();
  // Tasks 1 and 3 of 4 never run (as if killed before they wrote a row). Their shards hold
  // 3 and 4 of the 12 points (see ShardsAreBalancedByCost...: K = 4 gives 2, 3, 3, 4).
  const Output first = run(env("FAKE_SLURM_SKIP=1,3") + sweep("--slurm --array-size 4 --wait -o " + out));
  EXPECT_EQ(first.rc, 1) << first.text;
  EXPECT_NE(first.text.find("shard 1/4: 3 of 3 points missing"), std::string::npos) << first.text;
  EXPECT_NE(first.text.find("shard 3/4: 4 of 4 points missing"), std::string::npos) << first.text;
  EXPECT_NE(first.text.find("--slurm --resume -o " + out), std::string::npos) << first.text;
  std::map<fs::path, fs::file_time_type> stamp;
  for (const auto& e : fs::directory_iterator(dir_ / "array" / "runs")) stamp[e.path()] = fs::last_write_time(e.path());
  EXPECT_EQ(stamp.size(), 5u);

  // --merge reports the same and is idempotent.
  const Output m = run(env() + kCpsim + " sweep --merge " + out);
  EXPECT_EQ(m.rc, 1);
  EXPECT_NE(m.text.find("5 ok, 7 missing"), std::string::npos) << m.text;

  const Output again = run(env() + sweep("--slurm --resume --wait -o " + out));
  ASSERT_EQ(again.rc, 0) << again.text;
  EXPECT_NE(again.text.find("resuming: 5 of 12 points done; resubmitting shards 1,3 of 4"), std::string::npos)
      << again.text;
  ASSERT_EQ(sbatch_calls().size(), 2u);
  EXPECT_NE(sbatch_calls()[1].find("--array=1,3 "), std::string::npos) << sbatch_calls()[1];
  EXPECT_EQ(comparable(dir_ / "local" / "results.csv"), comparable(dir_ / "array" / "results.csv"));
  for (const auto& [p, t] : stamp) EXPECT_EQ(fs::last_write_time(p), t) << p << " ran twice";

  // Complete: a further resume submits nothing.
  const Output done = run(env() + sweep("--slurm --resume -o " + out));
  EXPECT_EQ(done.rc, 0) << done.text;
  EXPECT_NE(done.text.find("nothing to submit"), std::string::npos) << done.text;
  EXPECT_EQ(sbatch_calls().size(), 2u);
}

TEST_F(SlurmSweepTest, RefusesToSubmitWhileAnEarlierJobIsQueued) {
  const fs::path child = dir_ / "slow.sh";
  write(child, "#!/bin/sh\nsleep 0.5\nexec " + kCpsim + " \"$@\"\n");
  fs::permissions(child, fs::perms::owner_all);
  const std::string out = (dir_ / "array").string();
  ASSERT_EQ(run(env("CPSIM_SWEEP_CHILD=" + child.string()) + sweep("--slurm --array-size 2 -q -o " + out)).rc, 0);
  const Output o = run(env() + sweep("--slurm --resume -o " + out));
  EXPECT_EQ(o.rc, 1) << o.text;
  EXPECT_NE(o.text.find("job 100 (an earlier submission"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("scancel it first"), std::string::npos) << o.text;
  EXPECT_EQ(sbatch_calls().size(), 1u);
  // Once it is done, a resume finds everything there.
  Output r;
  for (int t = 0; t < 600; ++t) {
    r = run(env() + sweep("--slurm --resume -o " + out));
    if (r.rc != 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(r.rc, 0) << r.text;
  EXPECT_NE(r.text.find("nothing to submit"), std::string::npos) << r.text;
}

TEST_F(SlurmSweepTest, SbatchFailuresAndBadOptionsAreReported) {
  const std::string out = " -o " + (dir_ / "array").string();
  const Output fail = run(env("FAKE_SBATCH_FAIL='invalid partition specified: nope'") +
                          sweep("--slurm --partition nope" + out));
  EXPECT_EQ(fail.rc, 1);
  EXPECT_NE(fail.text.find("invalid partition specified: nope"), std::string::npos) << fail.text;
  EXPECT_FALSE(fs::exists(dir_ / "array" / "sweep-slurm.json"));

  const Output none = run("env PATH=" + (dir_ / "state").string() + " " + sweep("--slurm" + out));
  EXPECT_EQ(none.rc, 1);
  EXPECT_NE(none.text.find("cannot run sbatch"), std::string::npos) << none.text;

  for (const std::string& bad :
       std::vector<std::string>{"--wait", "--partition p", "--time 10", "--array-size 2", "--slurm --shard 0/2",
                                "--slurm --list", "--slurm --merge x", "--slurm --array-size 0"}) {
    const Output o = run(env() + sweep(bad + out));
    EXPECT_EQ(o.rc, 2) << bad << ": " << o.text;
    EXPECT_NE(o.text.find("--"), std::string::npos) << bad << ": " << o.text;
  }
  const Output blank = run(env() + sweep("--slurm -o '" + (dir_ / "a b").string() + "'"));
  EXPECT_EQ(blank.rc, 2);
  EXPECT_NE(blank.text.find("may not hold blanks"), std::string::npos) << blank.text;
  EXPECT_EQ(sbatch_calls().size(), 1u) << "only the failing submission reached sbatch";
}

}  // namespace
