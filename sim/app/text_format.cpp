#include "app/text_format.hpp"

#include <cstdio>

namespace cpsim::app {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace cpsim::app
