// OpMap (engine/op_map.hpp), the open-addressed map of ops in flight, held against
// std::unordered_map over a long random run of sets, erases (present and absent) and finds,
// with ids that collide in its table (multiples of a power of two) so runs wrap and shift.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "engine/op_map.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::engine::detail::OpMap;
using cpsim::schedule::OpId;

TEST(OpMap, AgreesWithStdUnorderedMapOverARandomRun) {
  std::mt19937 rng(11);
  for (const OpId stride : {OpId{1}, OpId{64}, OpId{4096}}) {
    OpMap m;
    std::unordered_map<OpId, uint32_t> want;
    std::uniform_int_distribution<OpId> id(0, 3000);
    std::uniform_int_distribution<int> what(0, 9);
    for (int step = 0; step < 200000; ++step) {
      const OpId k = id(rng) * stride;
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
}

}  // namespace CPSIM_TEST_TU
