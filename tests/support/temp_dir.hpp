#pragma once
// The one temporary-directory fixture of the tests: a fresh directory per test, named after it
// (so parallel ctest runs never share one), removed when the test passes and kept for a look
// when it fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace cpsim::test {

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("cpsim-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
};

}  // namespace cpsim::test
