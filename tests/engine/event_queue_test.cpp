// The engines' radix-heap event queue takes events in exactly the order of a binary heap under
// detail::Later (time, then op), however pushes and peeks interleave.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <queue>
#include <random>
#include <vector>

#include "engine/event_queue.hpp"

namespace CPSIM_TEST_TU {
namespace {

using cpsim::engine::detail::EventQueue;
using cpsim::engine::detail::Later;

struct Ev {
  double t;
  uint32_t op;
  uint32_t tag;  // which push, to tell equal (t, op) events apart
};

/// Pushes and takes like an engine: a clock that only moves forward to the event taken, new
/// events at the clock plus a delay (often zero, often equal to another's), some peeks between,
/// a few a rounding error before the clock. Returns how many events were compared.
size_t compare_with_binary_heap(uint32_t seed, size_t steps) {
  std::mt19937_64 rng(seed);
  EventQueue<Ev> radix;
  std::priority_queue<Ev, std::vector<Ev>, Later> ref;
  double clock = 0;
  uint32_t tag = 0;
  size_t taken = 0;
  const double delays[] = {0.0, 1e-6, 2.5e-6, 1e-3, 0.25, 3.0};
  auto push = [&](double t, uint32_t op) {
    radix.push({t, op, tag});
    ref.push({t, op, tag});
    ++tag;
  };
  for (size_t s = 0; s < steps; ++s) {
    const int what = static_cast<int>(rng() % 10);
    if (what < 5 || ref.empty()) {
      double t = clock;
      if (rng() % 4 != 0) t += delays[rng() % 6] * static_cast<double>(1 + rng() % 3);
      if (rng() % 50 == 0) t = clock - 1e-12 * static_cast<double>(1 + rng() % 5);  // rounding
      if (rng() % 200 == 0) t = -0.0;
      push(t, static_cast<uint32_t>(rng() % 64));
    } else if (what < 7) {
      EXPECT_EQ(radix.top().t, ref.top().t);
      EXPECT_EQ(radix.top().op, ref.top().op);
    } else {
      const Ev a = radix.top(), b = ref.top();
      radix.pop();
      ref.pop();
      EXPECT_EQ(a.t, b.t) << "event " << taken;
      EXPECT_EQ(a.op, b.op) << "event " << taken;
      if (a.t > clock) clock = a.t;
      ++taken;
    }
    EXPECT_EQ(radix.size(), ref.size());
  }
  while (!ref.empty()) {
    EXPECT_EQ(radix.top().t, ref.top().t);
    EXPECT_EQ(radix.top().op, ref.top().op);
    radix.pop();
    ref.pop();
    ++taken;
  }
  EXPECT_TRUE(radix.empty());
  return taken;
}

TEST(EventQueue, TakesEventsInTheBinaryHeapsOrderUnderRandomEngineLikeUse) {
  size_t taken = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) taken += compare_with_binary_heap(seed, 20'000);
  EXPECT_GT(taken, 100'000u);  // the comparison saw real traffic
}

TEST(EventQueue, EventsAtOneInstantComeOutByOpWhateverTheirPushOrder) {
  EventQueue<Ev> q;
  for (uint32_t op : {7u, 3u, 9u, 1u}) q.push({2.0, op, 0});
  q.push({1.0, 20, 0});
  std::vector<uint32_t> ops;
  while (!q.empty()) {
    ops.push_back(q.top().op);
    q.pop();
  }
  EXPECT_EQ(ops, (std::vector<uint32_t>{20, 1, 3, 7, 9}));
}

TEST(EventQueue, ManyEventsOfOneTimeAmongOthersComeOutWholeAndByOp) {
  // Replicas in step queue the same ends many at a time: a time's group spans several blocks,
  // is reused once taken, and times that share a slot of the cache of open groups stay apart.
  EventQueue<Ev> q;
  std::priority_queue<Ev, std::vector<Ev>, Later> ref;
  uint32_t tag = 0;
  for (int round = 0; round < 3; ++round) {
    for (uint32_t op = 0; op < 100; ++op)
      for (const double t : {3.0 + round, 3.5 + round, 3.0 + round + std::ldexp(1.0, -40)}) {
        const Ev e{t, (op * 37) % 100 + 1000 * static_cast<uint32_t>(t == 3.5 + round), tag++};
        q.push(e);
        ref.push(e);
      }
    for (int k = 0; k < 250; ++k) {
      ASSERT_EQ(q.top().t, ref.top().t) << round << " " << k;
      ASSERT_EQ(q.top().op, ref.top().op) << round << " " << k;
      q.pop();
      ref.pop();
    }
  }
  while (!ref.empty()) {
    ASSERT_EQ(q.top().t, ref.top().t);
    ASSERT_EQ(q.top().op, ref.top().op);
    q.pop();
    ref.pop();
  }
  EXPECT_TRUE(q.empty());
}

TEST(EventQueue, APeekDoesNotStopAnEarlierEventPushedAfterItFromComingFirst) {
  // SimGrid's replay peeks at the next event to set its timer, then a Comm ends earlier and
  // queues an event before it: that one must come first.
  EventQueue<Ev> q;
  q.push({5.0, 1, 0});
  q.push({9.0, 2, 0});
  EXPECT_EQ(q.top().t, 5.0);
  q.push({4.0, 3, 0});
  EXPECT_EQ(q.top().t, 4.0);
  q.pop();
  q.push({4.5, 4, 0});
  std::vector<double> ts;
  while (!q.empty()) {
    ts.push_back(q.top().t);
    q.pop();
  }
  EXPECT_EQ(ts, (std::vector<double>{4.5, 5.0, 9.0}));
}

TEST(EventQueue, AnEventBeforeTheLastOneTakenComesNextNotLast) {
  EventQueue<Ev> q;
  q.push({1.0, 1, 0});
  q.push({2.0, 2, 0});
  q.pop();                       // the last time taken is 1.0
  q.push({1.0 - 1e-15, 3, 0});   // a caller's rounding put it just before
  EXPECT_EQ(q.top().op, 3u);
  q.pop();
  EXPECT_EQ(q.top().op, 2u);
}

}  // namespace
}  // namespace CPSIM_TEST_TU
