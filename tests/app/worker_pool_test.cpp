// app/worker_pool: jobs served one after another by long-lived forked workers, each failing
// alone, the heap a job freed reused by the next, and the memory limit.
#include "app/worker_pool.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::app;

namespace {

/// Touches `bytes` of fresh heap (every page written), frees it, and returns the page faults
/// that took (minor faults: a page the process did not hold yet).
long touch_and_count_faults(size_t bytes) {
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  {
    std::vector<char> v(bytes);
    for (size_t i = 0; i < bytes; i += 4096) v[i] = static_cast<char>(i);
    if (v[bytes / 2] == 42) return -1;  // keeps the writes
  }
  getrusage(RUSAGE_SELF, &after);
  return after.ru_minflt - before.ru_minflt;
}

TEST(WorkerPool, JobsShareTheWorkersAndKeepTheirOrder) {
  const pid_t parent = ::getpid();
  pool::WorkerPool p([parent](const std::string& req) {
    return req + (::getpid() != parent ? ":" + std::to_string(::getpid()) : ":parent");
  }, 2, 0);
  const std::vector<std::string> reqs = {"a", "b", "c", "d", "e", "f"};
  const auto out = p.run(reqs, {});
  ASSERT_EQ(out.size(), reqs.size());
  std::set<std::string> pids;
  for (size_t k = 0; k < out.size(); ++k) {
    ASSERT_TRUE(out[k].ok) << out[k].error;
    EXPECT_EQ(out[k].value.substr(0, 2), reqs[k] + ":");
    EXPECT_NE(out[k].value.substr(2), "parent");
    pids.insert(out[k].value.substr(2));
  }
  EXPECT_EQ(p.starts(), 2);  // six jobs, two workers: never one process per job
  EXPECT_LE(pids.size(), 2u);
  // A second batch goes to the same workers.
  const auto again = p.run({"g"}, {});
  ASSERT_TRUE(again[0].ok);
  EXPECT_EQ(p.starts(), 2);
  EXPECT_TRUE(pids.count(again[0].value.substr(2)));
}

TEST(WorkerPool, EachJobFailsAloneAndAKilledWorkerIsReplaced) {
  pool::WorkerPool p([](const std::string& req) -> std::string {
    if (req == "kill") ::raise(SIGKILL);
    if (req == "throw") throw std::runtime_error("bad point");
    return "ok " + req;
  }, 1, 0);
  const auto out = p.run({"1", "kill", "2", "throw", "3"}, {});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].value, "ok 1");
  EXPECT_FALSE(out[1].ok);
  EXPECT_NE(out[1].error.find("killed by signal 9"), std::string::npos) << out[1].error;
  EXPECT_TRUE(out[1].lost);  // its worker died: what the job itself would do is not known
  EXPECT_EQ(out[2].value, "ok 2");
  EXPECT_FALSE(out[3].ok);
  EXPECT_EQ(out[3].error, "bad point");
  EXPECT_FALSE(out[3].lost);  // the job's own answer
  EXPECT_EQ(out[4].value, "ok 3");
  EXPECT_EQ(p.starts(), 2);  // the killed worker's successor served the rest; "throw" kept its worker
}

TEST(WorkerPool, AWorkerThatDiedWhileIdleIsReplacedForTheNextJob) {
  // The OOM killer may take an idle worker: sending it the next job must not kill this process
  // (SIGPIPE), and the job runs in a fresh worker.
  pool::WorkerPool p([](const std::string&) { return std::to_string(::getpid()); }, 1, 0);
  const auto first = p.run({"a"}, {});
  ASSERT_TRUE(first[0].ok);
  const pid_t worker = static_cast<pid_t>(std::stol(first[0].value));
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  ::usleep(100 * 1000);  // let it die
  const auto second = p.run({"b"}, {});
  ASSERT_TRUE(second[0].ok) << second[0].error;
  EXPECT_NE(second[0].value, first[0].value);
  EXPECT_EQ(p.starts(), 2);
}

TEST(WorkerPool, TheNextJobReusesTheMemoryTheLastOneFreed) {
#ifdef CPSIM_SANITIZED
  GTEST_SKIP() << "ASan's allocator serves the jobs, not glibc's malloc that the workers tune; "
                  "runs in the optimised stage";
#endif
  // What the pool is for: 256 MB touched and freed by one job are pages the next job's 256 MB
  // need not fault in again (a fresh child faults all 65,536 of them).
  pool::WorkerPool p([](const std::string&) { return std::to_string(touch_and_count_faults(256u << 20)); }, 1, 0);
  const auto out = p.run({"first", "second"}, {});
  ASSERT_TRUE(out[0].ok && out[1].ok);
  const long first = std::stol(out[0].value), second = std::stol(out[1].value);
  EXPECT_GT(first, 30000);
  EXPECT_LT(second, first / 10) << "first job " << first << " faults, second " << second;
  ASSERT_EQ(p.kept_bytes().size(), 1u);
  EXPECT_GT(p.kept_bytes()[0], 256e6);  // the worker holds them between jobs
}

TEST(WorkerPool, AJobOverItsMemoryLimitStopsThereAndSaysSo) {
  // This process's own pages (a forked worker starts with them) plus 64 MB.
  const double limit = pool::resident_bytes() + 64e6;
  pool::WorkerPool p([](const std::string& req) -> std::string {
    if (req != "big") return "small";
    std::vector<char> big(512u << 20, 1);
    ::usleep(2000 * 1000);
    return std::string(1, big[12345]);
  }, 1, 0);
  const auto out = p.run({"big", "small"}, {limit, limit});
  EXPECT_FALSE(out[0].ok);
  EXPECT_TRUE(out[0].over_memory);
  EXPECT_NE(out[0].error.find("over its limit of"), std::string::npos) << out[0].error;
  EXPECT_TRUE(out[0].lost);
  EXPECT_TRUE(out[1].ok) << out[1].error;
  EXPECT_EQ(out[1].value, "small");
}

}  // namespace

}  // namespace CPSIM_TEST_TU
