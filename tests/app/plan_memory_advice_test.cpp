// What `cpsim memory` and `cpsim plan` advise: a 405B that fits on no change of 8 GPUs gets the
// smallest mesh that fits (and only changes that save memory, never two values of one key);
// plan budgets 95 % of HBM unless told otherwise, searches the axes the scenario leaves free
// (each variant reproducible with `cpsim run`) and reports its stages on stderr.
#include <gtest/gtest.h>

#include <cstdio>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/cli_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

namespace fs = std::filesystem;
using namespace cpsim::cli;
using nlohmann::json;

namespace {

const std::string k405bOn8 =
    " memory scenarios/llama3-405b-16k-gpus.yaml --set platform.nodes=1 --set parallel.cp=1 --set parallel.pp=1"
    " --set parallel.dp=1 --no-simulate";

class PlanMemoryAdvice : public cpsim::test::CliDir {};

}  // namespace

TEST_F(PlanMemoryAdvice, NothingFitsSoTheSmallestMeshIsNamedAndEveryChangeSavesMemory) {
  const Output o = in_source(kCpsim + k405bOn8 + " --top 100 --json " + p("m.json"));
  ASSERT_EQ(o.rc, 0) << o.text;
  EXPECT_NE(o.text.find("none of the single or paired changes fits"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("smallest mesh that fits with 5 % headroom"), std::string::npos) << o.text;
  const json j = load("m.json");
  const double peak = j["peak"]["peak_bytes"].get<double>();
  ASSERT_FALSE(j["changes"].empty());
  for (const auto& c : j["changes"]) {
    EXPECT_GE(peak - c["peak_bytes"].get<double>(), 0.05e9) << c["what"];
    const std::string what = c["what"].get<std::string>();
    EXPECT_EQ(what.find("ZeRO"), what.rfind("ZeRO")) << what;  // never "ZeRO 1 -> 2 + ZeRO 1 -> 3"
    EXPECT_EQ(what.find("TP 8 -> 16"), std::string::npos) << what;  // TP stays inside a node
  }
  ASSERT_TRUE(j.contains("smallest_mesh")) << o.text;
  const json& m = j["smallest_mesh"];
  const int gpus = m["gpus"].get<int>();
  EXPECT_EQ(gpus, m["tp"].get<int>() * m["cp"].get<int>() * m["pp"].get<int>() * m["dp"].get<int>());
  EXPECT_GT(gpus, 8);
  // What it names fits with the headroom when `cpsim memory` evaluates it...
  std::string sets;
  for (const auto& s : m["sets"]) sets += " --set " + s.get<std::string>();
  const Output fit = in_source(kCpsim + " memory scenarios/llama3-405b-16k-gpus.yaml --no-simulate" + sets);
  ASSERT_EQ(fit.rc, 0) << fit.text;
  EXPECT_NE(fit.text.find("verdict: fits:"), std::string::npos) << fit.text;
  // ...and is the smallest: the same search one node smaller finds nothing with any TP x CP x PP.
  bool any = false;
  const int nodes = m["nodes"].get<int>();
  for (int cp : {1, 2, 4, 8, 16})
    for (int pp : {1, 2, 4, 8})
      if ((nodes - 1) * 8 % (8 * cp * pp) == 0) {
        const Output smaller = in_source(
            kCpsim + " memory scenarios/llama3-405b-16k-gpus.yaml --no-simulate --top 0 --set parallel.zero_stage=3"
                     " --set training.recompute=full --set platform.nodes=" + std::to_string(nodes - 1) +
            " --set parallel.tp=8 --set parallel.cp=" + std::to_string(cp) + " --set parallel.pp=" +
            std::to_string(pp) + " --set parallel.dp=" + std::to_string((nodes - 1) * 8 / (8 * cp * pp)) +
            " --set training.micro_batches=" + std::to_string(pp > 1 ? 4 * pp : 16));
        any = any || smaller.text.find("verdict: fits:") != std::string::npos;
      }
  EXPECT_FALSE(any);
}

TEST_F(PlanMemoryAdvice, PlanBudgetsNinetyFivePercentSearchesFreeAxesAndShowsProgress) {
  const std::string plan = kCpsim + " plan scenarios/llama3-8b-128k-4nodes.yaml --gpus 8 --budget 4";
  const std::string base = plan + " --verify 0";
  const Output o = in_source(plan + " --progress --verify 1 --json " + p("p.json"));
  ASSERT_EQ(o.rc, 0) << o.text;
  // Not a terminal: with --progress, one line per stage on stderr.
  EXPECT_NE(o.text.find("cpsim: plan: whole steps (analytic)"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("memory budget 81.6 GB per GPU (95 % of 85.9 GB"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("not searched: stack: the scenario sets training.stack"), std::string::npos) << o.text;
  const json j = load("p.json");
  EXPECT_DOUBLE_EQ(j["memory_budget_bytes"].get<double>(), 0.95 * j["capacity_bytes"].get<double>());
  EXPECT_EQ(j["axes"], json({"tp_comm_overlap", "precision"}));
  for (const auto& c : j["ranked"]) EXPECT_LE(c["peak_bytes"].get<double>(), j["memory_budget_bytes"].get<double>());
  // An axis variant ranks, and its sets reproduce it with `cpsim run`.
  bool variant = false;
  for (const auto& c : j["ranked"]) {
    if (c["axes"][1] == "bf16") continue;
    variant = true;
    std::string sets;
    for (const auto& s : c["sets"]) sets += " --set " + s.get<std::string>();
    const Output r = in_source(kCpsim + " run scenarios/llama3-8b-128k-4nodes.yaml" + sets +
                               " --engine analytic -q --json " + p("r.json"));
    ASSERT_EQ(r.rc, 0) << sets << "\n" << r.text;
    EXPECT_NEAR(load("r.json")["step_time_s"].get<double>(), c["analytic_step_s"].get<double>(), 1e-9) << sets;
    break;
  }
  EXPECT_TRUE(variant) << o.text;
  // SimGrid verifies a variant as its own scenario: within a few percent of the analytic step.
  const json& best = j["ranked"][0];
  ASSERT_FALSE(best["simgrid_step_s"].is_null()) << o.text;
  EXPECT_NEAR(best["simgrid_step_s"].get<double>() / best["analytic_step_s"].get<double>(), 1.0, 0.1) << best.dump();
  // Without --progress and not on a terminal: nothing on stderr.
  const Output quiet = in_source(base + " 2>&1 >/dev/null");
  EXPECT_EQ(quiet.text, "");
  // The whole budget on request; a percentage outside (0, 100] is refused.
  // (Expandable segments: no fragmentation, so CP 8 at ZeRO 1 lands within 5 % of HBM.)
  const Output full = in_source(base + " --memory-budget 100% --set memory.allocator.expandable_segments=true --json " +
                                p("f.json"));
  ASSERT_EQ(full.rc, 0) << full.text;
  const json f = load("f.json");
  EXPECT_DOUBLE_EQ(f["memory_budget_bytes"].get<double>(), f["capacity_bytes"].get<double>());
  // There a layout within 5 % of HBM ranks, marked tight in the table.
  int tight = 0;
  for (const auto& c : f["ranked"]) {
    const double peak = c["peak_bytes"].get<double>(), cap = f["capacity_bytes"].get<double>();
    if (peak < 0.95 * cap) continue;
    ++tight;
    char cell[32];
    std::snprintf(cell, sizeof cell, "%.1f tight", peak / 1e9);
    EXPECT_NE(full.text.find(cell), std::string::npos) << cell << "\n" << full.text;
  }
  EXPECT_GT(tight, 0) << full.text;
  EXPECT_EQ(in_source(base + " --memory-budget 120%").rc, 2);
}

TEST_F(PlanMemoryAdvice, PlanSearchesTheStackOnlyWhenTheScenarioLeavesItFree) {
  // The bundled scenario without its training.stack line: the stack becomes an axis.
  std::string yaml;
  {
    std::istringstream in(slurp(kSource + "/scenarios/llama3-8b-128k-4nodes.yaml"));
    for (std::string line; std::getline(in, line);)
      if (line.find("stack:") == std::string::npos) yaml += line + "\n";
  }
  write(dir_ / "free.yaml", yaml);
  const Output o = in_source(kCpsim + " plan " + p("free.yaml") + " --gpus 8 --budget 4 --verify 0 --json " + p("s.json"));
  ASSERT_EQ(o.rc, 0) << o.text;
  const json j = load("s.json");
  EXPECT_EQ(j["axes"], json({"tp_comm_overlap", "precision", "stack"}));
  EXPECT_TRUE(j["axes_not_searched"].empty()) << j["axes_not_searched"];
  bool other_stack = false;
  for (const auto& c : j["candidates"]) other_stack |= c["axes"][2] != "megatron-te";
  EXPECT_TRUE(other_stack);
  // Pinned by --set, it is not searched.
  const Output pinned = in_source(kCpsim + " plan " + p("free.yaml") +
                                  " --set training.stack=torch-compile --gpus 8 --budget 4 --verify 0 --json " + p("q.json"));
  ASSERT_EQ(pinned.rc, 0) << pinned.text;
  EXPECT_EQ(load("q.json")["axes"], json({"tp_comm_overlap", "precision"}));
}

}  // namespace CPSIM_TEST_TU
