// assign_ahead fills what it is asked to while another core faults the second half in
// (TouchAhead): that core must never write over what the caller has written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "support/touch_ahead.hpp"
#include "support/zeroed_alloc.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using ZeroedArray = std::vector<double, support::ZeroedAlloc<double>>;  // as the trace's times

TEST(TouchAhead, AssignAheadFillsEveryElementAboveTheTouchAheadSize) {
  const size_t n = support::TouchAhead::kMinBytes / sizeof(uint32_t) * 3 + 17;  // ~96 MB
  std::vector<uint32_t> v{1, 2, 3};
  support::assign_ahead<uint32_t>(v, n, 7u);
  ASSERT_EQ(v.size(), n);
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](uint32_t x) { return x == 7u; }));
  support::assign_ahead<uint32_t>(v, 5, 9u);  // and below it, on one core
  EXPECT_EQ(v, std::vector<uint32_t>(5, 9u));
}

TEST(TouchAhead, TouchAheadKeepsWhatTheCallerWroteMeanwhile) {
  const size_t n = support::TouchAhead::kMinBytes / sizeof(uint64_t) * 2;
  std::vector<uint64_t> v;
  v.reserve(n);
  {
    const support::TouchAhead ahead({{v.data(), n * sizeof(uint64_t)}});
    for (size_t i = 0; i < n; ++i) v.push_back(i * 2654435761u);  // written while it faults
  }
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], i * 2654435761u) << i;
  EXPECT_EQ(v.back(), (n - 1) * 2654435761u);
}

// Arrays of ZeroedAlloc (the trace's times) read as zeros however large, without a write, and a
// TouchAhead faulting them in meanwhile keeps every value the caller writes.
TEST(TouchAhead, TimeArraysAreZerosAndTouchAheadKeepsTheirWrites) {
  for (const size_t n : {size_t{0}, size_t{5}, support::TouchAhead::kMinBytes / sizeof(double) * 3 + 11}) {
    ZeroedArray a(n), b(n);
    ASSERT_EQ(a.size(), n);
    EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](double x) { return x == 0.0; })) << n;
    {
      const support::TouchAhead warm({{a.data(), n * sizeof(double)}, {b.data(), n * sizeof(double)}});
      for (size_t i = 0; i < n; i += 7) {  // written while it faults, in a few places at once
        a[i] = static_cast<double>(i) + 0.5;
        b[n - 1 - i] = -static_cast<double>(i);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(a[i], i % 7 == 0 ? static_cast<double>(i) + 0.5 : 0.0) << i;
      ASSERT_EQ(b[n - 1 - i], i % 7 == 0 ? -static_cast<double>(i) : 0.0) << i;
    }
  }
  ZeroedArray c{1.0, 2.0};  // values given are written as given
  EXPECT_EQ(c[1], 2.0);
}

}  // namespace CPSIM_TEST_TU
