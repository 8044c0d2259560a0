// `cpsim diff`: two run results (quickstart with ring and with all-gather CP) and two sweep
// directories compared with deltas that are exactly B - A, and its refusals of other input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::cli;
namespace fs = std::filesystem;

/// This process's scratch directory, removed when the test binary exits.
struct DiffScratch {
  fs::path dir = fs::temp_directory_path() / ("cpsim-diff-" + std::to_string(::getpid()));
  DiffScratch() { fs::create_directories(dir); }
  ~DiffScratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

fs::path scratch(const std::string& name) {
  static const DiffScratch s;
  return s.dir / name;
}

/// quickstart (ring) as A, the same with all-gather CP as B; made once per test binary.
const std::pair<fs::path, fs::path>& quickstart_results() {
  static const auto paths = [] {
    const fs::path a = scratch("a.json"), b = scratch("b.json");
    const std::string base = kCpsim + " run " CPSIM_SOURCE_DIR "/scenarios/quickstart.yaml --engine analytic -q --json ";
    const Output ra = run(base + a.string());
    const Output rb = run(base + b.string() + " --set parallel.attention.scheme=allgather");
    EXPECT_EQ(ra.rc, 0) << ra.text;  // quickstart is out of memory, and still a result
    EXPECT_EQ(rb.rc, 0) << rb.text;
    return std::pair{a, b};
  }();
  return paths;
}

TEST(DiffCli, ResultDeltasAreExactlyBMinusA) {
  const auto& [a, b] = quickstart_results();
  const fs::path out = scratch("diff.json");
  const Output o = run(kCpsim + " diff " + a.string() + " " + b.string() + " --json " + out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  const auto ja = nlohmann::json::parse(slurp(a)), jb = nlohmann::json::parse(slurp(b));
  const auto d = nlohmann::json::parse(slurp(out));
  std::map<std::string, nlohmann::json> by_pointer;
  for (const auto& m : d.at("metrics")) by_pointer[m.at("pointer").get<std::string>()] = m;
  // Step time: the two results' own numbers, their exact difference and its percentage.
  const double sa = ja.at("step_time_s").get<double>(), sb = jb.at("step_time_s").get<double>();
  ASSERT_NE(sa, sb);  // ring and all-gather CP must not tie, or the test proves nothing
  const auto& st = by_pointer.at("/step_time_s");
  EXPECT_EQ(st.at("a").get<double>(), sa);
  EXPECT_EQ(st.at("b").get<double>(), sb);
  EXPECT_EQ(st.at("delta").get<double>(), sb - sa);
  EXPECT_DOUBLE_EQ(st.at("delta_pct").get<double>(), 100 * (sb - sa) / sa);
  // Every compared quantity of both results, communication by kind included, is B - A.
  for (const char* p : {"/tokens_per_s", "/tflops_per_gpu", "/mfu", "/memory/peak_bytes_per_rank",
                        "/breakdown/compute_s", "/breakdown/exposed_comm_s", "/breakdown/idle_s",
                        "/communication/cp/total_s", "/communication/cp/exposed_s", "/communication/dp/exposed_s",
                        "/critical_path/length_s", "/critical_path/by_category_s/attention",
                        "/time_by_category_s/collective"}) {
    const nlohmann::json::json_pointer ptr(p);
    ASSERT_TRUE(by_pointer.count(p)) << p;
    EXPECT_EQ(by_pointer[p].at("delta").get<double>(), jb.at(ptr).get<double>() - ja.at(ptr).get<double>()) << p;
  }
  // The table: the rows a reader looks for, the changed key, the verdicts.
  for (const char* s : {"step time, s", "throughput, tokens/s", "MFU, %", "peak memory per GPU, GB",
                        "cp comm total, s", "cp comm exposed, s", "tp comm exposed, s", "critical path, s",
                        "parallel.attention.scheme: ring -> allgather", "memory verdict A: ", "B - A"})
    EXPECT_NE(o.text.find(s), std::string::npos) << s << "\n" << o.text;
  char line[64];
  std::snprintf(line, sizeof line, "%+.4f", sb - sa);
  EXPECT_NE(o.text.find(line), std::string::npos) << line << "\n" << o.text;
}

std::string sweep_csv(const std::vector<std::array<std::string, 4>>& rows) {
  std::string t = "id,status,reason,simulation.engine,parallel.cp,step_time_s,tokens_per_s\n";
  for (const auto& r : rows) t += r[0] + "," + r[1] + ",,analytic," + r[2] + "," + r[3] + ",1\n";
  return t;
}

TEST(DiffCli, SweepsPairPointsBySweptValues) {
  const fs::path a = scratch("sweep-a"), b = scratch("sweep-b");
  fs::create_directories(a / "runs");
  fs::create_directories(b / "runs");
  // B gained a cp value at the front: its ids moved, its points did not.
  write(a / "results.csv", sweep_csv({{"0000", "ok", "2", "4.0"}, {"0001", "ok", "4", "2.5"}, {"0002", "failed", "8", ""}}));
  // B also swept the scheme (one value): that is what changed, so points pair on the cp alone;
  // the engine is the same everywhere, so it names no point.
  write(b / "results.csv",
        "id,status,reason,simulation.engine,parallel.cp,parallel.attention.scheme,step_time_s\n"
        "0000,ok,,analytic,1,allgather,9.0\n0001,ok,,analytic,4,allgather,2.0\n0002,ok,,analytic,8,allgather,1.5\n");
  const fs::path out = scratch("sweep-diff.json");
  const Output o = run(kCpsim + " diff " + a.string() + " " + b.string() + " --json " + out.string());
  ASSERT_EQ(o.rc, 0) << o.text;
  const auto d = nlohmann::json::parse(slurp(out));
  EXPECT_EQ(d.at("paired_by"), nlohmann::json::array({"parallel.cp"}));
  ASSERT_EQ(d.at("points").size(), 2u) << d.dump(1);
  const auto& p4 = d["points"][0];
  EXPECT_EQ(p4.at("point"), "parallel.cp=4");
  EXPECT_EQ(p4.at("delta_s").get<double>(), 2.0 - 2.5);
  EXPECT_DOUBLE_EQ(p4.at("delta_pct").get<double>(), -20.0);
  EXPECT_TRUE(d["points"][1].at("delta_s").is_null());  // A's cp=8 failed
  EXPECT_EQ(d.at("only_in_a"), nlohmann::json::array({"parallel.cp=2"}));
  EXPECT_EQ(d.at("only_in_b"), nlohmann::json::array({"parallel.cp=1"}));
  for (const char* s : {"-0.5000", "-20.00", "failed", "only in A:", "only in B:"})
    EXPECT_NE(o.text.find(s), std::string::npos) << s << "\n" << o.text;
}

TEST(DiffCli, RefusesWhatIsNotAResultOrASweepWithExitTwo) {
  const auto& [a, b] = quickstart_results();
  const fs::path text = scratch("notes.txt"), other = scratch("collective.json"), bad_csv = scratch("bad-sweep");
  write(text, "step time 8 s\n");
  write(other, R"({"results": []})");
  fs::create_directories(bad_csv);
  write(bad_csv / "results.csv", "id,status\n0000,ok\n");
  struct Case {
    std::string args, says;
  } cases[] = {
      {text.string() + " " + b.string(), text.string() + ": not valid JSON (expected a cpsim result JSON"},
      {a.string() + " " + other.string(), other.string() + ": no key 'step_time_s'"},
      {a.string() + " " + scratch("missing.json").string(), "missing.json: no such file"},
      {a.string() + " " + bad_csv.string(), bad_csv.string() + ": a directory; expected a result JSON file, as"},
      {bad_csv.string() + " " + scratch("").string(), "results.csv: no column 'step_time_s'"},
      {scratch("").string() + " " + bad_csv.string(), ": no results.csv (expected a `cpsim sweep` output directory"},
  };
  for (const auto& c : cases) {
    const Output o = run(kCpsim + " diff " + c.args);
    EXPECT_EQ(o.rc, 2) << c.args << "\n" << o.text;
    EXPECT_NE(o.text.find(c.says), std::string::npos) << c.args << "\n" << o.text;
  }
}

}  // namespace CPSIM_TEST_TU
