// The fault what-if end to end with the built binary: a rail down and a degraded link are
// priced (the step without each, and without both), a slow GPU's price is the unperturbed run
// bit for bit, the cap says what it left out, and 0 turns it off.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_dir.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;

namespace {

const std::string kAnchor = CPSIM_SOURCE_DIR "/scenarios/anchor-128k-ring-zigzag.yaml";
// Two nodes, the CP ring across them: its traffic crosses the NICs.
const std::string kTwoNodes = " --set platform=h100-cluster --set parallel.cp=16 --set simulation.scope=attention-layer";

class FaultWhatIf : public cpsim::test::CliDir {
 protected:
  json result(const std::string& args, Output* out = nullptr) {
    return run_json(kCpsim + " run " + kAnchor + kTwoNodes + " " + args, out);
  }
};

}  // namespace

TEST_F(FaultWhatIf, RailDownAndSlowLinkArePricedAndAllRemovedIsThePlainRun) {
  Output o;
  const json down = result("--set 'perturb={rails_down: [0], links: [{gpu: 9, link: nic, bw_factor: 0.5}]}'", &o);
  const json plain = result("");
  ASSERT_TRUE(down.contains("perturbations")) << o.text;
  const auto& pw = down["perturbations"];
  EXPECT_EQ(pw["count"], 2);
  EXPECT_EQ(pw["priced"], 2);
  ASSERT_EQ(pw["tried"].size(), 2u);
  const auto& rail = pw["tried"][0];
  EXPECT_EQ(rail["kind"], "rail_down");
  EXPECT_EQ(rail["label"], "rail 0 down on every node");
  EXPECT_GT(rail["cost_s"].get<double>(), 0) << pw.dump(1);
  EXPECT_DOUBLE_EQ(rail["cost_s"].get<double>(),
                   down["step_time_s"].get<double>() - rail["step_without_s"].get<double>());
  const auto& link = pw["tried"][1];
  EXPECT_EQ(link["kind"], "link");
  EXPECT_EQ(link["label"], "NIC of GPU 9 at 0.5x bandwidth");
  EXPECT_GT(link["cost_s"].get<double>(), 0) << pw.dump(1);
  // Both removed: the unperturbed run, bit for bit (a fresh build on healthy links).
  EXPECT_EQ(pw["all"]["step_without_s"].get<double>(), plain["step_time_s"].get<double>());
  EXPECT_NE(o.text.find("    rail 0 down on every node: costs "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("    all 2 removed together: costs "), std::string::npos) << o.text;
  // The straggler what-if has no slowed rank here, and says where the faults' costs are.
  EXPECT_NE(o.text.find("none: no rank is slowed (the faults' costs follow)"), std::string::npos) << o.text;
  EXPECT_FALSE(plain.contains("perturbations"));
}

TEST_F(FaultWhatIf, SlowGpuIsPricedOnTheSameGraphAndTheCapSaysWhatItLeftOut) {
  Output o;
  const std::string perturb = "--set 'perturb={slow_gpus: {3: 1.3}, slow_nodes: {1: 1.1}, rails_down: [2]}'";
  const json capped = result(perturb + " --what-if-perturbations 1", &o);
  const auto& pw = capped["perturbations"];
  EXPECT_EQ(pw["count"], 3);
  ASSERT_EQ(pw["tried"].size(), 1u);
  EXPECT_EQ(pw["tried"][0]["kind"], "rail_down");  // the first kind in turn
  EXPECT_FALSE(pw["all"].is_null());
  EXPECT_NE(o.text.find("(1 of 3 priced, the most severe of each kind in turn; --what-if-perturbations 3 "
                        "prices all)"),
            std::string::npos)
      << o.text;
  // GPU 3 alone slowed: without it, the plain run exactly.
  const json slow = result("--set 'perturb.slow_gpus={3: 1.3}'");
  const json plain = result("");
  ASSERT_EQ(slow["perturbations"]["tried"].size(), 1u);
  EXPECT_EQ(slow["perturbations"]["tried"][0]["label"], "GPU 3 slowed x1.3");
  EXPECT_EQ(slow["perturbations"]["tried"][0]["step_without_s"].get<double>(), plain["step_time_s"].get<double>());
  EXPECT_TRUE(slow["perturbations"]["all"].is_null());  // one perturbation: nothing more to remove
  // Off on request; the main run's figures do not move.
  const json off = result(perturb + " --what-if-perturbations 0");
  EXPECT_FALSE(off.contains("perturbations"));
  EXPECT_EQ(off["step_time_s"], capped["step_time_s"]);
}

TEST_F(FaultWhatIf, SummaryNamesTheTopWaits) {
  Output o;
  result("", &o);
  EXPECT_NE(o.text.find("  top waits "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("    rank "), std::string::npos) << o.text;
  EXPECT_NE(o.text.find(" waited "), std::string::npos) << o.text;
}

}  // namespace CPSIM_TEST_TU
