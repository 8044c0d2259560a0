// The log (sim/log/log.hpp): -v, -vv, --log-level and CPSIM_LOG turn it up; at the default level a
// successful run writes nothing to stderr; what it says at info is the decisions a user asks
// about: NCCL's choice per collective, kernel calls priced outside their profile and by which
// rule, and the shortcuts a large mesh takes.
#include <gtest/gtest.h>

#include <string>

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;

namespace {

// One attention-free layer build is enough for the tuner and the kernel prices: the quick start
// scenario at layer scope, analytic.
const std::string kQuick = kCpsim + " run scenarios/quickstart.yaml --set simulation.scope=layer --engine analytic";

/// The command's stderr alone, run in the source tree (`cmd` may start with VAR=value).
Output stderr_of(const std::string& cmd) { return run("( (cd " + kSource + " && " + cmd + ") 2>&1 >/dev/null )"); }

TEST(Log, DefaultLevelWritesNothingOnSuccess) {
  const Output o = stderr_of(kQuick);
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_EQ(o.text, "");
}

TEST(Log, VerboseSaysTunerChoicesExtrapolationsAndTheGraph) {
  const Output o = stderr_of(kQuick + " -v");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("cpsim: info: nccl: allgather of "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("Ring/Simple, 12 channel(s)"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("cpsim: info: graph: "), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("debug"), std::string::npos) << "-v is info, not debug:\n" << o.text;
  // One line per distinct decision, not one per layer (the 64 layers gather the same weights).
  const std::string line = "allgather of 50.33 MB on 8 ranks";
  const size_t first = o.text.find(line);
  ASSERT_NE(first, std::string::npos) << o.text;
  EXPECT_EQ(o.text.find(line, first + 1), std::string::npos) << o.text;
  // The graph line says how many kernel calls were priced outside their profile (every price
  // of this layer is inside one since attention curves run on at their last rate).
  EXPECT_NE(o.text.find(" priced outside their profile); replay: analytic engine"), std::string::npos) << o.text;
}

TEST(Log, LevelFromFlagsAndEnvironment) {
  EXPECT_NE(stderr_of(kQuick + " -vv").text.find("cpsim: debug: cost model: "), std::string::npos);
  EXPECT_NE(stderr_of("CPSIM_LOG=info " + kQuick).text.find("cpsim: info: nccl: "), std::string::npos);
  // --log-level wins over -v, and over the environment.
  EXPECT_EQ(stderr_of(kQuick + " -v --log-level warn").text, "");
  EXPECT_EQ(stderr_of("CPSIM_LOG=debug " + kQuick + " --log-level off").text, "");
  const Output bad = stderr_of("CPSIM_LOG=loud " + kQuick);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.text.find("CPSIM_LOG: 'loud' is not a log level"), std::string::npos) << bad.text;
  EXPECT_EQ(stderr_of(kQuick + " --log-level loud").rc, 2);
}

TEST(Log, ShortcutsOfALargeMeshAreSaid) {
  // 1,024 GPUs at layer scope: pipelined collectives (auto, over 512 GPUs) and replica symmetry.
  const Output o = stderr_of(kCpsim + " run scenarios/llama3-70b-128k-1024-h100.yaml --set simulation.scope=layer"
                             " --engine analytic -v");
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("cpsim: info: shortcut: pipelined collectives (simulation.collectives: auto, over 512 GPUs)"),
            std::string::npos) << o.text;
  EXPECT_NE(o.text.find("cpsim: info: shortcut: replica symmetry used: one data-parallel replica simulated"),
            std::string::npos) << o.text;
}

}  // namespace
}  // namespace CPSIM_TEST_TU
