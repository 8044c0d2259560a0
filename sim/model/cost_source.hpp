// Where a kernel price came from, as the profile tables mark their rows: one mapping and one
// ordering for the attention profile (profile_model.cpp) and the Gated DeltaNet one (gdn_cost.cpp).
#pragma once

#include "model/cost_model.hpp"
#include "scenario/profile_csv.hpp"

namespace cpsim::model {

inline CostSource row_source(scenario::RowSource s) {
  switch (s) {
    case scenario::RowSource::Measured: return CostSource::Measured;
    case scenario::RowSource::Published: return CostSource::Published;
    case scenario::RowSource::Derived: return CostSource::Derived;
  }
  return CostSource::Derived;
}

/// The weaker of two sources (measured < published < derived): what a curve mixing them is.
inline CostSource weaker(CostSource a, CostSource b) {
  auto rank = [](CostSource s) {
    return s == CostSource::Measured ? 0 : s == CostSource::Published ? 1 : 2;
  };
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace cpsim::model
