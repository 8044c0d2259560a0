// `cpsim plan`'s text (app/plan_report.hpp): columns as wide as their data that a long label
// cannot shift, and "why the others lost" with the near misses first, the OOMs by how far they
// overflow, a few of each kind.
#include <gtest/gtest.h>

#include <sstream>

#include "app/plan_report.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::app::plan;

namespace {

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

Candidate cand(const std::string& label, const std::string& status, const std::string& why) {
  Candidate c;
  c.label = label;
  c.status = status;
  c.why = why;
  return c;
}

}  // namespace

TEST(PlanReport, ColumnsAreAsWideAsTheirDataAndALongCellIsCut) {
  const std::string longest(60, 'x');
  const std::string t = text_table({"a", "scheme", "n"}, {{"1", "ring-zigzag", "12.5"}, {"22", longest, "3.0"}},
                                   {true, false, true}, 26);
  const auto l = lines(t);
  ASSERT_EQ(l.size(), 3u);
  // Every column starts at the same place on every line: the third column ends each line.
  EXPECT_EQ(l[0].size(), l[1].size());
  EXPECT_EQ(l[1].size(), l[2].size());
  EXPECT_EQ(l[1].substr(l[1].size() - 4), "12.5");
  EXPECT_EQ(l[2].substr(l[2].size() - 4), " 3.0");
  EXPECT_NE(l[2].find(std::string(25, 'x') + "~"), std::string::npos) << t;
  EXPECT_EQ(l[2].find(std::string(26, 'x')), std::string::npos) << t;
  EXPECT_EQ(l[1].substr(0, 4), " 1  ");  // right-aligned numbers
}

TEST(PlanReport, NearMissesComeFirstAndOomsByHowFarTheyOverflow) {
  Result r;
  auto add = [&](Candidate c) {
    r.all.push_back(c);
    return r.all.size() - 1;
  };
  for (int k = 0; k < 9; ++k) {
    Candidate c = cand("oom" + std::to_string(k), "oom", "over");
    c.peak_bytes = (200 - 10 * k) * 1e9;  // the last is the closest to the budget
    add(c);
  }
  add(cand("inv", "invalid", "heads not divisible"));
  Candidate best = cand("best", "ranked", "");
  best.analytic_s = 1;
  best.tokens_per_step = 100;
  Candidate second = cand("second", "ranked", "slower");
  second.analytic_s = 1;
  second.tokens_per_step = 90;
  Candidate third = cand("third", "ranked", "slower");
  third.analytic_s = 1;
  third.tokens_per_step = 95;
  Candidate bound = cand("bound", "bounded", "cannot win");
  bound.estimate_s = 1;
  bound.tokens_per_step = 99;
  const size_t b = add(best), s2 = add(second), s3 = add(third), bd = add(bound);
  r.ranked = {b, s3, s2};
  const std::vector<size_t> n = near_misses(r);
  ASSERT_GE(n.size(), 4u);
  EXPECT_EQ(n[0], s3);  // closest to winning: the runner-up
  EXPECT_EQ(n[1], s2);
  EXPECT_EQ(n[2], bd);
  EXPECT_EQ(r.all[n[3]].label, "oom8");  // the smallest overflow first
  EXPECT_EQ(r.all[n[4]].label, "oom7");
  size_t ooms = 0;
  for (size_t i : n) ooms += r.all[i].status == "oom";
  EXPECT_EQ(ooms, 5u);  // not a wall of them
  EXPECT_EQ(r.all[n.back()].status, "invalid");
  for (size_t i : n) EXPECT_NE(i, b);  // the winner did not lose
  const auto l = lines(why_lost(r));
  EXPECT_NE(l[0].find("closest to winning first, 9 of 13"), std::string::npos) << l[0];
  // The why starts in one column whatever the status and label lengths.
  const size_t at = l[1].find("slower");
  for (size_t k = 1; k < l.size(); ++k) EXPECT_EQ(l[k].find_first_not_of(' ', at - 2), at) << l[k];
}

}  // namespace CPSIM_TEST_TU
