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
};

}  // namespace cpsim::test
