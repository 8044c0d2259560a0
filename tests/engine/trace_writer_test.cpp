// The trace's times handed to another thread (engine/trace_writer.hpp) land where they would
// have been written in place: every slot once, whoever writes it, however far behind the
// writer falls.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "engine/trace_writer.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using engine::detail::TraceWriter;
using schedule::OpId;

/// Ids in a scattered order (as a replay finishes ops), each once: i * a mod n, a prime to n.
std::vector<OpId> scattered(size_t n) {
  std::vector<OpId> ids(n);
  const uint64_t a = 1000003;  // prime, larger than any n here
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<OpId>(i * a % n);
  return ids;
}

double start_of(OpId id) { return static_cast<double>(id) * 1e-6 + 0.25; }
double end_of(OpId id) { return static_cast<double>(id) * 1e-6 + 0.75; }

void expect_all_written(const schedule::Trace& tr, size_t n) {
  ASSERT_EQ(tr.start_s.size(), n);
  ASSERT_EQ(tr.end_s.size(), n);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(tr.start_s[i], start_of(static_cast<OpId>(i))) << i;
    ASSERT_EQ(tr.end_s[i], end_of(static_cast<OpId>(i))) << i;
  }
}

// Many rings' worth of entries, written as fast as a loop can: the writer falls a ring behind
// and the caller writes blocks itself; the partly filled last block is written by finish().
TEST(TraceWriter, EveryTimeLandsInItsSlotThroughTheRingAndBesideIt) {
  const size_t n = 40 * TraceWriter::kBlock * 32 + 123;  // 40 rings of 32 blocks, and a partial block
  const std::vector<OpId> ids = scattered(n);
  schedule::Trace tr;
  TraceWriter w(tr, n, true, 2);
  ASSERT_TRUE(w.threaded());
  for (const OpId id : ids) w.start(id, start_of(id));
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) w.end(*it, end_of(*it));
  w.finish();
  expect_all_written(tr, n);
  w.finish();  // twice: nothing more to do
  // (Which blocks the caller wrote depends on the machine: counted, not asserted.)
  RecordProperty("blocks_written_here", static_cast<int>(w.blocks_written_here()));
}

// A small graph (threads_for gives one thread), and keep off: nothing is handed over;
// written in place, or not at all.
TEST(TraceWriter, SmallGraphsWriteInPlaceAndKeepOffWritesNothing) {
  const size_t n = 1000;
  {
    schedule::Trace tr;
    TraceWriter w(tr, n, true);
    EXPECT_FALSE(w.threaded());
    for (const OpId id : scattered(n)) {
      w.start(id, start_of(id));
      w.end(id, end_of(id));
    }
    EXPECT_EQ(tr.start_s[7], start_of(7));  // there at once, before finish
    w.finish();
    expect_all_written(tr, n);
  }
  schedule::Trace tr;
  {
    TraceWriter w(tr, n, false, 2);
    EXPECT_FALSE(w.threaded());
    w.start(3, 1.0);
    w.end(3, 2.0);
  }
  EXPECT_TRUE(tr.start_s.empty());
  EXPECT_TRUE(tr.end_s.empty());
}

// The destructor finishes too (a replay that throws midway leaves no thread behind), and what
// was handed over by then is in place.
TEST(TraceWriter, DestroyedUnfinishedItStillWritesWhatItWasGiven) {
  const size_t n = 3 * TraceWriter::kBlock + 5;
  schedule::Trace tr;
  {
    TraceWriter w(tr, n, true, 2);
    for (OpId id = 0; id < n; ++id) {
      w.start(id, start_of(id));
      w.end(id, end_of(id));
    }
  }
  expect_all_written(tr, n);
}

}  // namespace CPSIM_TEST_TU
