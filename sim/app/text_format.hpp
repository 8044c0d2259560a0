#pragma once
/// printf-style formatting of one number into a std::string, shared by the commands' tables.
#include <string>

namespace cpsim::app {

/// `f` is a printf format with one double conversion, e.g. "%.1f"; at most 63 characters out.
std::string fmt(const char* f, double v);

}  // namespace cpsim::app
