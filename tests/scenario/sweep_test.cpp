// Sweep files: cartesian axes, zipped groups, stable ids, errors pointing into the sweep file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "scenario/load.hpp"
#include "scenario/sweep.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;

namespace {

const std::string kData = std::string(CPSIM_SOURCE_DIR) + "/tests/scenario/data/";

/// Writes a sweep into a fresh temporary directory; `base: X.yaml` there names the test data.
std::string write_sweep(const std::string& name, std::string text) {
  const auto dir = std::filesystem::temp_directory_path() / ("cpsim-sweep-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* base : {"minimal.yaml"}) {
    const std::string from = std::string("base: ") + base, to = "base: " + kData + base;
    if (text.rfind(from, 0) == 0) text = to + text.substr(from.size());
  }
  const std::string path = (dir / (name + ".yaml")).string();
  std::ofstream(path) << text;
  return path;
}

/// Removes a sweep written by write_sweep, with its directory.
void cleanup(const std::string& path) {
  const auto dir = std::filesystem::path(path).parent_path();
  if (dir.filename().string().rfind("cpsim-sweep-test-", 0) == 0) std::filesystem::remove_all(dir);
}

std::string sweep_err(const std::string& path) {
  std::string what = "(no error)";
  try {
    load_sweep(path);
  } catch (const InputError& e) {
    what = e.what();
  }
  cleanup(path);
  return what;
}

}  // namespace

TEST(Sweep, CartesianAndZip) {
  const Sweep s = load_sweep_file(kData + "sweep-basic.yaml");
  EXPECT_EQ(s.name, "cp-and-scheme");
  // axes: 2 schemes x 2 layouts, zip: 3 (seq_len, cp) pairs -> 12 points
  ASSERT_EQ(s.points.size(), 12u);
  EXPECT_EQ(s.points[0].id, "0000");
  EXPECT_EQ(s.points[11].id, "0011");
  EXPECT_EQ(s.points[0].base_path, kData + "sweep-base.yaml");
  EXPECT_EQ(s.points[0].overrides,
            (std::vector<std::string>{"parallel.attention.scheme=ring", "parallel.attention.layout=zigzag",
                                      "training.seq_len=32K", "parallel.cp=2", "training.documents=[32K]"}));
  // The last dimension varies fastest; the first slowest.
  EXPECT_EQ(s.points[1].overrides[2], "training.seq_len=64K");
  EXPECT_EQ(s.points[1].overrides[3], "parallel.cp=4");
  EXPECT_EQ(s.points[3].overrides[1], "parallel.attention.layout=contiguous");
  EXPECT_EQ(s.points[6].overrides[0], "parallel.attention.scheme=allgather");
  EXPECT_EQ(s.points[11].values,
            (std::vector<std::pair<std::string, std::string>>{{"parallel.attention.scheme", "allgather"},
                                                              {"parallel.attention.layout", "contiguous"},
                                                              {"training.seq_len", "128K"},
                                                              {"parallel.cp", "8"},
                                                              {"training.documents", "[128K]"}}));
  // Every point loads.
  for (const auto& p : s.points) {
    SCOPED_TRACE(p.id);
    const Scenario sc = load_scenario(p.base_path, p.overrides);
    EXPECT_EQ(sc.training.seq_len, sc.training.documents.front());
  }
  EXPECT_EQ(load_sweep(kData + "sweep-basic.yaml").size(), 12u);
}

TEST(Sweep, NoAxesIsTheBase) {
  const std::string path = write_sweep("noaxes", "base: minimal.yaml\n");
  const auto points = load_sweep(path);
  cleanup(path);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_TRUE(points[0].overrides.empty());
}

TEST(Sweep, PresetsAndRelativeFiles) {
  const auto points = load_sweep(kData + "sweep-platforms.yaml");
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0].overrides[0], "platform=dgx-h100");
  // A relative file in a sweep is relative to the sweep file, so it is made absolute.
  EXPECT_EQ(points[2].overrides[0], "platform=" + kData + "custom-platform.yaml");
  EXPECT_EQ(load_scenario(points[2].base_path, points[2].overrides).platform.name, "custom-h100");
}

TEST(Sweep, BaseMayLeaveAKeyToTheSweep) {
  // The base has no model; the sweep supplies it, and each value is checked with the others.
  const auto points = load_sweep(kData + "sweep-models.yaml");
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(load_scenario(points[3].base_path, points[3].overrides).model.name, "llama3-70b");
}

TEST(Sweep, InfeasiblePointsAreLeftToEachPoint) {
  // cp 16 does not fit dgx-h100: the sweep still expands; that point fails when loaded.
  const std::string path = write_sweep("infeasible", "base: minimal.yaml\naxes:\n  parallel.cp: [8, 16]\n");
  const auto points = load_sweep(path);
  cleanup(path);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_NO_THROW(load_scenario(points[0].base_path, points[0].overrides));
  EXPECT_THROW(load_scenario(points[1].base_path, points[1].overrides), InputError);
}

TEST(Sweep, IdsWidenPast9999) {
  const std::string path = write_sweep("wide", "base: minimal.yaml\naxes:\n"
                                               "  simulation.seed: [1,2,3,4,5,6,7,8,9,10]\n"
                                               "  perturb.jitter_cv: [0,1,2,3,4,5,6,7,8,9]\n"
                                               "  training.micro_batches: [1,2,3,4,5,6,7,8,9,10]\n"
                                               "  parallel.dp_bucket: [1MB, 2MB, 3MB, 4MB, 5MB, 6MB, 7MB, 8MB, 9MB, 10MB, 11MB]\n");
  const auto points = load_sweep(path);
  cleanup(path);
  ASSERT_EQ(points.size(), 11000u);
  EXPECT_EQ(points.front().id, "00000");
  EXPECT_EQ(points.back().id, "10999");
}

TEST(Sweep, UnknownKeyPointsIntoTheSweep) {
  const std::string path = write_sweep("badkey", "base: minimal.yaml\naxes:\n  parallel.cpp: [2, 4]\n");
  EXPECT_EQ(sweep_err(path), path + ":3:12: error: parallel.cpp: unknown key 'cpp' (did you mean 'cp'?)\n"
                                    "    parallel.cpp: [2, 4]\n"
                                    "             ^");
}

TEST(Sweep, BadValuePointsIntoTheSweep) {
  const std::string path = write_sweep("badvalue", "base: minimal.yaml\naxes:\n  parallel.cp: [2, four]\n");
  EXPECT_EQ(sweep_err(path), path + ":3:20: error: parallel.cp: expected an integer, got 'four'\n"
                                    "    parallel.cp: [2, four]\n"
                                    "                     ^");
}

TEST(Sweep, UnknownPresetPointsIntoTheSweep) {
  const std::string path = write_sweep("badpreset", "base: minimal.yaml\naxes:\n  model: [llama3-8b, llama9]\n");
  EXPECT_EQ(sweep_err(path), path + ":3:22: error: model: unknown model preset 'llama9'; known: deepseek-v3, glm-4.5-air, llama2-7b, "
                                    "llama3-405b, llama3-70b, llama3-8b, mixtral-8x7b, qwen3-30b-a3b, qwen3.8-27b (searched " +
                                    data_dir() + "/scenarios/models/)\n"
                                    "    model: [llama3-8b, llama9]\n"
                                    "                       ^");
}

TEST(Sweep, ZipListsMustMatch) {
  const std::string path = write_sweep("zip", "base: minimal.yaml\nzip:\n"
                                              "  - training.seq_len: [32K, 64K]\n"
                                              "    parallel.cp: [2, 4, 8]\n");
  EXPECT_EQ(sweep_err(path), path + ":4:18: error: zip[0].parallel.cp: has 3 values but 'training.seq_len' "
                                    "has 2; lists in one zip group vary together and need equal lengths\n"
                                    "      parallel.cp: [2, 4, 8]\n"
                                    "                   ^");
}

TEST(Sweep, AxisNeedsAList) {
  const std::string path = write_sweep("scalar", "base: minimal.yaml\naxes:\n  parallel.cp: 8\n");
  EXPECT_EQ(sweep_err(path), path + ":3:16: error: axes.parallel.cp: expected a list of values, got '8'\n"
                                    "    parallel.cp: 8\n"
                                    "                 ^");
}

TEST(Sweep, EmptyAxis) {
  const std::string path = write_sweep("empty", "base: minimal.yaml\naxes:\n  parallel.cp: []\n");
  EXPECT_EQ(sweep_err(path), path + ":3:16: error: axes.parallel.cp: expected at least one value\n"
                                    "    parallel.cp: []\n"
                                    "                 ^");
}

TEST(Sweep, KeyVariedTwice) {
  const std::string path = write_sweep("twice", "base: minimal.yaml\naxes:\n  parallel.cp: [1, 2]\nzip:\n"
                                                "  - {parallel.cp: [4, 8]}\n");
  EXPECT_EQ(sweep_err(path), path + ":5:6: error: zip[0].parallel.cp: key 'parallel.cp' is already varied "
                                    "(line 3)\n"
                                    "    - {parallel.cp: [4, 8]}\n"
                                    "       ^");
}

TEST(Sweep, TooManyPoints) {
  const std::string list = "[0,1,2,3,4,5,6,7,8,9]";
  const std::string path =
      write_sweep("huge", "base: minimal.yaml\naxes:\n  simulation.seed: " + list + "\n  perturb.jitter_cv: " + list +
                              "\n  training.micro_batches: [1,2,3,4,5,6,7,8,9,10]\n  parallel.zero_stage: [0,1,2,3]\n"
                              "  perturb.gpu_variation_cv: " + list + "\n  parallel.dp_bucket: [1MB,2MB,3MB,4MB,5MB,6MB,7MB,8MB,9MB,10MB,11MB,12MB,13MB,14MB,15MB,16MB,17MB,18MB,19MB,20MB,21MB,22MB,23MB,24MB,25MB,26MB]\n");
  EXPECT_EQ(sweep_err(path), path + ":8:3: error: axes.parallel.dp_bucket: the sweep expands to more than 1000000 "
                                    "points\n"
                                    "    parallel.dp_bucket: [1MB,2MB,3MB,4MB,5MB,6MB,7MB,8MB,9MB,10MB,11MB,12MB,"
                                    "13MB,14MB,15MB,16MB,17MB,18MB,19MB,20MB,21MB,2...\n"  // 120 bytes of the line
                                    "    ^");
}

TEST(Sweep, MissingBase) {
  const std::string path = write_sweep("nobase", "base: no-such.yaml\n");
  const std::string dir = std::filesystem::path(path).parent_path().string();
  EXPECT_EQ(sweep_err(path), path + ":1:7: error: base: cannot read base scenario file '" + dir +
                                    "/no-such.yaml': No such file or directory\n"
                                    "  base: no-such.yaml\n"
                                    "        ^");
}

TEST(Sweep, UnknownTopLevelKey) {
  const std::string path = write_sweep("topkey", "base: minimal.yaml\naxis:\n  parallel.cp: [2]\n");
  EXPECT_EQ(sweep_err(path), path + ":2:1: error: axis: unknown key 'axis' (did you mean 'axes'?)\n"
                                    "  axis:\n"
                                    "  ^");
}

TEST(Sweep, MissingSweepFile) {
  EXPECT_EQ(sweep_err(kData + "no-such-sweep.yaml"),
            kData + "no-such-sweep.yaml: error: cannot read sweep file: No such file or directory");
}

}  // namespace CPSIM_TEST_TU
