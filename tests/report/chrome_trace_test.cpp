// The streamed Chrome trace: written event by event, yet the same bytes as serialising the
// whole document at once (what the writer did before it streamed), and complete.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "report/output.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

TEST(ChromeTrace, StreamedBytesEqualTheWholeDocumentsDump) {
  schedule::TaskGraph g;
  schedule::OpLabel a, x;
  a.name = g.intern("attn_fwd");
  a.category = g.intern("attention");
  a.layer = 0;
  x.name = g.intern("kv_p2p");
  x.category = g.intern("p2p");
  x.layer = 0;
  const auto c = g.add_compute(0, schedule::stream::kCompute, 1e-3, a, 2e12);
  const auto t = g.add_transfer(0, schedule::stream::kCpSend, 1, schedule::stream::kCpRecv, 1e6, x);
  g.add_edge(c, t);
  g.finalize();
  schedule::Trace tr;
  tr.start_s = {0.0, 1e-3};
  tr.end_s = {1e-3, 1.25e-3};
  tr.makespan_s = 1.25e-3;
  std::ostringstream os;
  report::write_chrome_trace(os, g, tr, {c, t});
  const auto doc = nlohmann::json::parse(os.str());
  EXPECT_EQ(doc.dump(), os.str());
  // 2 processes x (name, sort) + 3 threads x (name, sort) + compute + send + recv + 2 flow ends
  EXPECT_EQ(doc.at("traceEvents").size(), 4u + 6u + 3u + 2u);
  int critical = 0;
  for (const auto& e : doc.at("traceEvents"))
    if (e.contains("args") && e["args"].contains("critical")) ++critical;
  EXPECT_EQ(critical, 3);  // the compute op and both ends of the transfer
}

}  // namespace CPSIM_TEST_TU
