#pragma once
// The fixture of the tests that run the built binary (tests/app): a TempDir (temp_dir.hpp) that
// first checks the binary was built, with the paths of the files a test writes there and their
// JSON.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace cpsim::test {

class CliDir : public TempDir {
 protected:
  void SetUp() override {
    TempDir::SetUp();
    ASSERT_TRUE(std::filesystem::exists(cli::kCpsim)) << "build the cpsim binary first: " << cli::kCpsim;
  }
  /// The path of file `name` in the test's directory.
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  /// File `name` of the test's directory, parsed as JSON.
  nlohmann::json load(const std::string& name) const { return nlohmann::json::parse(cli::slurp(dir_ / name)); }
  /// `CMD --json FILE`, FILE a new file of the test's directory, expected to succeed: its
  /// result JSON (null when it wrote none); `out`, if given, gets what the command printed.
  nlohmann::json run_json(const std::string& cmd, cli::Output* out = nullptr) {
    const std::string file = "r" + std::to_string(results_++) + ".json";
    const std::string line = cmd + " --json " + p(file);
    const cli::Output o = cli::run(line);
    if (out) *out = o;
    EXPECT_EQ(o.rc, 0) << line << "\n" << o.text;
    if (!std::filesystem::exists(dir_ / file)) return nlohmann::json();
    return load(file);
  }

 private:
  int results_ = 0;
};

}  // namespace cpsim::test
