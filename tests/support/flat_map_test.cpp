// FlatMap (support/flat_map.hpp), the engines' open-addressed map (ops in flight, the route
// cache), held against std::unordered_map over a long random run of sets, erases (present and
// absent) and finds, with keys that collide in its table (multiples of a power of two) so runs
// wrap and shift; with op ids and with 64-bit route keys.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "support/flat_map.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::support::FlatMap;

namespace {
template <class Key>
void agrees_over_a_random_run(Key stride, Key offset) {
  std::mt19937 rng(11);
  FlatMap<Key> m;
  std::unordered_map<Key, uint32_t> want;
  std::uniform_int_distribution<Key> id(0, 3000);
  std::uniform_int_distribution<int> what(0, 9);
  for (int step = 0; step < 200000; ++step) {
    const Key k = offset + id(rng) * stride;
    const int w = what(rng);
    if (w < 4) {
      const uint32_t v = static_cast<uint32_t>(rng());
      m.set(k, v);
      want[k] = v;
    } else if (w < 8) {
      m.erase(k);
      want.erase(k);
    }
    const uint32_t* got = m.find(k);
    const auto it = want.find(k);
    ASSERT_EQ(got != nullptr, it != want.end()) << "stride " << stride << " step " << step;
    if (got) {
      ASSERT_EQ(*got, it->second);
    }
    ASSERT_EQ(m.size(), want.size());
  }
  for (const auto& [k, v] : want) {
    ASSERT_NE(m.find(k), nullptr);
    EXPECT_EQ(*m.find(k), v);
  }
}
}  // namespace

TEST(FlatMap, AgreesWithStdUnorderedMapOverARandomRun) {
  for (const uint32_t stride : {1u, 64u, 4096u}) agrees_over_a_random_run<uint32_t>(stride, 0);
  // Route keys: src << 32 | dst.
  for (const uint64_t stride : {uint64_t{1}, uint64_t{1} << 32}) agrees_over_a_random_run<uint64_t>(stride, 7);
}

}  // namespace CPSIM_TEST_TU
