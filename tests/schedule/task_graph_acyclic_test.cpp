// finalize() rejects cycles: over explicit edges, and through the stream order (a queue runs its
// ops in id order). It skips its check when every explicit edge runs forward in id order, which
// is sound only because every queue link does too: these pin both sides of that argument.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "schedule/task_graph.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using schedule::OpId;
using schedule::TaskGraph;

namespace {
OpId compute(TaskGraph& g, int rank, uint16_t stream) {
  schedule::OpLabel l;
  l.name = g.intern("k");
  return g.add_compute(rank, stream, 1e-3, l);
}
void expect_cycle(TaskGraph& g) {
  try {
    g.finalize();
    FAIL() << "finalize accepted a cycle";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("cycle"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(g.finalized());
}
}  // namespace

TEST(TaskGraphAcyclic, ACycleOfExplicitEdgesIsRejected) {
  TaskGraph g;
  const OpId a = compute(g, 0, 0), b = compute(g, 1, 0), c = compute(g, 2, 0);
  g.add_edge(a, b);
  g.add_edge(b, c);
  g.add_edge(c, a);  // backward
  expect_cycle(g);
}

TEST(TaskGraphAcyclic, AnEdgeAgainstTheStreamOrderIsADeadlock) {
  TaskGraph g;
  const OpId first = compute(g, 0, 0), second = compute(g, 0, 0);  // one queue: first, then second
  g.add_edge(second, first);
  expect_cycle(g);
}

TEST(TaskGraphAcyclic, ABackwardEdgeWithoutACycleIsKeptAndWalked) {
  TaskGraph g;
  const OpId a = compute(g, 0, 0), b = compute(g, 1, 0);
  g.add_edge(b, a);  // backward in ids, yet no cycle: b runs before a
  g.finalize();
  ASSERT_TRUE(g.finalized());
  EXPECT_EQ(g.succs(b), std::vector<OpId>{a});
  EXPECT_EQ(g.preds(a), std::vector<OpId>{b});
}

TEST(TaskGraphAcyclic, QueueLinksRunForwardSoForwardEdgesNeedNoCheck) {
  // Ops of two ranks interleaved on their queues, with forward edges across them: every
  // successor of every op has a larger id.
  TaskGraph g;
  OpId prev = schedule::kNoOp;
  for (int i = 0; i < 40; ++i) {
    const OpId o = compute(g, i % 3, static_cast<uint16_t>(i % 2));
    if (prev != schedule::kNoOp && i % 5 == 0) g.add_edge(prev, o);
    prev = o;
  }
  g.finalize();
  ASSERT_TRUE(g.finalized());
  for (OpId i = 0; i < g.size(); ++i)
    for (const OpId s : g.succs(i)) EXPECT_GT(s, i);
}

}  // namespace CPSIM_TEST_TU
