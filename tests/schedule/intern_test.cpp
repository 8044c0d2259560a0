// TaskGraph::intern remembers its recent answers by the caller's pointer (labels are mostly
// string literals); the text decides, never the pointer alone.
#include <gtest/gtest.h>

#include <string>

#include "schedule/task_graph.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::schedule::TaskGraph;

TEST(Intern, OneIdPerTextWhateverItsBuffer) {
  TaskGraph g;
  EXPECT_EQ(g.intern(""), 0u);
  const uint32_t a = g.intern("attn_fwd");
  EXPECT_EQ(g.intern("attn_fwd"), a);
  EXPECT_EQ(g.intern(std::string("attn_fwd")), a);
  // One buffer holding different texts in turn: each text keeps its own id.
  char buf[16] = "kv_p2p";
  const uint32_t k = g.intern(buf);
  EXPECT_NE(k, a);
  buf[0] = 'q';  // "qv_p2p": same pointer, same length, other text
  const uint32_t q = g.intern(buf);
  EXPECT_NE(q, k);
  buf[0] = 'k';
  EXPECT_EQ(g.intern(buf), k);
  buf[2] = '\0';  // "kv": same pointer, shorter
  EXPECT_EQ(g.intern(std::string_view(buf, 2)), g.intern(std::string("kv")));
  EXPECT_EQ(g.str(q), "qv_p2p");
  EXPECT_EQ(g.interned("qv_p2p"), q);
  EXPECT_EQ(g.interned("never"), UINT32_MAX);
  // A copy answers with the same ids.
  TaskGraph c = g;
  EXPECT_EQ(c.intern("attn_fwd"), a);
  EXPECT_EQ(c.intern(buf), g.intern(buf));
}

}  // namespace CPSIM_TEST_TU
