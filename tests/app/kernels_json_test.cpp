// `cpsim kernels price` and `kernels gdn` write --json through support/safe_write.hpp like every
// other command: never over the file they read, never into a directory, and a whole file or none.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

namespace fs = std::filesystem;
using namespace cpsim::cli;

namespace {

class KernelsJson : public cpsim::test::TempDir {
 protected:
  /// A copy of the bundled DGX H100 platform, so a test may name it as an output.
  std::string platform() const {
    const fs::path p = dir_ / "h100.yaml";
    fs::copy_file(fs::path(CPSIM_SOURCE_DIR) / "platforms" / "dgx-h100.yaml", p,
                  fs::copy_options::overwrite_existing);
    return p.string();
  }
};

TEST_F(KernelsJson, JsonOverThePlatformItReadsIsRefusedAndTheFileKept) {
  const std::string p = platform();
  const std::string before = slurp(p);
  for (const char* cmd : {" kernels price --platform ", " kernels gdn --platform "}) {
    const Output o = run(kCpsim + cmd + p + " --json " + p);
    EXPECT_EQ(o.rc, 2) << cmd << o.text;
    EXPECT_NE(o.text.find("--json " + p + ": is the input --platform"), std::string::npos) << o.text;
    EXPECT_EQ(slurp(p), before) << cmd;
  }
}

TEST_F(KernelsJson, JsonIntoADirectoryIsRefusedBeforeAnyWork) {
  for (const char* cmd : {" kernels price --platform dgx-h100", " kernels gdn --platform dgx-h100"}) {
    const Output o = run(kCpsim + cmd + " --json " + dir_.string());
    EXPECT_EQ(o.rc, 2) << cmd << o.text;
    EXPECT_NE(o.text.find("cannot write there"), std::string::npos) << o.text;
    EXPECT_EQ(o.text.find(" us ("), std::string::npos) << "priced before refusing: " << o.text;
  }
}

TEST_F(KernelsJson, JsonReplacesAnOldFileWholeAndLeavesNoTemporary) {
  const fs::path out = dir_ / "k.json";
  write(out, "old contents that are not JSON");
  Output o = run(kCpsim + " kernels price --platform dgx-h100 --q 8K --json " + out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["gpu"], "H100-SXM");
  EXPECT_GT(j["time_s"].get<double>(), 0);
  o = run(kCpsim + " kernels gdn --platform dgx-h100 --seq-len 8K --json " + out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["part"], "whole");
  EXPECT_EQ(j["seq_len"], 8192);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // k.json alone: the temporary was renamed over it
}

// Each price names what set it, on the text line and in the JSON, per direction: a profile
// file, the tile model, or for FP8 attention which ratio (the GPU's own FP8 rows or H100's rule).
TEST_F(KernelsJson, PriceNamesItsOriginOnTheLineAndInTheJson) {
  const fs::path out = dir_ / "k.json";
  Output o = run(kCpsim + " kernels price --platform dgx-h100 --impl fa3 --q 8K --heads 32 --kv-heads 8 --json " +
                 out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("TFLOP/s (published: h100-fa3-published.csv)"), std::string::npos) << o.text;
  nlohmann::json j = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(j["origin"], "h100-fa3-published.csv");
  EXPECT_EQ(j["fwd"]["origin"], "h100-fa3-published.csv");
  o = run(kCpsim + " kernels price --platform gb200-nvl72 --impl cudnn --dtype fp8 --direction fwdbwd --q 16K "
                   "--heads 128 --kv-heads 16 --json " + out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("(derived+derived: FP8 at the FP8/BF16 ratio of gb200-cudnn-published.csv's FP8 and BF16 rows)"),
            std::string::npos) << o.text;
  j = nlohmann::json::parse(slurp(out));
  EXPECT_NE(j["bwd"]["origin"].get<std::string>().find("gb200-cudnn-published.csv's FP8"), std::string::npos);
  o = run(kCpsim + " kernels price --platform dgx-h100 --impl cudnn --dtype fp8 --q 8K --profile none --json " +
          out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  j = nlohmann::json::parse(slurp(out));
  EXPECT_NE(j["origin"].get<std::string>().find("H100 FP8/BF16 ratio"), std::string::npos) << j.dump();
}

}  // namespace

}  // namespace CPSIM_TEST_TU
