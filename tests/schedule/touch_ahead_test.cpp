// assign_ahead fills what it is asked to while another core faults the second half in
// (TouchAhead): that core must never write over what the caller has written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "schedule/touch_ahead.hpp"
#include "schedule/trace.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

TEST(TouchAhead, AssignAheadFillsEveryElementAboveTheTouchAheadSize) {
  const size_t n = schedule::TouchAhead::kMinBytes / sizeof(uint32_t) * 3 + 17;  // ~96 MB
  std::vector<uint32_t> v{1, 2, 3};
  schedule::assign_ahead<uint32_t>(v, n, 7u);
  ASSERT_EQ(v.size(), n);
  EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](uint32_t x) { return x == 7u; }));
  schedule::assign_ahead<uint32_t>(v, 5, 9u);  // and below it, on one core
  EXPECT_EQ(v, std::vector<uint32_t>(5, 9u));
}

TEST(TouchAhead, TouchAheadKeepsWhatTheCallerWroteMeanwhile) {
  const size_t n = schedule::TouchAhead::kMinBytes / sizeof(uint64_t) * 2;
  std::vector<uint64_t> v;
  v.reserve(n);
  {
    const schedule::TouchAhead ahead({{v.data(), n * sizeof(uint64_t)}});
    for (size_t i = 0; i < n; ++i) v.push_back(i * 2654435761u);  // written while it faults
  }
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], i * 2654435761u) << i;
  EXPECT_EQ(v.back(), (n - 1) * 2654435761u);
}

// The trace's arrays (schedule::TimeArray) read as zeros however large, without a write, and a
// TouchAhead faulting them in meanwhile keeps every value the caller writes.
TEST(TouchAhead, TimeArraysAreZerosAndTouchAheadKeepsTheirWrites) {
  for (const size_t n : {size_t{0}, size_t{5}, schedule::TouchAhead::kMinBytes / sizeof(double) * 3 + 11}) {
    schedule::TimeArray a(n), b(n);
    ASSERT_EQ(a.size(), n);
    EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](double x) { return x == 0.0; })) << n;
    {
      const schedule::TouchAhead warm({{a.data(), n * sizeof(double)}, {b.data(), n * sizeof(double)}});
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
  schedule::TimeArray c{1.0, 2.0};  // values given are written as given
  EXPECT_EQ(c[1], 2.0);
}

}  // namespace CPSIM_TEST_TU
