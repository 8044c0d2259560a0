// nccl-tests logs as src/common.cu prints them, and the errors for logs that are not.
#include <gtest/gtest.h>

#include <string>

#include "scenario/load.hpp"
#include "scenario/nccl_log.hpp"

namespace CPSIM_TEST_TU {

using cpsim::scenario::InputError;
using cpsim::scenario::parse_nccl_log;

const std::string kHead =
    "# nccl-tests version 2.17.6 nccl-headers=22105 nccl-library=22105\n"
    "# Collective test starting: all_reduce_perf\n"
    "# nThread 1 nGpus 1 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20 "
    "agg iters: 1 validation: 1 graph: 0\n"
    "#\n"
    "# Using devices\n"
    "#  Rank  0 Group  0 Pid  40000 on  node000 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
    "#  Rank  1 Group  0 Pid  40001 on  node001 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
    "#\n"
    "#                                                              out-of-place                 "
    "      in-place          \n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
    "   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)"
    "  (GB/s)  (GB/s)       \n";
const std::string kRows =
    "        1024           256     float     sum      -1    20.50    0.05    0.05      0    20.10"
    "    0.05    0.05      0\n"
    "        2048           512     float     sum      -1    21.00    0.10    0.10      0    20.90"
    "    0.10    0.10      0\n";
const std::string kTail =
    "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.075 \n#\n"
    "# Collective test concluded: all_reduce_perf\n";

TEST(NcclLog, ReadsTheHeaderTableAndTrailer) {
  const auto logs = parse_nccl_log(kHead + kRows + kTail, "ar.log", "");
  ASSERT_EQ(logs.size(), 1u);
  const auto& l = logs[0];
  EXPECT_EQ(l.op, "allreduce");
  EXPECT_EQ(l.program, "all_reduce_perf");
  EXPECT_EQ(l.ranks, 2);
  EXPECT_EQ(l.hosts.size(), 2u);
  EXPECT_EQ(l.device, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(l.nccl_version, "2.21.5");
  ASSERT_EQ(l.rows.size(), 2u);
  EXPECT_EQ(l.rows[1].size_bytes, 2048);
  EXPECT_DOUBLE_EQ(l.rows[1].time_us, 21.0);
  EXPECT_DOUBLE_EQ(l.rows[1].ip_time_us, 20.9);
  EXPECT_EQ(l.rows[0].line, 12);
  EXPECT_DOUBLE_EQ(l.avg_busbw_GBps, 0.075);
}

TEST(NcclLog, ReadsSrunLabelsAndInterleavedNcclInfoLines) {
  std::string text;
  const std::string all = kHead + kRows.substr(0, kRows.find('\n') + 1) +
                          "node001:40001:40101 [0] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 0 "
                          "busId 18000 - Init COMPLETE\n" +
                          kRows.substr(kRows.find('\n') + 1) + kTail;
  size_t at = 0;
  while (at < all.size()) {
    const size_t nl = all.find('\n', at);
    text += "  0: " + all.substr(at, nl - at) + "\n";
    at = nl + 1;
  }
  const auto logs = parse_nccl_log(text, "srun.log", "");
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].rows.size(), 2u);
  EXPECT_EQ(logs[0].ranks, 2);
}

TEST(NcclLog, OpFromTheFileNameWhenTheLogDoesNotSay) {
  std::string old = kHead.substr(kHead.find("# nThread"));  // nccl-tests before 2.13
  const auto logs = parse_nccl_log(old + kRows + "# Avg bus bandwidth    : 0.075\n",
                                   "/runs/alltoall_perf.out", "");
  EXPECT_EQ(logs.at(0).op, "alltoall");
  EXPECT_THROW(parse_nccl_log(old + kRows + "# Avg bus bandwidth    : 0.075\n", "x.log", ""),
               InputError);
  EXPECT_EQ(parse_nccl_log(old + kRows + "# Avg bus bandwidth    : 0.075\n", "x.log", "allgather")
                .at(0).op, "allgather");
}

TEST(NcclLog, SeveralTestsInOneFile) {
  std::string second = kHead + kRows + kTail;
  const std::string from = "all_reduce_perf";
  for (size_t p; (p = second.find(from)) != std::string::npos;) second.replace(p, from.size(), "all_gather_perf");
  const auto logs = parse_nccl_log(kHead + kRows + kTail + second, "both.log", "");
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].op, "allreduce");
  EXPECT_EQ(logs[1].op, "allgather");
  EXPECT_GT(logs[1].first_line, logs[0].last_line);
}

void expect_error(const std::string& text, const std::string& says, int line) {
  try {
    parse_nccl_log(text, "bad.log", "");
    FAIL() << "no error; expected: " << says;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("bad.log:" + std::to_string(line) + ": error:", 0), 0u)
        << e.what();
  }
}

TEST(NcclLog, TruncatedMixedAndNonUtf8LogsAreRefusedAtTheirLine) {
  expect_error(kHead + kRows, "truncated", 13);
  expect_error(kHead + kRows.substr(0, kRows.find('\n') + 1) + "        2048           512     float",
               "columns", 13);
  std::string mixed = kRows;
  mixed.replace(mixed.rfind("sum"), 3, "none");
  expect_error(kHead + mixed + kTail, "mixed", 13);
  expect_error(kHead + kRows.substr(kRows.find('\n') + 1) + kRows.substr(0, kRows.find('\n') + 1) + kTail,
               "sizes go down", 13);
  expect_error(kHead + "        1024           256     float     sum      -1    20\xff" + kTail,
               "not UTF-8", 12);
  expect_error("hello\nworld\n", "no nccl-tests table", 2);
  expect_error(kHead + kRows + kHead + kRows + kTail, "a new test starts", 15);
}

}  // namespace CPSIM_TEST_TU
