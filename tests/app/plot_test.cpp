// Every command of tools/cpsim_plot.py runs on outputs of the bundled scenarios and sweeps and
// writes a PNG and an SVG. The sweeps run with the analytic engine to stay fast. Skipped where
// /usr/bin/python3 has no matplotlib (Debian's python3-matplotlib).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

#include "support/cli_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;

namespace {

const std::string kPlot = "/usr/bin/python3 " + kSource + "/tools/cpsim_plot.py";

std::string head(const fs::path& p, size_t n) {
  std::ifstream in(p, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

bool have_matplotlib() { return in_source("/usr/bin/python3 -c 'import matplotlib'").rc == 0; }

class PlotTest : public cpsim::test::CliDir {
 protected:
  void SetUp() override {
    CliDir::SetUp();
    if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 has no matplotlib (apt install python3-matplotlib)";
  }

  /// Runs a plot command writing OUT and checks both images.
  void plot(const std::string& args, const std::string& out) {
    SCOPED_TRACE(args);
    const Output o = in_source(kPlot + " " + args + " -o " + p(out));
    ASSERT_EQ(o.rc, 0) << o.text;
    const fs::path png = dir_ / (out + ".png"), svg = dir_ / (out + ".svg");
    ASSERT_TRUE(fs::exists(png)) << o.text;
    ASSERT_TRUE(fs::exists(svg)) << o.text;
    EXPECT_EQ(head(png, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_NE(head(svg, 2000).find("<svg"), std::string::npos);
    EXPECT_GT(fs::file_size(png), 10000u) << "an almost empty image";
  }

};

// One test, because producing the inputs (two runs, two sweeps) is most of its time and
// ctest runs every test in a process of its own.
TEST_F(PlotTest, EveryPlotCommandRunsOnBundledOutputs) {
#ifdef CPSIM_SANITIZED
  // 52 s under ASan+UBSan, nearly all of it cpsim producing inputs that the Release stage
  // already checks; the plotting itself is Python, which the sanitizers do not see.
  GTEST_SKIP() << "runs in the Release stage";
#endif
  // One attention layer at 16K tokens of two bundled scenarios: a trace and two results.
  const std::string cut = " --set simulation.scope=attention-layer --set training.seq_len=16K --engine analytic -q";
  ASSERT_EQ(in_source(kCpsim + " run scenarios/anchor-128k-ring-contiguous.yaml" + cut + " --trace " + p("trace.json") +
                " --json " + p("contiguous.json")).rc, 0);
  ASSERT_EQ(in_source(kCpsim + " run scenarios/anchor-128k-ring-zigzag.yaml" + cut + " --json " + p("zigzag.json")).rc, 0);
  ASSERT_EQ(in_source(kCpsim + " partition --seq 16 --cp 4 --layout contiguous --json " + p("part-c.json")).rc, 0);
  ASSERT_EQ(in_source(kCpsim + " partition --seq 16 --cp 4 --layout zigzag --json " + p("part-z.json")).rc, 0);
  // Two bundled sweeps, analytic to stay fast; usp-degrees holds points that fail on purpose.
  const std::string fast = " -j 2 -q --set simulation.engine=analytic";
  ASSERT_EQ(in_source(kCpsim + " sweep sweeps/schedules-x-seqlen.yaml -o " + p("sched") + fast).rc, 0);
  ASSERT_EQ(in_source(kCpsim + " sweep sweeps/usp-degrees.yaml -o " + p("usp") + fast).rc, 1);

  plot("timeline " + p("trace.json"), "timeline");
  plot("timeline " + p("trace.json") + " --ranks 0-3 --layer 3", "timeline-ranks");
  plot("compare " + p("contiguous.json") + " " + p("zigzag.json"), "compare");
  plot("compare " + p("sched") + " --where training.seq_len=128K", "compare-sweep");
  plot("sweep " + p("sched") + " --x training.seq_len --series schedule --y step_time_s --y exposed_comm_s --logy",
       "sweep");
  plot("sweep " + p("usp") + " --x parallel.attention.ulysses_degree --series parallel.cp --facet simulation.scope",
       "sweep-facets");
  plot("heatmap " + p("usp") + " --x parallel.attention.ulysses_degree --y parallel.cp --note ring_degree --best row",
       "heatmap");
  plot("partition " + p("part-c.json") + " " + p("part-z.json"), "partition");
  // Heatmap data: the metric's unit, OOM cells never best, every other cell a ratio >= 1 to its row's best.
  plot("heatmap " + p("sched") + " --x training.seq_len --y schedule --best row --data " + p("hm.json"), "heatmap-rows");
  {
    const auto hm = nlohmann::json::parse(slurp(p("hm.json")));
    const std::string unit = hm["label"].get<std::string>();
    double most = 0;
    for (const auto& c : hm["cells"]) {
      most = std::max(most, c["value"].get<double>());
      if (c["oom"].get<bool>()) { EXPECT_FALSE(c["best"].get<bool>()) << c; }
      if (!c["oom"].get<bool>() && !c["ratio"].is_null()) { EXPECT_GE(c["ratio"].get<double>(), 1.0 - 1e-12) << c; }
      if (c["best"].get<bool>()) { EXPECT_NEAR(c["ratio"].get<double>(), 1.0, 1e-12); }
    }
    // Times stay in ms, the unit docs/workflow.md gives, also above 1,000 ms.
    EXPECT_NE(unit.find("[ms]"), std::string::npos) << unit << " (largest cell " << most << ")";
  }
  // A sweep plot refuses to merge points that differ in a swept key it does not show.
  {
    const Output o = in_source(kPlot + " sweep " + p("sched") + " --x training.seq_len --series training.seq_len -o " +
                                   p("refused"));
    EXPECT_EQ(o.rc, 2) << o.text;
    EXPECT_NE(o.text.find("not plotted"), std::string::npos) << o.text;
    // A heatmap too: ring-zigzag and ring-contiguous are not one "ring" cell.
    const Output h = in_source(kPlot + " heatmap " + p("sched") + " --x training.seq_len --y parallel.attention.scheme -o " +
                                   p("refused-hm"));
    EXPECT_EQ(h.rc, 2) << h.text;
    EXPECT_NE(h.text.find("'parallel.attention.layout'"), std::string::npos) << h.text;
  }
  // Timeline: a window and a second trace on the same axis; every colour drawn has a legend entry.
  plot("timeline " + p("trace.json") + " --compare " + p("trace.json") + " --window 0:1ms --data " + p("tl.json"),
       "timeline-window");
  {
    const auto tl = nlohmann::json::parse(slurp(p("tl.json")));
    EXPECT_EQ(tl["panels"].size(), 2u);
    EXPECT_DOUBLE_EQ(tl["window_us"][1].get<double>(), 1000.0);
    std::string legend;
    for (const auto& l : tl["legend"]) legend += l.get<std::string>() + "|";
    for (const auto& kv : tl["panels"][0]["ops_drawn"].items())
      if (kv.key() == "cp") { EXPECT_NE(legend.find("CP transfer"), std::string::npos) << legend; }
  }
  // Memory: one bar per CP degree; every term scales with the tokens per GPU or not at all.
  plot("memory scenarios/anchor-128k-ring-zigzag.yaml --cpsim " + kCpsim +
           " --set parallel.zero_stage=0 --vary parallel.cp=1,8 --data " + p("mem.json"), "memory");
  {
    const auto mem = nlohmann::json::parse(slurp(p("mem.json")));
    ASSERT_EQ(mem.size(), 2u);
    double act1 = 0, act8 = 0;
    for (const auto& [k, v] : mem[0]["parts"].items())
      if (k.rfind("activations", 0) == 0) act1 += v.get<double>();
    for (const auto& [k, v] : mem[1]["parts"].items())
      if (k.rfind("activations", 0) == 0) act8 += v.get<double>();
    EXPECT_NEAR(act1 / act8, 8.0, 1e-6);
    // The lesson: 2 s b h x 64 layers = 85.9 GB at s = 131,072 on one GPU (the layer being
    // recomputed, 34 s b h, is held in a block's backward only, beside its working set).
    EXPECT_NEAR(act1, 2.0 * 64 * 131072 * 5120 / 1e9, 0.05);
    EXPECT_FALSE(mem[0]["fits"].get<bool>());
  }
  // Pareto front of a plan: never a point both slower and larger than another on the front.
  {
    std::ofstream(p("plan.json")) << R"({"gpus": 8, "capacity_bytes": 8e10, "counts": {"ranked": 3, "oom": 5},
      "candidates": [
        {"label": "a", "status": "ranked", "peak_bytes": 5e10, "tokens_per_s": 100, "simgrid_step_s": 1.0},
        {"label": "b", "status": "ranked", "peak_bytes": 6e10, "tokens_per_s": 90, "simgrid_step_s": null},
        {"label": "c", "status": "ranked", "peak_bytes": 7e10, "tokens_per_s": 120, "simgrid_step_s": null},
        {"label": "d", "status": "oom", "peak_bytes": 9e10, "tokens_per_s": null}]})";
    plot("pareto " + p("plan.json") + " --data " + p("front.json"), "pareto");
    const auto fr = nlohmann::json::parse(slurp(p("front.json")));
    std::vector<std::string> labels;
    for (const auto& q : fr["front"]) labels.push_back(q["label"].get<std::string>());
    EXPECT_EQ(labels, (std::vector<std::string>{"a", "c"}));
    EXPECT_EQ(fr["points"].size(), 3u);
  }
  plot("bench bench/results", "bench");  // the CSVs bench/run.sh wrote, committed
}

/// Per GPU (rank), the [start, end] of every op on its compute stream, from a Chrome trace.
std::map<int, std::vector<std::pair<double, double>>> compute_spans(const nlohmann::json& trace) {
  std::map<std::pair<int, int>, std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") names[{e["pid"], e["tid"]}] = e["args"]["name"];
  std::map<int, std::vector<std::pair<double, double>>> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && names[{e["pid"], e["tid"]}] == "compute")
      out[e["pid"].get<int>() - 1].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  return out;
}

/// The timeline's data for TRACE: what it drew is what the trace holds. The layer's own
/// micro-batch (never -1) on every stream; waiting drawn only where no op of any layer runs on
/// the compute stream; the backward marker at the GPU's first backward kernel.
void check_timeline(const nlohmann::json& trace, const nlohmann::json& data) {
  const auto& p = data.at("panels").at(0);
  SCOPED_TRACE(p.at("title").get<std::string>());
  EXPECT_GE(p.at("micro_batch").get<int>(), 0);
  EXPECT_GT(p.at("ops_drawn").value("attention", 0), 0) << p.at("ops_drawn");
  std::string lanes;
  for (const auto& l : p.at("lanes")) lanes += l.get<std::string>() + "|";
  EXPECT_NE(lanes.find("GPU 0 compute|"), std::string::npos) << lanes;
  EXPECT_NE(lanes.find("GPU 0 cp-send|"), std::string::npos) << lanes;
  const double t0 = p.at("t0_us");
  const auto busy = compute_spans(trace);
  for (const auto& [rank, gaps] : p.at("waiting_us").items())
    for (const auto& g : gaps)
      for (const auto& [s, f] : busy.at(std::stoi(rank))) {
        const double gs = t0 + g[0].get<double>(), gf = t0 + g[1].get<double>();
        ASSERT_FALSE(s < gf - 1e-6 && f > gs + 1e-6) << "GPU " << rank << " drawn waiting over [" << gs << ", " << gf
                                                     << "] while an op runs on its compute stream over [" << s << ", " << f << "]";
      }
  std::map<std::pair<int, int>, std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") names[{e["pid"], e["tid"]}] = e["args"]["name"];
  std::map<int, double> first_bwd;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || names[{e["pid"], e["tid"]}] != "compute") continue;
    const auto& a = e["args"];
    if (a["layer"] != p.at("layer") || a["micro_batch"] != p.at("micro_batch") || a["phase"] != "bwd") continue;
    const int r = e["pid"].get<int>() - 1;
    first_bwd[r] = first_bwd.count(r) ? std::min(first_bwd[r], e["ts"].get<double>()) : e["ts"].get<double>();
  }
  ASSERT_FALSE(first_bwd.empty());
  EXPECT_EQ(p.at("backward_starts_us").size(), p.at("ranks").size());
  for (const auto& [rank, x] : p.at("backward_starts_us").items())
    EXPECT_NEAR(x.get<double>(), first_bwd.at(std::stoi(rank)) - t0, 1e-6) << "GPU " << rank;
}

TEST_F(PlotTest, TimelineDefaultsShowTheLayersOwnWork) {
  // A whole step (other layers run between a layer's forward and backward, a layer's gradient
  // sync belongs to no micro-batch) and one attention layer (the host launches the backward's
  // kernels long before the GPU runs them).
  ASSERT_EQ(in_source(kCpsim + " run scenarios/quickstart.yaml --set training.seq_len=16K --engine analytic -q --trace " +
                          p("step.json")).rc, 0);
  ASSERT_EQ(in_source(kCpsim + " run scenarios/anchor-128k-ring-zigzag.yaml --set simulation.scope=attention-layer "
                          "--set training.seq_len=16K --engine analytic -q --trace " + p("al.json")).rc, 0);
  plot("timeline " + p("step.json") + " --data " + p("step-data.json"), "timeline-step");
  plot("timeline " + p("al.json") + " --data " + p("al-data.json"), "timeline-al");
  const auto step = nlohmann::json::parse(slurp(p("step-data.json")));
  check_timeline(nlohmann::json::parse(slurp(p("step.json"))), step);
  check_timeline(nlohmann::json::parse(slurp(p("al.json"))), nlohmann::json::parse(slurp(p("al-data.json"))));
  // The other layers' work between this layer's forward and backward is drawn as such.
  for (const auto& [rank, us] : step.at("panels").at(0).at("other_work_us").items()) EXPECT_GT(us.get<double>(), 0) << rank;
  std::string legend;
  for (const auto& l : step["legend"]) legend += l.get<std::string>() + "|";
  EXPECT_NE(legend.find("other layers / micro-batches"), std::string::npos) << legend;
}

TEST_F(PlotTest, HeatmapNeverCallsAPointThatDoesNotFitBest) {
  // One attention layer never runs out of memory, so the bundled sweeps above have no OOM cell:
  // a results.csv of whole steps written here, the fastest point out of memory.
  fs::create_directories(p("oom"));
  std::ofstream(p("oom/results.csv")) << "id,status,reason,training.seq_len,parallel.cp,step_time_s,fits\n"
                                         "0000,ok,,64K,4,1.5,true\n0001,ok,,64K,8,0.9,false\n"
                                         "0002,ok,,128K,4,3.0,true\n0003,ok,,128K,8,2.0,true\n";
  plot("heatmap " + p("oom") + " --x parallel.cp --y training.seq_len --best row --data " + p("oom.json"), "heatmap-oom");
  const auto hm = nlohmann::json::parse(slurp(p("oom.json")));
  int oom = 0;
  for (const auto& c : hm["cells"]) {
    SCOPED_TRACE(c.dump());
    const bool fits = !(c["row"] == "64K" && c["column"] == "8");
    EXPECT_EQ(c["oom"].get<bool>(), !fits);
    oom += !fits;
    // Each row's best is its fastest point that fits: 1.5 s at 64K (not the 0.9 s OOM), 2.0 s at 128K
    // (in ms, as the heatmap always prints times).
    EXPECT_EQ(c["best"].get<bool>(), c["value"].get<double>() == 1500 || c["value"].get<double>() == 2000);
  }
  EXPECT_EQ(oom, 1);
}

TEST_F(PlotTest, BadInputsExitTwo) {
  std::ofstream(p("not-a-trace.json")) << "{\"a\": 1}\n";
  fs::create_directories(p("empty-dir"));
  EXPECT_EQ(in_source(kPlot + " nosuchplot x").rc, 2);
  EXPECT_EQ(in_source(kPlot + " timeline " + p("not-a-trace.json") + " -o " + p("bad")).rc, 2);
  EXPECT_EQ(in_source(kPlot + " timeline " + p("missing.json") + " -o " + p("bad")).rc, 2);
  EXPECT_EQ(in_source(kPlot + " compare " + p("not-a-trace.json") + " -o " + p("bad")).rc, 2);
  EXPECT_EQ(in_source(kPlot + " sweep " + p("empty-dir") + " -o " + p("bad")).rc, 2);
  EXPECT_EQ(in_source(kPlot + " bench " + p("empty-dir") + " -o " + p("bad")).rc, 2);
  EXPECT_FALSE(fs::exists(p("bad.png")));
}

}  // namespace

}  // namespace CPSIM_TEST_TU
