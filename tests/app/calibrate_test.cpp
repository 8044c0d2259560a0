// `cpsim calibrate nccl`: logs written from a modified platform's own simulation, in nccl-tests'
// format, calibrate the preset back to that platform; bad logs are refused with exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {

using namespace cpsim::cli;
namespace fs = std::filesystem;

const std::string kTools = std::string(CPSIM_SOURCE_DIR) + "/tools";
const std::string kSamples = std::string(CPSIM_SOURCE_DIR) + "/tests/data/nccl";

struct Dir {
  fs::path p = fs::temp_directory_path() / ("cpsim-cal-" + std::to_string(::getpid()));
  Dir() { fs::create_directories(p); }
  ~Dir() { fs::remove_all(p); }
  std::string operator/(const std::string& f) const { return (p / f).string(); }
};

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

/// The platform far from its preset: NVLS disabled, NVLink at 70 % of 450 GB/s where the preset
/// says 82.4 %, a send/recv pair capped at 150 GB/s, and an older NCCL's latencies (x1.8).
const char* kTruth = R"(preset: dgx-h100
intra:
  nvlink:
    efficiency: 0.70
nccl:
  nvls: false
  p2p_max_bw: 150GBps
  base_latency: {ll: 11.88us, ll128: 25.2us, simple: 15.12us}
  hop_latency:
    nvlink: {ll: 1.08us, ll128: 3.42us, simple: 6.12us}
    pcie: {ll: 1.8us, ll128: 4.5us, simple: 10.26us}
  p2p_latency: 4.5us
)";

TEST(CalibrateNccl, RecoversAModifiedPlatformFromItsOwnLogs) {
  Dir d;
  write(d / "truth.yaml", kTruth);
  std::string logs;
  for (const char* op : {"allreduce", "allgather", "sendrecv"}) {
    const std::string j = d / (std::string(op) + ".json"), log = d / (std::string(op) + ".log");
    const Output c = run(kCpsim + " collective --platform " + d / "truth.yaml" + " --op " + op +
                         " --ranks 8 -b 1K -e 1G -f 4 --engine analytic --json " + j);
    ASSERT_EQ(c.rc, 0) << c.text;
    const Output w = run("python3 " + kTools + "/nccl_log_from_json.py " + j + " -o " + log);
    ASSERT_EQ(w.rc, 0) << w.text;
    logs += " " + log;
  }
  const Output f = run(kCpsim + " calibrate nccl" + logs + " --platform dgx-h100 --engine analytic -o " +
                       d / "fitted.yaml" + " --json " + d / "fit.json");
  ASSERT_EQ(f.rc, 0) << f.text;
  const auto fit = read_json(d / "fit.json");
  std::map<std::string, double> v;
  for (const auto& x : fit.at("values")) v[x.at("key").get<std::string>()] = x.at("after").get<double>();
  EXPECT_NEAR(v.at("intra.nvlink.efficiency"), 0.70, 0.70 * 0.02) << f.text;
  EXPECT_NEAR(v.at("nccl.p2p_max_bw"), 150, 150 * 0.02) << f.text;
  EXPECT_NEAR(v.at("latency_scale.intra"), 1.8, 1.8 * 0.1) << f.text;
  EXPECT_FALSE(fit.at("nvls").at("after").get<bool>()) << f.text;
  // The written platform reproduces the log it was fitted from: busbw within 5 % at >= 16 MiB
  // and 15 % below, with `cpsim collective` itself.
  const auto truth = read_json(d / "allreduce.json");
  const Output again = run(kCpsim + " collective --platform " + d / "fitted.yaml" +
                           " --op allreduce --ranks 8 -b 1K -e 1G -f 4 --engine analytic --json " +
                           d / "again.json");
  ASSERT_EQ(again.rc, 0) << again.text;
  const auto re = read_json(d / "again.json");
  ASSERT_EQ(re.at("results").size(), truth.at("results").size());
  for (size_t i = 0; i < re["results"].size(); ++i) {
    const double size = truth["results"][i].at("size_bytes").get<double>();
    const double want = truth["results"][i].at("busbw_GBps").get<double>();
    const double got = re["results"][i].at("busbw_GBps").get<double>();
    EXPECT_NEAR(got, want, want * (size >= 16.0 * 1024 * 1024 ? 0.05 : 0.15)) << size;
  }
  // Every fitted value names the log it came from.
  std::ifstream in(d / "fitted.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("preset: dgx-h100"), std::string::npos) << text;
  EXPECT_NE(text.find("  nvlink:\n    efficiency: 0."), std::string::npos) << text;
  EXPECT_NE(text.find("allreduce.log:"), std::string::npos) << text;
  EXPECT_NE(text.find("nvls: false"), std::string::npos) << text;
}

TEST(CalibrateNccl, BundledSamplesCalibrateAndRun) {
  Dir d;
  const Output f = run(kCpsim + " calibrate nccl " + kSamples + "/dgx-h100-nvls-off/all_reduce_perf.log " +
                       kSamples + "/dgx-h100-nvls-off/sendrecv_perf.log --platform dgx-h100 --engine analytic -o " +
                       d / "cal.yaml");
  ASSERT_EQ(f.rc, 0) << f.text;
  EXPECT_NE(f.text.find("not explained by the fit: none"), std::string::npos) << f.text;
  const Output c = run(kCpsim + " collective --platform " + d / "cal.yaml" +
                       " --op allreduce --ranks 8 --sizes 1G");
  EXPECT_EQ(c.rc, 0) << c.text;
}

TEST(CalibrateNccl, BadLogsExitTwoNamingFileAndLine) {
  Dir d;
  const std::string good = kSamples + "/dgx-h100-nvls-off/all_reduce_perf.log";
  std::ifstream in(good);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write(d / "truncated.log", text.substr(0, text.find("# Out of bounds")));
  write(d / "binary.log", text.substr(0, 200) + "\xc3\x28\n" + text.substr(200));
  struct Case {
    std::string args, says;
  } cases[] = {
      {d / "truncated.log" + " --platform dgx-h100", "truncated.log:"},
      {d / "binary.log" + " --platform dgx-h100", "not UTF-8"},
      {kSamples + "/h100-cluster-4nodes/all_reduce_perf.log --platform dgx-h100",
       "32 ranks, but the platform dgx-h100 has 8 GPUs"},
      {d / "missing.log" + " --platform dgx-h100", "no such file"},
      {good + " --platform dgx-h100 --op allgather", "--op says allgather"},
      {good + " --platform dgx-h100 -o " + good, "would be overwritten"},
  };
  for (const auto& c : cases) {
    const Output o = run(kCpsim + " calibrate nccl " + c.args + " --engine analytic");
    EXPECT_EQ(o.rc, 2) << c.args << "\n" << o.text;
    EXPECT_NE(o.text.find(c.says), std::string::npos) << c.args << "\n" << o.text;
  }
  // The refused -o left the log as it was.
  std::ifstream again(good);
  const std::string after((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, text);
}

TEST(CalibrateKernels, ReadsEachFormatAndWritesAProfileWithProvenance) {
  Dir d;
  const std::string data = std::string(CPSIM_SOURCE_DIR) + "/tests/data/kernels";
  const Output o = run(kCpsim + " calibrate kernels " + data + "/benchmark_flash_attention.txt " + data +
                       "/plain.csv " + std::string(CPSIM_SOURCE_DIR) +
                       "/kernels/profiles/h200-cudnn-measured.csv --platform hgx-h200 -o " + d / "k.csv");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("median |error|"), std::string::npos) << o.text;
  std::ifstream in(d / "k.csv");
  std::string header, row;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("gpu,kernel,direction,q_len", 0), 0u);
  int rows = 0, fa = 0;
  while (std::getline(in, row)) {
    ++rows;
    if (row.find("benchmark_flash_attention.txt:2") != std::string::npos) ++fa;
  }
  EXPECT_EQ(fa, 2) << "the FlashAttention line's fwd and bwd, each naming its line";
  EXPECT_EQ(rows, 4 + 2 + 82);  // the zero "Pytorch" line is skipped
  // The written profile is a profile the cost model reads: a row's own shape prices exactly.
  const Output p = run(kCpsim + " kernels price --platform hgx-h200 --profile " + d / "k.csv" +
                       " --impl cudnn --direction fwd --q 16K --mask causal --heads 32 --kv-heads 8 "
                       "--head-dim 128");
  EXPECT_EQ(p.rc, 0) << p.text;
  EXPECT_NE(p.text.find("3415"), std::string::npos) << p.text;
  const Output bad = run(kCpsim + " calibrate kernels " + data + "/README.md --platform hgx-h200");
  EXPECT_EQ(bad.rc, 2) << bad.text;
  EXPECT_NE(bad.text.find("README.md:"), std::string::npos) << bad.text;
}

}  // namespace CPSIM_TEST_TU
