#pragma once
/// Bounds on numeric command-line options, checked on the text as typed, before CLI11 converts
/// it: a "-1" given to an unsigned option would otherwise wrap to 2^64-1 and a number past the
/// type's range saturate, both silently.
#include <CLI/CLI.hpp>
#include <cstdint>

namespace cpsim::app {

/// Accepts a whole number written in decimal from `lo` to `hi`; anything else is exit 2 with
/// "expected a whole number from LO to HI, got 'TEXT'".
CLI::Validator whole_number(int64_t lo, int64_t hi);

}  // namespace cpsim::app
