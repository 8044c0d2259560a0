// app/process_pool: functions in forked children, real commands (a shell script stands for the
// cpsim binary, passed to SystemRunner's constructor), the interrupt flag, and run_batch's
// scheduling through a fake runner and clock.
#include "app/process_pool.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "support/fake_runner.hpp"
#include "support/temp_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

namespace fs = std::filesystem;
using namespace cpsim;
using namespace cpsim::app;

namespace {

TEST(ProcessPool, FunctionBytesComeBackFromTheChild) {
  const pid_t parent = ::getpid();
  const std::string got = pool::run_in_child([parent] {
    return std::string(::getpid() != parent ? "child" : "parent") + std::string(1, '\0') + "tail";
  });
  EXPECT_EQ(got, std::string("child") + std::string(1, '\0') + "tail");
}

TEST(ProcessPool, ChildErrorsAndSignalsAreThrownHere) {
  try {
    pool::run_in_child([]() -> std::string { throw std::invalid_argument("no such scheme"); });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "no such scheme");
  }
  try {
    // SIGKILL, not SIGSEGV: under ASan a SIGSEGV is caught and turned into an abort (signal 6).
    pool::run_in_child([]() -> std::string { ::raise(SIGKILL); return ""; });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("killed by signal 9"), std::string::npos) << e.what();
  }
}

TEST(ProcessPool, ChildrenKeepJobOrderAndNameTheFailingRun) {
  std::vector<std::function<std::string()>> jobs;
  for (int i = 0; i < 5; ++i)
    jobs.push_back([i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * (5 - i)));  // later ones end first
      return std::to_string(i * i);
    });
  EXPECT_EQ(pool::run_in_children(jobs, 3), (std::vector<std::string>{"0", "1", "4", "9", "16"}));
  jobs[3] = []() -> std::string { throw std::runtime_error("bad point"); };
  try {
    pool::run_in_children(jobs, 2);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "child run 4: bad point");
  }
}

/// A child job that sleeps `ms` and answers its start and end (steady clock, the same in
/// every process of this machine).
std::function<std::string()> sleeper(int ms) {
  return [ms] {
    auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
    const double start = now();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return std::to_string(start) + " " + std::to_string(now());
  };
}

/// Each sleeper's start and end, or a test failure.
void spans(const std::vector<pool::ChildOutcome>& out, double* start, double* end) {
  for (size_t k = 0; k < out.size(); ++k) {
    ASSERT_TRUE(out[k].ok) << out[k].error;
    ASSERT_EQ(std::sscanf(out[k].value.c_str(), "%lf %lf", &start[k], &end[k]), 2);
  }
}

TEST(ProcessPool, AFreeSlotTakesTheNextJobWhileALongOneRuns) {
  // Two slots, a long first job: the short second one ends, and the third starts in its slot
  // long before the first ends (the pool reaps whichever child answers first).
  const auto out = pool::run_each_in_children({sleeper(600), sleeper(10), sleeper(10)}, 2);
  ASSERT_EQ(out.size(), 3u);
  double s[3], e[3];
  spans(out, s, e);
  EXPECT_LT(s[2], e[0] - 0.4);
}

TEST(ProcessPool, ChildrenStartWhileWhatTheyHoldFits) {
  // 4 GB to share, three slots: the second job (3 GB) cannot run beside the first (3 GB) and
  // waits for it; the third (1 GB) can, and starts at once.
  const auto out = pool::run_each_in_children({sleeper(400), sleeper(10), sleeper(10)}, 3, {3e9, 3e9, 1e9}, 4e9);
  ASSERT_EQ(out.size(), 3u);
  double s[3], e[3];
  spans(out, s, e);
  EXPECT_GE(s[1], e[0]);
  EXPECT_LT(s[2], e[0] - 0.2);
}

TEST(ProcessPool, EachChildFailsAlone) {
  // A search's candidate killed by the OOM killer (SIGKILL) or failing to build is that
  // candidate's answer: the others still run and keep their results, in job order.
  std::vector<std::function<std::string()>> jobs;
  for (int i = 0; i < 5; ++i) jobs.push_back([i] { return std::to_string(i * i); });
  jobs[1] = []() -> std::string { ::raise(SIGKILL); return ""; };
  jobs[3] = []() -> std::string { throw std::runtime_error("bad point"); };
  const auto out = pool::run_each_in_children(jobs, 2);
  ASSERT_EQ(out.size(), 5u);
  for (int i : {0, 2, 4}) {
    EXPECT_TRUE(out[i].ok);
    EXPECT_EQ(out[i].value, std::to_string(i * i));
  }
  EXPECT_FALSE(out[1].ok);
  EXPECT_NE(out[1].error.find("killed by signal 9"), std::string::npos) << out[1].error;
  EXPECT_FALSE(out[3].ok);
  EXPECT_EQ(out[3].error, "bad point");
}

TEST(ProcessPool, ChildOverItsMemoryLimitStopsThereAndSaysSo) {
  // The limit is resident memory: this process's own plus 64 MB (a forked child starts with the
  // parent's pages). One child touches 512 MB and is stopped; its sibling finishes.
  unsigned long size = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fscanf(f, "%lu %lu", &size, &resident), 2);
  std::fclose(f);
  const double limit = static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGE_SIZE)) + 64e6;
  std::vector<std::function<std::string()>> jobs;
  jobs.push_back([] {
    std::vector<char> big(512u << 20, 1);
    for (int i = 0; i < 200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return std::string(1, big[12345]);
  });
  jobs.push_back([] { return std::string("small"); });
  const auto out = pool::run_each_in_children(jobs, 2, limit);
  EXPECT_FALSE(out[0].ok);
  EXPECT_TRUE(out[0].over_memory);
  EXPECT_NE(out[0].error.find("over its limit of"), std::string::npos) << out[0].error;
  EXPECT_TRUE(out[1].ok);
  EXPECT_FALSE(out[1].over_memory);
  EXPECT_EQ(out[1].value, "small");
}

class SystemRunnerTest : public test::TempDir {};

TEST_F(SystemRunnerTest, CommandsExitWithTheirCodeAndLogTheirStderr) {
  const fs::path script = dir_ / "fake-cpsim";
  cli::write(script, "#!/bin/sh\necho \"args: $*\" >&2\necho not-in-the-log\nexit 3\n");
  fs::permissions(script, fs::perms::owner_all);
  pool::SystemRunner r(script.string());
  EXPECT_EQ(r.cpsim(), script.string());
  const auto id = r.start_cpsim({"run", "a b.yaml"}, (dir_ / "log").string());
  std::optional<pool::Exit> e;
  for (int i = 0; i < 5000 && !(e = r.poll(id)); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->how, pool::Exit::How::Exited);
  EXPECT_EQ(e->code, 3);
  EXPECT_EQ(cli::slurp(dir_ / "log"), "args: run a b.yaml\n");

  const pool::Captured c = r.capture({"sh", "-c", "echo out; echo err >&2; exit 4"});
  EXPECT_EQ(c.rc, 4);
  EXPECT_EQ(c.out, "out\n");
  EXPECT_EQ(c.err, "err\n");
  const pool::Captured none = r.capture({"cpsim-no-such-program"});
  EXPECT_EQ(none.rc, 127);
  EXPECT_NE(none.err.find("cpsim-no-such-program"), std::string::npos) << none.err;
}

TEST_F(SystemRunnerTest, KillTakesTheWholeProcessGroup) {
  // The command starts a grandchild that would leave a mark 2 s later: killing the command
  // must kill it too (a sweep's timeout, an interrupted sweep).
  const fs::path script = dir_ / "fake-cpsim", marker = dir_ / "grandchild-survived";
  cli::write(script, "#!/bin/sh\n(sleep 2; touch " + marker.string() + ") &\nsleep 60\n");
  fs::permissions(script, fs::perms::owner_all);
  pool::SystemRunner r(script.string());
  const auto id = r.start_cpsim({}, (dir_ / "log").string());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(r.poll(id));
  r.kill(id);
  std::optional<pool::Exit> e;
  for (int i = 0; i < 5000 && !(e = r.poll(id)); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->how, pool::Exit::How::Signaled);
  EXPECT_EQ(e->code, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_FALSE(fs::exists(marker)) << "a child of the killed command outlived it";
}

TEST(RunBatch, AtMostNAtOnceTimeoutsAndInterrupts) {
  test::FakeRunner r("/nonexistent");
  test::FakeClock clock;
  r.rules = {{"hang", {test::Act::Hang}}, {"x", {test::Act::Exit, 0}}};
  size_t live = 0, most = 0;
  std::vector<pool::Finished> ended;
  const bool whole = pool::run_batch(
      r, clock, 6, 2, 30,
      [&](size_t i) {
        most = std::max(most, ++live);
        return r.start_cpsim({i == 4 ? "hang" : "x"}, "/dev/null");
      },
      [&](const pool::Finished& f) {
        --live;
        ended.push_back(f);
      },
      [](bool) {});
  EXPECT_TRUE(whole);
  EXPECT_EQ(most, 2u);
  ASSERT_EQ(ended.size(), 6u);
  const auto hung = std::find_if(ended.begin(), ended.end(), [](const auto& f) { return f.index == 4; });
  EXPECT_TRUE(hung->timed_out);
  EXPECT_EQ(hung->exit.how, pool::Exit::How::Signaled);
  EXPECT_GE(hung->wall_s, 30);
  EXPECT_LT(hung->wall_s, 31);

  // A Ctrl-C while two hang: both are killed and reaped, nothing more starts.
  pool::InterruptGuard guard;
  r.rules = {{"", {test::Act::Hang}}};
  r.killed.clear();
  size_t launched = 0, ticks = 0;
  const bool again = pool::run_batch(
      r, clock, 5, 2, 0, [&](size_t) { return ++launched, r.start_cpsim({"y"}, "/dev/null"); },
      [](const pool::Finished&) {},
      [&](bool) {
        if (++ticks == 3) ::raise(SIGINT);
      });
  EXPECT_FALSE(again);
  EXPECT_TRUE(pool::interrupted());
  EXPECT_EQ(launched, 2u);
  EXPECT_EQ(r.killed.size(), 2u);
}

}  // namespace

}  // namespace CPSIM_TEST_TU
