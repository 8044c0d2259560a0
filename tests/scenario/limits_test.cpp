// Limits instead of exhaustion: absurd sizes, deep or huge YAML, broken profile CSVs and
// NaN / inf end in a clear error (the exact message), never in a crash, a hang or a simulator
// that runs out of memory. The fuzz targets (fuzz/) search for the cases this file misses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "model/cost_model.hpp"
#include "scenario/load.hpp"
#include "support/scenario_error.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using scenario::InputError;

namespace {

namespace fs = std::filesystem;


const std::string kHead = "platform: dgx-h100\nmodel: qwen3.8-27b\n";
const std::string kTail = "training: {seq_len: 128K}\n";

/// A file in this test's own temporary directory.
fs::path temp_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::path(testing::TempDir()) / "cpsim-limits";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::string file_err(const fs::path& path) {
  try {
    scenario::load_scenario(path.string());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

scenario::GpuSpec h100() { return {"H100-SXM", 989e12, 800e12, 3.35e12, 80e9}; }

const std::string kProfileHeader =
    "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,dtype,time_us,tflops,"
    "source,commit\n";
const std::string kProfileRow = "H100-SXM,fa3,fwd,4096,4096,full,1,32,8,128,bf16,";

/// The error of loading the profile CSV at `path`.
std::string profile_err(const std::string& path) {
  try {
    model::CostModel::from_profile(path, h100());
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

/// `csv` written to a file of its own; returns the path.
std::string profile(const std::string& name, const std::string& csv) { return temp_file(name, csv).string(); }

}  // namespace

// ---- Absurd sizes ----------------------------------------------------------------------------

TEST(Limits, BillionGpusInAPlatform) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: dgx-h100, nodes: 1000000000}\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:37: error: platform.nodes: must be <= 1000000, got 1000000000\n"
            "  platform: {preset: dgx-h100, nodes: 1000000000}\n"
            "                                      ^");
}

TEST(Limits, BillionGpusInTheLayout) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "parallel: {dp: 1000000000}\n"),
            "s.yaml:4:16: error: parallel.dp: must be <= 1000000, got 1000000000\n"
            "  parallel: {dp: 1000000000}\n"
            "                 ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "parallel: {tp: 1000, cp: 1000, pp: 1000}\n"),
            "s.yaml:4:1: error: parallel: tp*cp*pp*dp = 1000*1000*1000*1 exceeds the limit of 1000000 GPUs\n"
            "  parallel: {tp: 1000, cp: 1000, pp: 1000}\n"
            "  ^");
}

TEST(Limits, TrillionTokensInOneDocument) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 1000000000000}\n"),
            "s.yaml:3:21: error: training.seq_len: seq_len 1000000000000 as one document holds 5e+23 causal "
            "pairs, more than the 2^63 - 1 the simulator counts (at most 4294967295 tokens); pack shorter "
            "documents with training.documents\n"
            "  training: {seq_len: 1000000000000}\n"
            "                      ^");
  // 2^32 - 1 tokens is the longest document whose pairs fit.
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 4294967295}\n"), "(no error)");
}

TEST(Limits, TrillionTokensInRandomDocuments) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training:\n  seq_len: 1000000000000\n  documents: {distribution: uniform, mean: 1}\n"),
            "s.yaml:5:44: error: training.documents.mean: seq_len 1000000000000 / mean 1 = 1000000000000 "
            "documents exceed the limit of 1000000; raise the mean\n"
            "    documents: {distribution: uniform, mean: 1}\n"
            "                                             ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training:\n  seq_len: 1000000000000\n  documents: {distribution: lognormal, mean: 1G}\n"),
            "s.yaml:5:46: error: training.documents.mean: documents of mean 1073741824 over seq_len 1000000000000 "
            "may hold up to 1.07e+21 causal pairs, more than the 2^63 - 1 the simulator counts; lower the mean\n"
            "    documents: {distribution: lognormal, mean: 1G}\n"
            "                                               ^");
}

TEST(Limits, TrillionTokensInListedDocuments) {
  // 256 documents of 4G - 2 tokens each: about 2^71 pairs.
  std::string docs;
  for (int i = 0; i < 256; ++i) docs += std::string(i ? ", " : "") + "4294967294";
  const std::string msg = cpsim::test::scenario_error(kHead + "training:\n  seq_len: 1099511627264\n  documents: [" + docs + "]\n");
  EXPECT_EQ(msg.substr(0, msg.find('\n')),
            "s.yaml:5:14: error: training.documents: the documents hold 2.36e+21 causal pairs, more than the "
            "2^63 - 1 the simulator counts; use shorter documents");
}

TEST(Limits, TrillionTokensAsTheSequence) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 1000000000000000}\n"),
            "s.yaml:3:21: error: training.seq_len: seq_len 1000000000000000 exceeds the limit of 2^40 tokens\n"
            "  training: {seq_len: 1000000000000000}\n"
            "                      ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K, micro_batches: 1000000000000}\n"),
            "s.yaml:3:42: error: training.micro_batches: must be <= 1000000000, got 1000000000000\n"
            "  training: {seq_len: 128K, micro_batches: 1000000000000}\n"
            "                                           ^");
}

TEST(Limits, MillionsOfLinks) {
  // Topology builds every link: 64 nodes x 8 rails x 2 leaves x 1,000,000 spines would not fit.
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: h100-cluster, nodes: 64, network: {spines: 1000000}}\nmodel: qwen3.8-27b\n" +
                kTail),
            "s.yaml:1:63: error: platform.network.spines: the platform would have 32002048 links (GPU 1024, PCIe 0, "
            "NIC 1024, leaf-spine 32000000), more than the limit of 16000000\n"
            "  platform: {preset: h100-cluster, nodes: 64, network: {spines: 1000000}}\n"
            "                                                                ^");
  // One PCIe node of 1,000,000 GPUs, one per switch and per CPU: a CPU mesh of 10^12 links.
  const std::string pcie = "platform: {preset: l40s-pcie, gpus_per_node: 1000000, "
                           "intra: {gpus_per_pcie_switch: 1, pcie_switches_per_cpu: 1}}";
  EXPECT_EQ(cpsim::test::scenario_error(pcie + "\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:46: error: platform.gpus_per_node: the platform would have 1000003000000 links (GPU 2000000, "
            "PCIe 1000001000000, NIC 0, leaf-spine 0), more than the limit of 16000000\n  " + pcie + "\n  " +
                std::string(45, ' ') + "^");
  // The largest cluster allowed, 125,000 DGX nodes, has about 4.5 M links.
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: h100-cluster, nodes: 125000}\nmodel: qwen3.8-27b\n" + kTail), "(no error)");
}

TEST(Limits, NegativeBandwidth) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: dgx-h100, intra: {nvlink: {bw: -450GBps}}}\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:51: error: platform.intra.nvlink.bw: negative value '-450GBps' is not allowed\n"
            "  platform: {preset: dgx-h100, intra: {nvlink: {bw: -450GBps}}}\n"
            "                                                    ^");
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: dgx-h100, gpu: {hbm_bw: -3.35TBps}}\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:44: error: platform.gpu.hbm_bw: negative value '-3.35TBps' is not allowed\n"
            "  platform: {preset: dgx-h100, gpu: {hbm_bw: -3.35TBps}}\n"
            "                                             ^");
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: dgx-h100, intra: {nvlink: {bw: 0GBps}}}\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:51: error: platform.intra.nvlink.bw: must be > 0, got 0GBps\n"
            "  platform: {preset: dgx-h100, intra: {nvlink: {bw: 0GBps}}}\n"
            "                                                    ^");
}

TEST(Limits, DegreeLargerThanTheGpuCount) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "parallel: {cp: 16}\n"),
            "s.yaml:4:1: error: parallel: tp*cp*pp*dp = 1*16*1*1 = 16 GPUs, but platform 'dgx-h100' has 8 GPUs "
            "(nodes 1 x gpus_per_node 8)\n"
            "  parallel: {cp: 16}\n"
            "  ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "parallel: {cp: 8, attention: {scheme: usp, ulysses_degree: 16}}\n"),
            "s.yaml:4:60: error: parallel.attention.ulysses_degree: ulysses_degree 16 does not divide parallel.cp = 8\n"
            "  parallel: {cp: 8, attention: {scheme: usp, ulysses_degree: 16}}\n"
            "                                                             ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "parallel: {cp: 8, attention: {scheme: double-ring, inner_ring: 16}}\n"),
            "s.yaml:4:64: error: parallel.attention.inner_ring: inner_ring 16 does not divide parallel.cp = 8\n"
            "  parallel: {cp: 8, attention: {scheme: double-ring, inner_ring: 16}}\n"
            "                                                                 ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "parallel: {cp: 8}\nperturb: {slow_gpus: {8: 1.5}}\n"),
            "s.yaml:5:23: error: perturb.slow_gpus.8: GPU rank 8 is outside the 8 GPUs of parallel.tp*cp*pp*dp\n"
            "  perturb: {slow_gpus: {8: 1.5}}\n"
            "                        ^");
}

// ---- Deep and huge YAML ----------------------------------------------------------------------

TEST(Limits, DeeplyNestedYaml) {
  const std::string deep = "name: " + std::string(100, '[') + std::string(100, ']') + "\n";
  EXPECT_EQ(cpsim::test::scenario_error(deep),
            "s.yaml:1:70: error: nesting deeper than 64 levels\n"
            "  ..." + deep.substr(9, 120) + "...\n"  // 120 of the line's 206 characters
            "  " + std::string(3 + 60, ' ') + "^");
}

TEST(Limits, HundredThousandLevelsOfNesting) {
  // yaml-cpp gives up at 2,000 levels with "bad file"; the message names the first level too
  // deep, as for 100 levels, and nothing recurses 100,000 frames deep.
  const size_t n = 100'000;
  auto repeat = [&](const std::string& s) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += s;
    return out;
  };
  // Flow lists, flow mappings (the position of level 65 is known), block lists on one line.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"name: x\nmodel: " + repeat("[") + "1" + repeat("]") + "\n", "s.yaml:2:71: "},
      {"name: x\nmodel: " + repeat("{a: ") + "1" + repeat("}") + "\n", "s.yaml:2:"},
      {repeat("- ") + "1\n", "s.yaml:1:"}};
  for (const auto& [deep, where] : cases) {
    const std::string msg = cpsim::test::scenario_error(deep);
    EXPECT_TRUE(msg.starts_with(where)) << msg.substr(0, 300);
    EXPECT_NE(msg.find(": error: nesting deeper than 64 levels\n"), std::string::npos) << msg.substr(0, 300);
    EXPECT_EQ(msg.find("bad file"), std::string::npos);
    EXPECT_LT(msg.size(), 600u);  // the 100,000-level line is quoted as an excerpt
  }
}

TEST(Limits, ErrorOnATenMegabyteLineQuotesAnExcerpt) {
  // A flow mapping padded with 10 MB of spaces before an unknown key: the message quotes about
  // 120 characters around the key, "..." where it cuts, and the caret is under the key.
#ifdef CPSIM_SANITIZED
  const size_t pad = 1'000'000;  // the same path at a tenth of yaml-cpp's scanning under ASan
#else
  const size_t pad = 10'000'000;
#endif
  const std::string line =
      "training: {seq_len: 128K," + std::string(pad, ' ') + "bogus: 1," + std::string(100, ' ') + "micro_batches: 1}";
  const std::string msg = cpsim::test::scenario_error(kHead + line + "\n");
  const size_t col = line.find("bogus") + 1;
  const std::string head = "s.yaml:3:" + std::to_string(col) + ": error: training.bogus: unknown key";
  ASSERT_TRUE(msg.starts_with(head)) << msg.substr(0, 300);
  const size_t nl = msg.find('\n');
  const std::string quoted = msg.substr(nl + 1, msg.find('\n', nl + 1) - nl - 1);
  const std::string caret = msg.substr(msg.rfind('\n') + 1);
  EXPECT_EQ(quoted, "  ..." + std::string(60, ' ') + "bogus: 1," + std::string(51, ' ') + "...") << quoted;
  EXPECT_EQ(caret, std::string(2 + 3 + 60, ' ') + "^");
  EXPECT_EQ(quoted.substr(caret.size() - 1, 5), "bogus");
  EXPECT_LT(msg.size(), 1000u);
  // The start of a long line: no "..." before; a long value in the message is cut too.
  const std::string value = "model: " + std::string(10'000'000, 'q') + "\n";
  const std::string m2 = cpsim::test::scenario_error("platform: dgx-h100\n" + value + kTail);
  EXPECT_TRUE(m2.starts_with("s.yaml:2:8: error: model: ")) << m2.substr(0, 300);
  EXPECT_NE(m2.find("\n  model: qqq"), std::string::npos) << m2.substr(0, 300);
  EXPECT_NE(m2.find("qqq...\n         ^"), std::string::npos) << m2.substr(0, 2000);
  EXPECT_LT(m2.size(), 2000u) << m2.substr(0, 300);
}

TEST(Limits, HugeYamlFile) {
  const fs::path p = temp_file("huge.yaml", "name: x\n# " + std::string(17 << 20, 'x') + "\n");
  EXPECT_EQ(file_err(p), p.string() + ": error: cannot read scenario file: larger than 16 MiB");
}

TEST(Limits, HugeYamlDocument) {
  // 2 MB of text, a million values: the error points at the 1,000,001st node (the mapping,
  // its key and the list count too).
  std::string text = "name: [";
  for (int i = 0; i < 1'000'000; ++i) text += i ? ",1" : "1";
  text += "]\n";
  const std::string msg = cpsim::test::scenario_error(text);
  EXPECT_EQ(msg.substr(0, msg.find('\n')),
            "s.yaml:1:2000002: error: the document expands to more than 1000000 values (aliases?)");
}

TEST(Limits, ADeviceIsNotReadForever) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: /dev/zero\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:11: error: platform: cannot read platform file '/dev/zero': it is a character device; a "
            "regular file is required\n"
            "  platform: /dev/zero\n"
            "            ^");
}

// ---- Profiles with missing columns or non-numeric cells ---------------------------------------

TEST(Limits, ProfileMissingColumn) {
  const std::string header = "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,"
                             "dtype,tflops,source,commit";
  const std::string path = profile("missing-column.csv", header + "\n");
  EXPECT_EQ(profile_err(path),
            path + ":1:1: error: cost.profile: the header has no column 'time_us'\n  " + header + "\n  ^");
}

TEST(Limits, ProfileShortRow) {
  const std::string row = "H100-SXM,fa3,fwd,4096";
  const std::string path = profile("short-row.csv", kProfileHeader + row + "\n");
  EXPECT_EQ(profile_err(path),
            path + ":2:22: error: cost.profile: row has 4 columns, the header 15\n  " + row + "\n  " +
                std::string(21, ' ') + "^");
}

TEST(Limits, ProfileNonNumericCell) {
  const std::string row = kProfileRow + "fast,600,published,x";
  const std::string path = profile("non-numeric.csv", kProfileHeader + row + "\n");
  EXPECT_EQ(profile_err(path),
            path + ":2:49: error: cost.profile: column 'time_us': 'fast' is not a positive number\n  " + row +
                "\n  " + std::string(48, ' ') + "^");
}

TEST(Limits, ProfileTimeUnderflow) {
  // 1e-320 us is positive, but 1e-326 s is 0 in a double.
  const std::string row = kProfileRow + "1e-320,600,published,x";
  const std::string path = profile("underflow.csv", kProfileHeader + row + "\n");
  EXPECT_EQ(profile_err(path),
            path + ":2:49: error: cost.profile: column 'time_us': '1e-320' is not a positive number\n  " + row +
                "\n  " + std::string(48, ' ') + "^");
}

TEST(Limits, ProfileEmpty) {
  const std::string empty = profile("empty.csv", "");
  EXPECT_EQ(profile_err(empty), empty + ": error: cost.profile: empty profile (no header line)");
  const std::string header_only = profile("header-only.csv", kProfileHeader);
  EXPECT_EQ(profile_err(header_only), header_only + ": error: cost.profile: the profile has no rows");
}

TEST(Limits, ProfileAbsurdShape) {
  const std::string row = "H100-SXM,fa3,fwd,1e300,4096,full,1,32,8,128,bf16,100,600,published,x";
  const std::string path = profile("absurd-shape.csv", kProfileHeader + row + "\n");
  EXPECT_EQ(profile_err(path),
            path + ":2:18: error: cost.profile: column 'q_len': '1e300' is not a whole number from 1 to "
                   "1099511627776\n  " + row + "\n  " + std::string(17, ' ') + "^");
}

// ---- NaN and inf -----------------------------------------------------------------------------

TEST(Limits, NanAndInfInNumbers) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "perturb: {jitter_cv: .nan}\n"),
            "s.yaml:4:22: error: perturb.jitter_cv: expected a number, got '.nan'\n"
            "  perturb: {jitter_cv: .nan}\n"
            "                       ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "perturb: {interference: nan}\n"),
            "s.yaml:4:25: error: perturb.interference: expected a number, got 'nan'\n"
            "  perturb: {interference: nan}\n"
            "                          ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "perturb: {gpu_variation_cv: 1e999}\n"),
            "s.yaml:4:29: error: perturb.gpu_variation_cv: number '1e999' is out of range\n"
            "  perturb: {gpu_variation_cv: 1e999}\n"
            "                              ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + kTail + "parallel: {cp: .inf}\n"),
            "s.yaml:4:16: error: parallel.cp: expected an integer, got '.inf'\n"
            "  parallel: {cp: .inf}\n"
            "                 ^");
}

TEST(Limits, NanAndInfInUnits) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: dgx-h100, gpu: {peak_flops: inf}}\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:48: error: platform.gpu.peak_flops: expected a FLOP rate such as 989TFLOPS or 989e12, got "
            "'inf'\n"
            "  platform: {preset: dgx-h100, gpu: {peak_flops: inf}}\n"
            "                                                 ^");
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: dgx-h100, intra: {nvlink: {bw: 1e400GBps}}}\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:51: error: platform.intra.nvlink.bw: '1e400GBps' is out of range\n"
            "  platform: {preset: dgx-h100, intra: {nvlink: {bw: 1e400GBps}}}\n"
            "                                                    ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: NaN}\n"),
            "s.yaml:3:21: error: training.seq_len: expected a token count such as 128K, 1M or 32768, got 'NaN'\n"
            "  training: {seq_len: NaN}\n"
            "                      ^");
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: dgx-h100, intra: {nvlink: {latency: -.inf}}}\nmodel: qwen3.8-27b\n" + kTail),
            "s.yaml:1:56: error: platform.intra.nvlink.latency: expected a time such as 1.5us, 150ns or 3ms, got "
            "'-.inf'\n"
            "  platform: {preset: dgx-h100, intra: {nvlink: {latency: -.inf}}}\n"
            "                                                         ^");
}

TEST(Limits, NanAndInfInProfiles) {
  const std::string nan_row = kProfileRow + "nan,600,published,x";
  const std::string nan_path = profile("nan.csv", kProfileHeader + nan_row + "\n");
  EXPECT_EQ(profile_err(nan_path),
            nan_path + ":2:49: error: cost.profile: column 'time_us': 'nan' is not a positive number\n  " + nan_row +
                "\n  " + std::string(48, ' ') + "^");
  const std::string inf_row = "H100-SXM,fa3,fwd,4096,4096,full,inf,32,8,128,bf16,100,600,published,x";
  const std::string inf_path = profile("inf.csv", kProfileHeader + inf_row + "\n");
  EXPECT_EQ(profile_err(inf_path),
            inf_path + ":2:33: error: cost.profile: column 'unmasked_fraction': 'inf' is not a positive number\n  " +
                inf_row + "\n  " + std::string(32, ' ') + "^");
}

}  // namespace CPSIM_TEST_TU
