// `cpsim run --trace`: the Chrome trace-event JSON that Perfetto and chrome://tracing open.
// Runs the built binary on a bundled scenario cut down to one attention layer at 16K tokens.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

#include "support/cli_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;

namespace {

const std::string kScenario = CPSIM_SOURCE_DIR "/scenarios/anchor-128k-ring-zigzag.yaml";

int run(const std::string& cmd) {
  const int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

class TraceTest : public cpsim::test::CliDir {
 protected:
  /// Runs the scenario (one attention layer, 16K tokens) and returns its trace.
  json trace(const std::string& extra) {
    const fs::path out = dir_ / "trace.json";
    fs::remove(out);
    const std::string cmd = kCpsim + " run " + kScenario +
                            " --set simulation.scope=attention-layer --set training.seq_len=16K"
                            " --engine analytic -q --trace " + out.string() + " " + extra;
    EXPECT_EQ(run(cmd), 0) << cmd;
    return load("trace.json");  // throws on invalid JSON, failing the test
  }
};

struct Slice {
  double ts, end;
  std::string name;
  json args;
};

TEST_F(TraceTest, HasProcessesThreadsOpsAndFlows) {
  const json t = trace("");
  ASSERT_TRUE(t.contains("traceEvents"));
  ASSERT_TRUE(t["traceEvents"].is_array());
  std::map<int, std::string> procs;
  std::map<std::pair<int, int>, std::string> threads;
  std::map<std::pair<int, int>, std::vector<Slice>> tracks;
  std::map<uint64_t, json> starts, finishes;
  size_t transfers = 0, attention = 0, critical = 0;
  double last_end = -1;
  bool last_critical = false;
  for (const auto& e : t["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph")) << e;
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name") procs[e["pid"]] = e["args"]["name"];
      if (e["name"] == "thread_name") threads[{e["pid"], e["tid"]}] = e["args"]["name"];
      continue;
    }
    if (ph == "s") {
      starts[e["id"]] = e;
      continue;
    }
    if (ph == "f") {
      EXPECT_EQ(e.value("bp", ""), "e");
      finishes[e["id"]] = e;
      continue;
    }
    ASSERT_EQ(ph, "X") << e;
    for (const char* k : {"name", "cat", "pid", "tid", "ts", "dur", "args"}) ASSERT_TRUE(e.contains(k)) << k << " in " << e;
    const int pid = e["pid"], tid = e["tid"];
    EXPECT_GE(pid, 1) << "pid 0 is the kernel's in Perfetto";
    EXPECT_GE(tid, 1) << "tid 0 is the kernel's in Perfetto";
    EXPECT_GE(e["dur"].get<double>(), 0);
    const json& a = e["args"];
    for (const char* k : {"op", "layer", "phase", "step", "rank"}) EXPECT_TRUE(a.contains(k)) << k << " in " << e;
    EXPECT_EQ(a["rank"].get<int>(), pid - 1);
    EXPECT_FALSE(e["name"].get<std::string>().empty());
    if (a.contains("bytes")) {
      ++transfers;
      EXPECT_GT(a["bytes"].get<double>(), 0);
      const std::string n = e["name"];
      const bool send = n.ends_with(" send");
      EXPECT_TRUE(send || n.ends_with(" recv")) << n;
      EXPECT_EQ(a[send ? "src" : "dst"].get<int>(), pid - 1) << e;
    }
    if (e["cat"] == "attention") {
      ++attention;
      ASSERT_TRUE(a.contains("shape")) << e;
      EXPECT_GT(a["shape"]["q_len"].get<int>(), 0);
      EXPECT_GT(a["shape"]["kv_len"].get<int>(), 0);
    }
    const double end = e["ts"].get<double>() + e["dur"].get<double>();
    if (a.value("critical", false)) ++critical;
    if (end > last_end) {
      last_end = end;
      last_critical = a.value("critical", false);
    }
    tracks[{pid, tid}].push_back({e["ts"], end, e["name"], a});
  }
  EXPECT_EQ(procs.size(), 8u);
  for (const auto& [pid, name] : procs) EXPECT_EQ(name, "GPU " + std::to_string(pid - 1));
  for (const auto& [key, _] : tracks) EXPECT_TRUE(threads.count(key)) << "no thread_name for " << key.first << "/" << key.second;
  EXPECT_GT(attention, 0u);
  EXPECT_GT(transfers, 0u);
  EXPECT_GT(critical, 0u);
  EXPECT_TRUE(last_critical) << "the op that ends last is on the critical path";

  // A track is a stream: its slices never overlap, so viewers nest nothing and drop nothing;
  // the gaps between them are the idle time.
  for (auto& [key, v] : tracks) {
    std::sort(v.begin(), v.end(), [](const Slice& a, const Slice& b) { return a.ts < b.ts; });
    for (size_t i = 1; i < v.size(); ++i) EXPECT_LE(v[i - 1].end, v[i].ts + 1e-6) << v[i - 1].name << " / " << v[i].name;
  }

  // A flow arrow per transfer, from inside its send slice to inside its receive slice.
  EXPECT_EQ(starts.size() * 2, transfers);
  EXPECT_EQ(starts.size(), finishes.size());
  auto inside = [&](const json& f, const char* suffix) {
    const auto it = tracks.find({f["pid"], f["tid"]});
    if (it == tracks.end()) return false;
    const double ts = f["ts"];
    return std::any_of(it->second.begin(), it->second.end(), [&](const Slice& s) {
      return s.args["op"] == f["id"] && s.name.ends_with(suffix) && s.ts <= ts && ts <= s.end;
    });
  };
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(finishes.count(id)) << "flow " << id << " has no end";
    EXPECT_TRUE(inside(s, " send")) << s;
    EXPECT_TRUE(inside(finishes[id], " recv")) << finishes[id];
    EXPECT_EQ(s["name"], finishes[id]["name"]);
    EXPECT_EQ(s["cat"], finishes[id]["cat"]);
  }
}

TEST_F(TraceTest, KeepsOnlyTheChosenRanksAndLayers) {
  const json t = trace("--trace-ranks 0-1");
  std::set<int> pids;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "X" || e["ph"] == "s" || e["ph"] == "f") pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{1, 2}));
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "s") {
      EXPECT_TRUE(e["pid"] == 1 || e["pid"] == 2);
    }
  }

  const json none = trace("--trace-layers 0");  // the attention layer of this model is layer 3
  size_t ops = 0;
  for (const auto& e : none["traceEvents"])
    if (e["ph"] == "X" && e["args"]["layer"].get<int>() >= 0) ++ops;
  EXPECT_EQ(ops, 0u);
  const json three = trace("--trace-layers 3");
  size_t kept = 0;
  for (const auto& e : three["traceEvents"]) kept += e["ph"] == "X";
  EXPECT_GT(kept, 0u);
}

}  // namespace

TEST_F(TraceTest, FixedOverheadsAreTheirOwnSlices) {
  // platform runtime: (docs/cost-model.md): host_launch before every attention kernel, step_sync
  // before every ring step's kernel after the first; `runtime: off` leaves none.
  auto count = [](const json& t) {
    std::map<std::string, int> n;
    for (const auto& e : t["traceEvents"])
      if (e.value("ph", "") == "X" && e.value("cat", "") == "overhead") n[e["name"]]++;
    return n;
  };
  const auto on = count(trace(""));
  EXPECT_GT(on.count("host_launch") ? on.at("host_launch") : 0, 0);
  EXPECT_GT(on.count("step_sync") ? on.at("step_sync") : 0, 0);
  // One step_sync per ring step after the first, per rank, per direction: never per tile.
  EXPECT_LE(on.count("step_sync") ? on.at("step_sync") : 0,
            on.count("host_launch") ? on.at("host_launch") : 0);
  EXPECT_TRUE(count(trace("--set platform.runtime=off")).empty());
}

}  // namespace CPSIM_TEST_TU
