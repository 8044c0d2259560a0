// The memory a run or a plan takes by default: half of physical memory for one simulation,
// three quarters for `cpsim plan`'s children at once, and $CPSIM_MAX_MEMORY for both where set
// (a site, or the argv fuzzer, lowers every subcommand's default with it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "app/work_limit.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

/// Sets or unsets CPSIM_MAX_MEMORY for a scope.
class EnvLimit {
 public:
  explicit EnvLimit(const char* value) {
    if (const char* v = std::getenv("CPSIM_MAX_MEMORY")) old_ = v;
    if (value) ::setenv("CPSIM_MAX_MEMORY", value, 1);
    else ::unsetenv("CPSIM_MAX_MEMORY");
  }
  ~EnvLimit() {
    if (old_) ::setenv("CPSIM_MAX_MEMORY", old_->c_str(), 1);
    else ::unsetenv("CPSIM_MAX_MEMORY");
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST(MemoryDefaults, PlanChildrenShareThreeQuartersWhereOneHasHalf) {
  const EnvLimit none(nullptr);
  const double physical = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  EXPECT_DOUBLE_EQ(app::default_max_memory(), 0.5 * physical);
  EXPECT_DOUBLE_EQ(app::default_plan_memory(), 0.75 * physical);
}

TEST(MemoryDefaults, TheSiteLimitHoldsForBoth) {
  const EnvLimit site("2GiB");
  EXPECT_DOUBLE_EQ(app::default_max_memory(), 2.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(app::default_plan_memory(), app::default_max_memory());
}

}  // namespace CPSIM_TEST_TU
