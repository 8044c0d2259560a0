// `cpsim sweep --pivot`: a cell shows one point. Points that differ in a swept key besides the
// two shown (scheme and layout both swept, the pivot across the scheme) get columns of their
// own, as the plot tools refuse to draw one point over another.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "app/sweep/pivot.hpp"
#include "app/sweep/results_csv.hpp"
#include "support/cli.hpp"
#include "support/temp_dir.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::app::sweep;

namespace {

class PivotTest : public cpsim::test::TempDir {
 protected:
  /// A results.csv with the swept keys `swept` and rows of (values..., step time).
  std::string csv(const std::vector<std::string>& swept, const std::vector<std::vector<std::string>>& rows) {
    const auto header = csv_header(swept);
    std::vector<Row> rs;
    int id = 0;
    for (const auto& vals : rows) {
      Row r;
      r.id = std::to_string(id++);
      r.status = "ok";
      for (size_t i = 0; i < swept.size(); ++i) r.cells[swept[i]] = vals[i];
      r.cells["step_time_s"] = vals.back();
      rs.push_back(r);
    }
    std::vector<const Row*> ptrs;
    for (const auto& r : rs) ptrs.push_back(&r);
    const std::string path = (dir_ / "results.csv").string();
    cpsim::cli::write(path, csv_text(header, ptrs));
    return path;
  }
};

TEST_F(PivotTest, PointsDifferingInAnotherSweptKeyKeepTheirOwnColumns) {
  // The zipped schedules of sweeps/schedules-x-seqlen.yaml: scheme, layout and Ulysses degree.
  const std::vector<std::string> swept = {"training.seq_len", "parallel.attention.scheme", "parallel.attention.layout",
                                          "parallel.attention.ulysses_degree"};
  const std::string path = csv(swept, {{"128K", "ring", "zigzag", "0", "1.596"},
                                       {"128K", "ring", "contiguous", "0", "2.3"},
                                       {"128K", "usp", "zigzag", "2", "1.2"},
                                       {"256K", "ring", "zigzag", "0", "5.5"},
                                       {"256K", "ring", "contiguous", "0", "8.25"},
                                       {"256K", "usp", "zigzag", "2", "4.5"}});
  const std::string t = pivot_table(path, "training.seq_len,parallel.attention.scheme");
  SCOPED_TRACE(t);
  // Both ring points are shown, each in a column named by the key that tells them apart; the
  // Ulysses degree, fixed by the scheme, is not needed.
  EXPECT_NE(t.find("parallel.attention.scheme/parallel.attention.layout (columns)"), std::string::npos);
  EXPECT_NE(t.find("ring/zigzag"), std::string::npos);
  EXPECT_NE(t.find("ring/contiguous"), std::string::npos);
  EXPECT_NE(t.find("usp/zigzag"), std::string::npos);
  EXPECT_EQ(t.find("ulysses_degree"), std::string::npos);
  for (const char* cell : {"1.6 s", "2.3 s", "1.2 s", "5.5 s", "8.25 s", "4.5 s"})
    EXPECT_NE(t.find(cell), std::string::npos) << cell;
  // Across the layout, the scheme tells apart the zig-zag points (not the Ulysses degree too).
  const std::string l = pivot_table(path, "training.seq_len,parallel.attention.layout");
  EXPECT_NE(l.find("zigzag/ring"), std::string::npos) << l;
  EXPECT_NE(l.find("zigzag/usp"), std::string::npos) << l;
  EXPECT_EQ(l.find("zigzag/usp/"), std::string::npos) << l;
}

TEST_F(PivotTest, OnePointPerCellKeepsTheLabels) {
  const std::string path = csv({"parallel.attention.scheme", "parallel.cp"},
                               {{"ring", "4", "0.002"}, {"ring", "8", "0.001"}, {"allgather", "4", "0.003"}});
  const std::string t = pivot_table(path, "parallel.attention.scheme,parallel.cp");
  EXPECT_NE(t.find("parallel.attention.scheme (rows) x parallel.cp (columns)"), std::string::npos) << t;
  EXPECT_EQ(t.find('/'), std::string::npos) << t;
  EXPECT_NE(t.find("\nallgather"), std::string::npos) << t;
  // allgather at CP 8 was not run: its cell says so rather than staying blank.
  const std::string last = t.substr(t.find("\nallgather"));
  EXPECT_EQ(last.substr(last.size() - 3), " -\n") << t;
}

}  // namespace

}  // namespace CPSIM_TEST_TU
