// The memory verdict (model/memory_verdict.hpp): a fit with under 5 % of HBM free is "tight",
// written once for run, memory and plan.
#include <gtest/gtest.h>

#include "model/memory_verdict.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::model;

TEST(MemoryVerdict, AFitWithUnderFivePercentHeadroomIsTight) {
  const double hbm = 85.9e9;  // an H100's 80 GiB
  EXPECT_EQ(memory_fit(85.9e9, hbm), MemoryFit::Tight);
  EXPECT_EQ(memory_fit(84.4e9, hbm), MemoryFit::Tight);
  EXPECT_EQ(memory_fit(0.951 * hbm, hbm), MemoryFit::Tight);
  EXPECT_EQ(memory_fit(0.949 * hbm, hbm), MemoryFit::Fits);
  EXPECT_EQ(memory_fit(67.7e9, hbm), MemoryFit::Fits);
  EXPECT_EQ(memory_fit(86.0e9, hbm), MemoryFit::Over);
  EXPECT_EQ(memory_verdict(85.9e9, hbm), "tight: 85.9 GB reserved of 85.9 GB per GPU (0.0 % headroom, under 5 %)");
  EXPECT_EQ(memory_verdict(84.4e9, hbm), "tight: 84.4 GB reserved of 85.9 GB per GPU (1.7 % headroom, under 5 %)");
  EXPECT_EQ(memory_verdict(67.7e9, hbm), "fits: 67.7 GB reserved of 85.9 GB per GPU");
  EXPECT_EQ(memory_verdict(106.7e9, hbm), "OOM: 106.7 GB reserved of 85.9 GB per GPU");
  EXPECT_STREQ(memory_fit_word(MemoryFit::Tight), "tight");
  EXPECT_STREQ(memory_fit_word(MemoryFit::Fits), "yes");
  EXPECT_STREQ(memory_fit_word(MemoryFit::Over), "NO");
}

}  // namespace CPSIM_TEST_TU
