// `cpsim plan`'s stage 5 verifies the best layouts SimGrid can hold (plan_steps.hpp
// verifiable): one whose full graph is estimated over --max-memory with the estimate's margin
// says so and the next best takes its place, up to --verify.
#include <gtest/gtest.h>

#include "app/plan_steps.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::app::plan;

TEST(PlanVerify, TheNextBestTakesTheVerificationSimGridCannotHold) {
  std::vector<Candidate> all(5);
  // Ranked best first: 3, 0, 4, 1, 2. Layout 0 needs 13.3 GB (x 1.1 over 12.6), layout 4 is
  // unknown (tried), layout 1 fits just under the margin (11.4 x 1.1 = 12.54).
  const std::vector<size_t> ranked{3, 0, 4, 1, 2};
  const std::vector<double> est{13.3e9, 11.4e9, 1e9, 2e9, 0};
  const std::vector<size_t> picked = verifiable(ranked, est, 12.6e9, 3, all);
  EXPECT_EQ(picked, (std::vector<size_t>{0, 2, 3}));  // positions in ranked: layouts 3, 4, 1
  EXPECT_EQ(all[0].why.rfind("SimGrid not run: its graph would need about 13.3 GB", 0), 0u) << all[0].why;
  EXPECT_NE(all[0].why.find("over the 12.6 GB of --max-memory"), std::string::npos) << all[0].why;
  for (size_t i : {1, 2, 3, 4}) EXPECT_TRUE(all[i].why.empty()) << i;
  // Fewer that fit than --verify: those (layout 4, unknown, and 2, 1 GB); --verify 0: none.
  std::vector<Candidate> again(5);
  EXPECT_EQ(verifiable(ranked, est, 1.5e9, 3, again), (std::vector<size_t>{2, 4}));
  EXPECT_TRUE(verifiable(ranked, est, 12.6e9, 0, again).empty());
}

}  // namespace CPSIM_TEST_TU
