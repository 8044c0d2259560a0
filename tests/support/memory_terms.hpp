#pragma once
// Reading a memory estimate's terms in the model tests.
#include <string>

#include "model/memory.hpp"

namespace cpsim::test {

/// The bytes of every term whose name starts with `prefix`, summed.
inline double term(const model::MemoryEstimate& m, const std::string& prefix) {
  double s = 0;
  for (const auto& t : m.terms)
    if (t.name.rfind(prefix, 0) == 0) s += t.bytes;
  return s;
}

}  // namespace cpsim::test
