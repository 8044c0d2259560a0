// Never a crash, never a lost file. One test per class of failure an adversarial
// user found: crashes (exit code and message, never 134), unbounded work (refused with the
// estimate), silent wrong results, check vs run, data loss (on temp dirs and, as root, a private
// device node), concurrency (two real sweep processes), poor messages.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "app/sweep/common.hpp"
#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

namespace fs = std::filesystem;
using namespace cpsim::cli;

namespace {

class RobustTest : public cpsim::test::TempDir {
 protected:
  void SetUp() override {
    TempDir::SetUp();
    write(dir_ / "tiny.yaml", kTinyScenario);
  }
  std::string tiny() const { return (dir_ / "tiny.yaml").string(); }
  /// A profile CSV with one row whose time_us is `time_us`.
  std::string profile(const std::string& time_us) const {
    const fs::path p = dir_ / "p.csv";
    write(p,
          "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,dtype,time_us,"
          "tflops,source,commit\n"
          "H100-SXM,fa3,fwd,1024,1024,full,1.000000,192,192,128,bf16," +
              time_us + ",541.00,published,x\n");
    return p.string();
  }
};

// ---- crash -> exit code and a one-line message -----------------------------------------------

TEST_F(RobustTest, NanProfileIsBadInputEverywhereNotAnAbort) {
  const std::string p = profile("nan");
  for (const char* cmd : {" kernels shapes ", " run ", " check "}) {
    const Output o = run(kCpsim + cmd + tiny() + " --set cost.profile=" + p);
    EXPECT_EQ(o.rc, 2) << cmd << o.text;
    EXPECT_NE(o.text.find("p.csv:2:"), std::string::npos) << cmd << o.text;  // file:line:col
    EXPECT_NE(o.text.find("time_us"), std::string::npos) << o.text;
  }
}

TEST_F(RobustTest, BillionMicroBatchesAreRefusedWithTheEstimate) {
  const Output o = run(kCpsim + " kernels shapes " + tiny() +
                       " --set training.micro_batches=1000000000 --set simulation.scope=step");
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("1000000000 micro-batches"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("GB of memory"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("bad_alloc"), std::string::npos);
  const Output r = run(kCpsim + " run " + tiny() +
                       " --set training.micro_batches=100000 --set simulation.scope=step --max-memory 1GiB");
  EXPECT_EQ(r.rc, 2) << r.text;
  EXPECT_NE(r.text.find("over the limit of 1.07 GB"), std::string::npos) << r.text;
  EXPECT_EQ(run(kCpsim + " run " + tiny() + " --max-memory 0").rc, 2);
  // Layer scope builds every micro-batch too (found by fuzz_argv: it took 24 GB, then SIGKILL).
  for (const char* cmd : {" kernels shapes ", " run "}) {
    const Output l = run("env CPSIM_MAX_MEMORY=1GiB " + kCpsim + cmd + tiny() +
                         " --set training.micro_batches=1000000000 --set simulation.scope=layer");
    EXPECT_EQ(l.rc, 2) << cmd << l.text;
    EXPECT_NE(l.text.find("the layer's task graph would have about"), std::string::npos) << l.text;
    EXPECT_NE(l.text.find("over the limit of 1.07 GB (CPSIM_MAX_MEMORY)"), std::string::npos) << l.text;
  }
  EXPECT_EQ(run("env CPSIM_MAX_MEMORY=lots " + kCpsim + " run " + tiny() +
                " --set training.micro_batches=100 --set simulation.scope=layer").rc,
            2);
}

TEST_F(RobustTest, HugeCountsOnTheCommandLineAreRefused) {
  Output o = run(kCpsim + " partition --seq 1000000 --cp 1000000 --layout contiguous");
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("--cp: at most 1024"), std::string::npos) << o.text;
  o = run(kCpsim + " sweep --merge " + dir_.string() + " --array-size 1000000000");
  EXPECT_EQ(o.rc, 2) << o.text;
  o = run(kCpsim + " sweep --merge " + dir_.string() + " --array-size 0");
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_EQ(o.text.find("1797693"), std::string::npos) << o.text;  // no DBL_MAX in the message
  write(dir_ / "sweep.yaml", "base: tiny.yaml\naxes:\n  parallel.cp: [4, 8]\n");
  o = run(kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " --list --shard 0/1000000000");
  EXPECT_EQ(o.rc, 2) << o.text;
}

TEST_F(RobustTest, OutOfMemoryIsExitOneWithWhatItWasDoing) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan reserves terabytes of address space: ulimit -v cannot apply";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "ASan reserves terabytes of address space: ulimit -v cannot apply";
#endif
#endif
  // 200 MB of address space for a 1,000-micro-batch step forced past the work limit: the
  // new-handler reports it (never std::terminate, an abort or exit 134).
  const Output o = run("ulimit -v 200000; " + kCpsim + " run " + tiny() +
                       " --set training.micro_batches=1000 --set simulation.scope=step"
                       " --set simulation.engine=simgrid --force -q");
  EXPECT_EQ(o.rc, 1) << o.text;
  EXPECT_NE(o.text.find("cpsim: out of memory while "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("; try a smaller simulation.scope"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("terminate"), std::string::npos) << o.text;
}

TEST_F(RobustTest, ManifestWithNegativeShardsIsAnErrorNotACrash) {
  write(dir_ / "sweep.yaml", "base: tiny.yaml\naxes:\n  parallel.cp: [4, 8]\n");
  write(dir_ / "sweep-slurm.json",
        R"({"sweep_file": ")" + (dir_ / "sweep.yaml").string() + R"(", "shards": -1, "submissions": []})");
  const Output o = run(kCpsim + " sweep --merge " + dir_.string());
  EXPECT_EQ(o.rc, 1) << o.text;
  EXPECT_NE(o.text.find("\"shards\": -1 is not between 1 and"), std::string::npos) << o.text;
}

// ---- unbounded reads -------------------------------------------------------------------------

TEST_F(RobustTest, ProfileCsvIsCappedAt16MiB) {
  const std::string p = profile("190.5");
  {
    std::ofstream f(p, std::ios::app);
    const std::string row = "H100-SXM,fa3,fwd,2048,2048,full,1.000000,192,192,128,bf16,667.179,618.00,x,y\n";
    for (size_t n = 0; n < (17u << 20) / row.size(); ++n) f << row;
  }
  const Output o = run(kCpsim + " check " + tiny() + " --set cost.profile=" + p);
  EXPECT_EQ(o.rc, 2) << o.text.substr(0, 2000);
  EXPECT_NE(o.text.find("larger than 16 MiB"), std::string::npos) << o.text.substr(0, 2000);
}

// ---- silent wrong results ----------------------------------------------------------------------

TEST_F(RobustTest, AbsurdBandwidthIsRefusedNotReportedAsInf) {
  const Output o = run(kCpsim + " run " + tiny() + " --set platform.intra.nvlink.bw=1e-300Bps");
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("below 1 B/s"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("inf s"), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("nan"), std::string::npos) << o.text;
}

TEST_F(RobustTest, ResumeRerunsARowWhoseJsonIsCorrupted) {
  write(dir_ / "sweep.yaml", "base: tiny.yaml\naxes:\n  parallel.attention.scheme: [ring, allgather]\n");
  const std::string sweep = kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " -o " + (dir_ / "out").string();
  ASSERT_EQ(run(sweep + " -q").rc, 0);
  const fs::path js = dir_ / "out" / "runs" / "0000.json";
  ASSERT_TRUE(fs::exists(js));
  const std::string good = slurp(js);
  write(js, good.substr(0, good.size() / 2));  // truncated
  // And a corrupted cell of the other row: --resume takes the metrics from its JSON again.
  std::string csv = slurp(dir_ / "out" / "results.csv");
  const auto at = csv.rfind("\n0001,ok,,allgather,");
  ASSERT_NE(at, std::string::npos) << csv;
  csv.replace(at + 20, 1, "9");
  write(dir_ / "out" / "results.csv", csv);
  const Output o = run(sweep + " --resume");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("1 of 2 points already done"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("ok 0000"), std::string::npos) << o.text;  // point 0 ran again
  EXPECT_TRUE(nlohmann::json::accept(slurp(js)));
  const std::string after = slurp(dir_ / "out" / "results.csv");
  const auto j1 = nlohmann::json::parse(slurp(dir_ / "out" / "runs" / "0001.json"));
  char want[48];
  std::snprintf(want, sizeof want, "%.9g", j1["step_time_s"].get<double>());
  EXPECT_NE(after.find(std::string(",allgather,") + want + ","), std::string::npos) << after;
}

// ---- check = run's validation -----------------------------------------------------------------

TEST_F(RobustTest, CheckRefusesWhatRunRefuses) {
  const std::string s = std::string(CPSIM_SOURCE_DIR) + "/scenarios/perturb-rail-down.yaml";
  const std::string all = " --set 'perturb.rails_down=[0,1,2,3,4,5,6,7]' --set perturb.links=[]";
  const Output c = run(kCpsim + " check " + s + all);
  EXPECT_EQ(c.rc, 2) << c.text;
  EXPECT_NE(c.text.find("every rail"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("perturb.rails_down"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("<--set>:1:20: error: perturb.rails_down: every rail"), std::string::npos) << c.text;
  EXPECT_EQ(run(kCpsim + " check " + s).rc, 0);
  // In a file: check and run both name the line and column of the list.
  std::string text = slurp(s);
  text.replace(text.find("rails_down: [0]"), 15, "rails_down: [0, 1, 2, 3, 4, 5, 6, 7]");
  write(dir_ / "down.yaml", text);
  for (const char* cmd : {" check ", " run ", " kernels shapes "}) {
    const Output o = run(kCpsim + cmd + (dir_ / "down.yaml").string() + " --set simulation.engine=analytic");
    EXPECT_EQ(o.rc, 2) << cmd << o.text;
    EXPECT_NE(o.text.find("down.yaml:25:15: error: perturb.rails_down: every rail GPUs use (8 of 8 NICs per "
                          "node) is down, so the 4 nodes cannot reach each other"),
              std::string::npos)
        << cmd << o.text;
  }
}

// ---- data loss ----------------------------------------------------------------------------------

TEST_F(RobustTest, OutputThatIsTheInputOrAnotherOutputIsRefused) {
  const std::string before = slurp(tiny());
  Output o = run(kCpsim + " run " + tiny() + " --json " + tiny());
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("is the input"), std::string::npos) << o.text;
  EXPECT_EQ(slurp(tiny()), before);
  // Through another name (a symlink) too.
  fs::create_symlink(tiny(), dir_ / "alias.json");
  EXPECT_EQ(run(kCpsim + " run " + tiny() + " --json " + (dir_ / "alias.json").string()).rc, 2);
  EXPECT_EQ(slurp(tiny()), before);
  const std::string x = (dir_ / "x.json").string();
  o = run(kCpsim + " run " + tiny() + " --json " + x + " --trace " + x);
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("also the output of --json"), std::string::npos) << o.text;
  EXPECT_FALSE(fs::exists(x));
  o = run(kCpsim + " run " + tiny() + " --json " + dir_.string());
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("is a directory"), std::string::npos) << o.text;
  o = run(kCpsim + " partition --seq 16K --cp 4 --layout zigzag --json " + dir_.string());
  EXPECT_EQ(o.rc, 2) << o.text;
}

TEST_F(RobustTest, DeviceNodeIsWrittenInPlaceNeverReplaced) {
  const fs::path dev = dir_ / "null";
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) GTEST_SKIP() << "mknod needs root";
  const Output o = run(kCpsim + " run " + tiny() + " -q --json " + dev.string());
  EXPECT_EQ(o.rc, 0) << o.text;
  struct stat st {};
  ASSERT_EQ(::stat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // /dev/full as the output: the write fails, exit 1 naming it.
  const Output full = run(kCpsim + " run " + tiny() + " -q --json /dev/full");
  EXPECT_EQ(full.rc, 1) << full.text;
  EXPECT_NE(full.text.find("/dev/full"), std::string::npos) << full.text;
}

TEST_F(RobustTest, WritesGoThroughAPrivateTemporaryAndNeverFollowSymlinks) {
  // A symlink at the output is replaced by the result, never followed: what it pointed to is
  // untouched (a link planted in a sweep's directory would otherwise redirect the write), and
  // no temporary is left; the old predictable temporary name, planted as a link, is not followed.
  write(dir_ / "target.json", "old");
  write(dir_ / "victim", "precious");
  fs::create_symlink(dir_ / "target.json", dir_ / "out.json");
  for (int pid = 1; pid < 5; ++pid)
    fs::create_symlink(dir_ / "victim", dir_ / ("target.json.tmp." + std::to_string(pid)));
  const Output o = run(kCpsim + " run " + tiny() + " -q --json " + (dir_ / "out.json").string());
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_FALSE(fs::is_symlink(dir_ / "out.json"));
  EXPECT_TRUE(nlohmann::json::accept(slurp(dir_ / "out.json")));
  EXPECT_EQ(slurp(dir_ / "target.json"), "old");
  EXPECT_EQ(slurp(dir_ / "victim"), "precious");
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_FALSE(e.path().filename().string().starts_with(".out.json.tmp.")) << e.path();
}

TEST_F(RobustTest, SweepNameCannotEscapeTheWorkingDirectory) {
  fs::create_directories(dir_ / "work");
  write(dir_ / "work" / "tiny.yaml", kTinyScenario);
  write(dir_ / "work" / "sweep.yaml", "name: ../../escaped\nbase: tiny.yaml\naxes:\n  parallel.cp: [4]\n");
  const Output o = run("cd " + (dir_ / "work").string() + " && " + kCpsim + " sweep sweep.yaml -q");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_FALSE(fs::exists(dir_.parent_path() / "escaped-sweep"));
  EXPECT_FALSE(fs::exists(dir_ / "escaped-sweep"));
  // "../../escaped" became one path component inside the working directory.
  EXPECT_TRUE(fs::exists(dir_ / "work" / "-.-..-escaped-sweep" / "results.csv"));
}

TEST_F(RobustTest, SecondSweepIntoTheSameDirectoryRefusesAndNamesTheHolder) {
  // This process holds the directory's lock as a running sweep does; a sweep started
  // meanwhile must refuse and write nothing.
  write(dir_ / "sweep.yaml", "base: tiny.yaml\naxes:\n  parallel.attention.scheme: [ring, allgather, ulysses]\n");
  const std::string sweep = kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " -o " + (dir_ / "out").string();
  fs::create_directories(dir_ / "out");
  {
    const cpsim::app::sweep::OutputLock held(dir_ / "out", "results.csv");
    const Output second = run(sweep + " -q");
    EXPECT_EQ(second.rc, 1) << second.text;
    EXPECT_NE(second.text.find("another sweep (pid " + std::to_string(::getpid())), std::string::npos)
        << second.text;
    EXPECT_FALSE(fs::exists(dir_ / "out" / "results.csv"));
  }
  // Once the first is done, the directory is free again.
  EXPECT_EQ(run(sweep + " -q").rc, 0);
  EXPECT_EQ(read_csv(dir_ / "out" / "results.csv").size(), 3u);
}

// ---- messages ------------------------------------------------------------------------------------

TEST_F(RobustTest, SymlinkLoopAndDirectoryProfileSayWhatIsWrong) {
  fs::create_symlink(dir_ / "loop-a.yaml", dir_ / "loop-b.yaml");
  fs::create_symlink(dir_ / "loop-b.yaml", dir_ / "loop-a.yaml");
  Output o = run(kCpsim + " check " + (dir_ / "loop-a.yaml").string());
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("symbolic links"), std::string::npos) << o.text;
  o = run(kCpsim + " check " + tiny() + " --set cost.profile=" + dir_.string());
  EXPECT_EQ(o.rc, 2) << o.text;
  EXPECT_NE(o.text.find("is a directory"), std::string::npos) << o.text;
}

TEST_F(RobustTest, VersionAndDidYouMean) {
  Output o = run(kCpsim + " --version");
  EXPECT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("cpsim 0."), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("git "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("SimGrid 3."), std::string::npos) << o.text;
  o = run(kCpsim + " rnu " + tiny());
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.text.find("did you mean 'run'?"), std::string::npos) << o.text;
  o = run(kCpsim + " run " + tiny() + " --jsno x.json");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.text.find("did you mean '--json'?"), std::string::npos) << o.text;
}

TEST_F(RobustTest, PivotPrintsStepTimesAsATable) {
  write(dir_ / "sweep.yaml",
        "base: tiny.yaml\naxes:\n  parallel.attention.scheme: [ring, allgather]\n  parallel.cp: [4, 8]\n");
  const std::string sweep = kCpsim + " sweep " + (dir_ / "sweep.yaml").string() + " -o " + (dir_ / "out").string();
  const Output o = run(sweep + " -q --pivot parallel.attention.scheme,parallel.cp");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("parallel.attention.scheme  "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("\nring "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("\nallgather "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find(" ms"), std::string::npos) << o.text;
  const Output bad = run(sweep + " -q --resume --pivot parallel.attention.schem,parallel.cp");
  EXPECT_EQ(bad.rc, 2) << bad.text;
  EXPECT_NE(bad.text.find("did you mean 'parallel.attention.scheme'?"), std::string::npos) << bad.text;
}

}  // namespace

TEST(RobustBounds, PerDocumentShardingOfOneTokenDocumentsIsRefusedBeforeTheWork) {
  // 1M one-token documents at cp 8 would be 16.8 M chunks to cut and list: refused at once.
  const Output o = run("timeout 20 " + kCpsim +
                       " partition --seq 1M --cp 8 --layout zigzag --doc-mean 1 --document-sharding per-document");
  EXPECT_EQ(o.rc, 2) << o.text.substr(0, 500);
  EXPECT_NE(o.text.find("chunks, above the 1048576 it lists"), std::string::npos) << o.text.substr(0, 500);
}

}  // namespace CPSIM_TEST_TU
