// ChunkWarmer (support/chunk_warmer.cpp) hands ChunkedVector chunks faulted in ahead on
// another thread while it lives, and nothing otherwise: checked by taking chunks directly
// (some come back ready once the thread runs; none of another size, none without a warmer,
// none from a second warmer's scope once the first is gone), and by filling a ChunkedVector
// of many chunks under a warmer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <new>
#include <thread>
#include <vector>

#include "support/chunk_warmer.hpp"
#include "support/chunked_vector.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using support::ChunkWarmer;

namespace {
constexpr size_t kChunk = ChunkWarmer::kChunkBytes;  // ChunkedVector's default chunk
void release(void* p) { ::operator delete(p, std::align_val_t(ChunkWarmer::kAlign)); }
}  // namespace

TEST(ChunkWarmer, HandsOutReadyChunksOnlyWhileAliveAndOnlyOfItsSize) {
  EXPECT_EQ(ChunkWarmer::take(kChunk), nullptr);  // no warmer
  {
    const ChunkWarmer warm;
    EXPECT_EQ(ChunkWarmer::take(kChunk), nullptr);  // the first: nothing warmed yet
    EXPECT_EQ(ChunkWarmer::take(kChunk), nullptr);  // the second starts the thread
    EXPECT_EQ(ChunkWarmer::take(kChunk / 2), nullptr);
    // The thread warms ahead: a chunk is ready within a few seconds at most, writable, and
    // aligned to ChunkWarmer::kAlign as ChunkedVector's own.
    void* p = nullptr;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (p == nullptr && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      p = ChunkWarmer::take(kChunk);
    }
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % ChunkWarmer::kAlign, 0u);
    static_cast<uint64_t*>(p)[kChunk / sizeof(uint64_t) - 1] = 42;
    release(p);
    {
      const ChunkWarmer second;  // one warmer at a time: this one adds nothing
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    void* q = ChunkWarmer::take(kChunk);  // still the first one's
    if (q) release(q);
  }
  EXPECT_EQ(ChunkWarmer::take(kChunk), nullptr);  // gone with its scope
}

TEST(ChunkWarmer, AChunkedVectorFilledUnderAWarmerHoldsWhatWasPushed) {
  support::ChunkedVector<uint64_t> v;
  const size_t n = kChunk / sizeof(uint64_t) * 12 + 5;  // 13 chunks, 48 MB
  {
    const ChunkWarmer warm;
    for (size_t i = 0; i < n; ++i) v.push_back(i * 0x9E3779B97F4A7C15ull);
  }
  ASSERT_EQ(v.size(), n);
  for (size_t i = 0; i < n; i += 1021) ASSERT_EQ(v[i], i * 0x9E3779B97F4A7C15ull) << i;
  EXPECT_EQ(v.back(), (n - 1) * 0x9E3779B97F4A7C15ull);
}

}  // namespace CPSIM_TEST_TU
