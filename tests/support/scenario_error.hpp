#pragma once
// The message a scenario text is refused with, or "(no error)": how the tests in
// tests/scenario hold the loader's error contract (file:line:col, key, what was expected).
#include <string>
#include <vector>

#include "scenario/load.hpp"

namespace cpsim::test {

inline std::string scenario_error(const std::string& text,
                                  const std::vector<std::string>& overrides = {}) {
  try {
    scenario::parse_scenario(text, "s.yaml", overrides);
  } catch (const scenario::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace cpsim::test
