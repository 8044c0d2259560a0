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

}  // namespace

}  // namespace CPSIM_TEST_TU
