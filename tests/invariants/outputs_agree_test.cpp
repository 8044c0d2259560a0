// Agreement of outputs: for the same point, the summary, the --json, the sweep's results.csv and
// its per-point JSON, `--pivot`, and the plots' data (heatmap cells, the timeline's span, the
// memory bars) read the same step time, throughput, memory and exposed communication. Cases:
// output_cases.hpp, one sweep holding them all; a failure names the case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/sweep/results_csv.hpp"
#include "invariants/output_cases.hpp"
#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;
using namespace cpsim::test::outputs;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kPlot = "/usr/bin/python3 " CPSIM_SOURCE_DIR "/tools/cpsim_plot.py";

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// The pivot's rendering of a step time (sim/app/sweep/pivot.cpp).
std::string human_time(double s) {
  return s >= 1 ? fmt("%.3g s", s) : s >= 1e-3 ? fmt("%.3g ms", s * 1e3) : fmt("%.3g us", s * 1e6);
}

/// The value after the summary's label `label` (two-space indent, padded to 28), or "".
std::string summary_value(const std::string& summary, const std::string& label) {
  std::istringstream in(summary);
  std::string line;
  const std::string head = "  " + label + std::string(label.size() < 28 ? 28 - label.size() : 1, ' ');
  while (std::getline(in, line))
    if (line.rfind(head, 0) == 0) return line.substr(head.size());
  return "";
}

/// Splits a pivot line at runs of two or more spaces.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size()) break;
    size_t j = line.find("  ", i);
    if (j == std::string::npos) j = line.size();
    out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

class OutputsAgree : public cpsim::test::TempDir {
 protected:
  void SetUp() override {
    TempDir::SetUp();
    ASSERT_TRUE(fs::exists(kCpsim)) << "build the cpsim binary first: " << kCpsim;
    cases_ = cases();
    write(dir_ / "cases.yaml", sweep_yaml(cases_));
  }
  /// Runs the cases' sweep (-j 2) with `--pivot PIVOT`, returns its stdout.
  std::string sweep(const std::string& pivot) {
    const std::string out = (dir_ / "pivot.txt").string();
    const Output o = run(kCpsim + " sweep " + (dir_ / "cases.yaml").string() + " -j 2 -q -o " + (dir_ / "out").string() +
                         " --pivot " + pivot + " > " + out);
    EXPECT_EQ(o.rc, 0) << o.text;
    return slurp(out);
  }
  json point(size_t i) const {
    char id[32];
    std::snprintf(id, sizeof id, "%04zu", i);
    return json::parse(slurp(dir_ / "out" / "runs" / (std::string(id) + ".json")));
  }
  std::vector<Case> cases_;
};

TEST_F(OutputsAgree, SummaryJsonResultsCsvAndPivotReadTheSameNumbers) {
  const std::string pivot = sweep("training.seq_len,parallel.attention.scheme");
  auto rows = cpsim::app::sweep::read_rows((dir_ / "out" / "results.csv").string());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  ASSERT_EQ(rows.size(), cases_.size());
  std::map<std::string, std::multiset<std::string>> want_by_row;  // pivot row -> cells
  for (size_t i = 0; i < cases_.size(); ++i) {
    const Case& c = cases_[i];
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.text());
    // `cpsim run` alone on the same point: its JSON is the sweep's, but for the wall clock.
    const std::string jpath = (dir_ / ("run-" + std::to_string(i) + ".json")).string();
    const std::string spath = (dir_ / ("run-" + std::to_string(i) + ".txt")).string();
    const Output o = run(kCpsim + " run " + kBase + c.sets() + " --json " + jpath + " > " + spath);
    ASSERT_EQ(o.rc, 0) << o.text;
    const std::string alone = slurp(jpath);
    const json j = json::parse(alone);
    const std::string swept = slurp(dir_ / "out" / "runs" / (rows[i].id + ".json"));
    if (json_without_wall_time(alone) != json_without_wall_time(swept))
      ADD_FAILURE() << "the sweep's JSON is not `cpsim run`'s: " << json::diff(json::parse(swept), j).dump(1);
    const double step = j["step_time_s"], tps = j["tokens_per_s"], exposed = j["breakdown"]["exposed_comm_s"];
    const double peak = j["memory"]["peak_bytes_per_rank"];
    const bool fits = j["memory"]["fits"];
    // The summary.
    const std::string summary = slurp(spath);
    SCOPED_TRACE(summary);
    EXPECT_EQ(summary_value(summary, c["simulation.scope"] == "step" ? "step time" : "time"), fmt("%.4f s", step));
    if (c["simulation.scope"] != "attention-layer") {
      EXPECT_EQ(summary_value(summary, "throughput"), fmt("%.0f tokens/s", tps));
    }
    EXPECT_EQ(summary_value(summary, "exposed communication").substr(0, fmt("%.4f s", exposed).size() + 1),
              fmt("%.4f s", exposed) + " ");
    const std::string verdict = j["memory"]["verdict"];
    EXPECT_EQ(summary_value(summary, "memory per GPU"), verdict);
    // A fit with under 5 % of the GPU's memory free is "tight" (model/memory_verdict.hpp).
    const double cap = j["memory"]["capacity_bytes"];
    const char* word = !fits ? "OOM: " : cap - peak < 0.05 * cap ? "tight: " : "fits: ";
    EXPECT_EQ(verdict.rfind(word + fmt("%.1f GB", peak / 1e9), 0), 0u) << verdict;
    // results.csv.
    const auto& r = rows[i];
    EXPECT_EQ(r.status, "ok");
    for (size_t k = 0; k < kKeys.size(); ++k) EXPECT_EQ(r.cells.at(kKeys[k]), c.values[k]) << kKeys[k];
    EXPECT_EQ(r.cells.at("step_time_s"), fmt("%.9g", step));
    EXPECT_EQ(r.cells.at("tokens_per_s"), fmt("%.9g", tps));
    EXPECT_EQ(r.cells.at("exposed_comm_s"), fmt("%.9g", exposed));
    EXPECT_EQ(r.cells.at("peak_bytes_per_rank"), fmt("%.9g", peak));
    EXPECT_EQ(r.cells.at("peak_mem_gb"), fmt("%.4f", peak * 1e-9));
    EXPECT_EQ(r.cells.at("fits"), fits ? "true" : "false");
    want_by_row[c["training.seq_len"]].insert(human_time(step));
  }
  // The pivot: each row shows exactly its points' step times, none merged into another's cell.
  SCOPED_TRACE(pivot);
  std::istringstream in(pivot);
  std::string line;
  std::getline(in, line);  // title
  std::getline(in, line);  // column labels
  std::map<std::string, std::multiset<std::string>> got_by_row;
  while (std::getline(in, line)) {
    auto cells = cells_of(line);
    ASSERT_FALSE(cells.empty());
    const std::string row = cells.front();
    for (size_t k = 1; k < cells.size(); ++k)
      if (cells[k] != "-") got_by_row[row].insert(cells[k]);
  }
  EXPECT_EQ(got_by_row, want_by_row);
}

TEST_F(OutputsAgree, PlotDataReadTheSameNumbers) {
  if (run("/usr/bin/python3 -c 'import matplotlib'").rc != 0) GTEST_SKIP() << "/usr/bin/python3 has no matplotlib";
  sweep("training.seq_len,simulation.scope");
  // Heatmap of the grid (one attention layer, analytic): each cell is its point's step time and
  // exposed communication, in the unit it names.
  for (const char* metric : {"step_time_s", "exposed_comm_s"}) {
    SCOPED_TRACE(metric);
    const std::string data = (dir_ / (std::string(metric) + ".json")).string();
    const Output o = run(kPlot + " heatmap " + (dir_ / "out").string() + " --where simulation.scope=attention-layer"
                         " --where simulation.engine=analytic --x training.seq_len --y schedule --metric " + metric +
                         " -o " + (dir_ / metric).string() + " --data " + data);
    ASSERT_EQ(o.rc, 0) << o.text;
    const json hm = json::parse(slurp(data));
    const std::string unit = hm["cells"][0]["unit"];
    const double scale = unit == "s" ? 1 : unit == "ms" ? 1e3 : 0;
    ASSERT_GT(scale, 0) << unit;
    std::multiset<std::string> got, want;
    for (const auto& c : hm["cells"]) got.insert(c["column"].get<std::string>() + " " + fmt("%.9g", c["value"].get<double>()));
    for (size_t i = 0; i < cases_.size(); ++i) {
      const Case& c = cases_[i];
      if (c["simulation.scope"] != "attention-layer" || c["simulation.engine"] != "analytic") continue;
      const json j = point(i);
      const double v = std::string(metric) == "step_time_s" ? j["step_time_s"].get<double>()
                                                            : j["breakdown"]["exposed_comm_s"].get<double>();
      want.insert(c["training.seq_len"] + " " + fmt("%.9g", v * scale));
    }
    EXPECT_EQ(got, want);
  }
  // Timeline: an attention layer's trace spans its step time (every op of it is drawn).
  for (size_t i = 0; i < cases_.size(); ++i) {
    const Case& c = cases_[i];
    if (c["simulation.scope"] != "attention-layer" || c["simulation.engine"] != "simgrid") continue;
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.text());
    const std::string trace = (dir_ / "trace.json").string(), jp = (dir_ / "tl-run.json").string();
    ASSERT_EQ(run(kCpsim + " run " + kBase + c.sets() + " -q --json " + jp + " --trace " + trace).rc, 0);
    const Output o = run(kPlot + " timeline " + trace + " -o " + (dir_ / "tl").string() + " --data " + (dir_ / "tl.json").string());
    ASSERT_EQ(o.rc, 0) << o.text;
    const json tl = json::parse(slurp(dir_ / "tl.json"));
    const double step = json::parse(slurp(jp))["step_time_s"];
    EXPECT_NEAR(tl["panels"][0]["span_us"].get<double>(), step * 1e6, step * 1e6 * 1e-9);
    break;  // one trace: the plot's Python start-up is most of this test's time
  }
  // Memory plot: its bar for a whole step is that step's memory in the run's JSON.
  for (size_t i = 0; i < cases_.size(); ++i) {
    const Case& c = cases_[i];
    if (c["simulation.scope"] != "step") continue;
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.text());
    std::string sets;
    for (size_t k = 0; k < kKeys.size(); ++k) sets += " --set " + kKeys[k] + "=" + c.values[k];
    const Output o = run(kPlot + " memory " + kBase + " --cpsim " + kCpsim + sets + " -o " + (dir_ / "mem").string() +
                         " --data " + (dir_ / "mem.json").string());
    ASSERT_EQ(o.rc, 0) << o.text;
    const json bars = json::parse(slurp(dir_ / "mem.json"));
    ASSERT_EQ(bars.size(), 1u) << bars.dump(1);
    double total = 0;
    for (const auto& [k, v] : bars[0]["parts"].items()) total += v.get<double>();
    const json j = point(i);
    const double peak = j["memory"]["peak_bytes_per_rank"].get<double>() / 1e9;
    EXPECT_NEAR(total, peak, 1e-6) << bars.dump(1);
    EXPECT_NEAR(bars[0]["total"].get<double>(), peak, 1e-9) << bars.dump(1);
    EXPECT_EQ(bars[0]["fits"].get<bool>(), j["memory"]["fits"].get<bool>());
  }
}

TEST_F(OutputsAgree, MemoryVerdictIsOfWhatTheScopeSimulates) {
  // A step or a layer reports the step's memory, as `cpsim memory` does; an attention layer
  // reports its own tensors: CP buffers as the step counts them, no weights, optimizer states,
  // other layers' activations or logits, and so never more than the step.
  const auto cs = cases();
  for (size_t i = 0; i < cs.size(); ++i) {
    const Case& c = cs[i];
    SCOPED_TRACE("case " + std::to_string(i) + ": " + c.text());
    const std::string rj = (dir_ / "run.json").string(), mj = (dir_ / "mem.json").string();
    ASSERT_EQ(run(kCpsim + " run " + kBase + c.sets() + " -q --json " + rj).rc, 0);
    const Output m = run(kCpsim + " memory " + kBase + c.sets() + " --json " + mj + " > /dev/null");
    ASSERT_EQ(m.rc, 0) << m.text;
    const json got = json::parse(slurp(rj))["memory"], step = json::parse(slurp(mj))["peak"];
    if (c["simulation.scope"] != "attention-layer") {
      EXPECT_EQ(got["peak_bytes_per_rank"], step["peak_bytes"]);
      EXPECT_EQ(got["fits"], step["fits"]);
      EXPECT_EQ(got["terms"], step["terms"]);
      continue;
    }
    EXPECT_LT(got["peak_bytes_per_rank"].get<double>(), step["peak_bytes"].get<double>());
    auto term = [](const json& terms, const std::string& name) {
      for (const auto& t : terms)
        if (t["name"] == name) return t["bytes"].get<double>();
      return -1.0;
    };
    EXPECT_EQ(term(got["terms"], "context-parallel buffers"), term(step["terms"], "context-parallel buffers"));
    for (const auto& t : got["terms"]) {
      const std::string name = t["name"];
      // Beside the layer's tensors, what every GPU holds: the CUDA context, NCCL's buffers, the
      // cuBLAS workspaces and the allocator's free blocks (model/allocator.hpp).
      EXPECT_TRUE(name.rfind("attention ", 0) == 0 || name == "context-parallel buffers" ||
                  name.rfind("CUDA context", 0) == 0 || name.rfind("NCCL buffers", 0) == 0 ||
                  name == "cuBLAS workspaces" || name.rfind("allocator: ", 0) == 0)
          << "an attention layer's memory holds '" << name << "'";
    }
  }
}

}  // namespace

}  // namespace CPSIM_TEST_TU
