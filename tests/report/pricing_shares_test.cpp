// The summary's "kernel costs from" line: one entry per op kind, each source that priced the
// kind with its share of the kind's nominal kernel time, largest first.
#include <gtest/gtest.h>

#include "report/output.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::report::pricing_shares;

TEST(PricingShares, OneEntryPerKindWithTimeSharesLargestFirst) {
  const std::map<std::string, std::map<std::string, double>> t = {
      {"attention", {{"derived (h100-cudnn-published.csv)", 1.0}, {"published (h100-cudnn-published.csv)", 3.0}}},
      {"gemm", {{"published (cuBLAS tile/wave model)", 2.0}}},
      {"memory", {{"measured (h200-membound-measured.csv rates)", 0.999}, {"roofline (x)", 0.001}}},
  };
  EXPECT_EQ(pricing_shares(t),
            "attention: published (h100-cudnn-published.csv) 75 %, derived (h100-cudnn-published.csv) 25 %; "
            "gemm: published (cuBLAS tile/wave model) 100 %; "
            "memory: measured (h200-membound-measured.csv rates) 100 %, roofline (x) <1 %");
}

TEST(PricingShares, EqualSharesInNameOrderAndEmptyMapEmptyText) {
  EXPECT_EQ(pricing_shares({{"gemm", {{"b", 1.0}, {"a", 1.0}}}}), "gemm: a 50 %, b 50 %");
  EXPECT_EQ(pricing_shares({}), "");
  // A kind whose ops all cost nothing (a free test cost model) still says which source priced it.
  EXPECT_EQ(pricing_shares({{"memory", {{"measured", 0.0}}}}), "memory: measured 0 %");
}

}  // namespace CPSIM_TEST_TU
