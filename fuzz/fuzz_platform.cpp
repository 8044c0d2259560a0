// Fuzz target: a platform file through scenario::load_platform, with `#param key=value` comment
// lines as its preset parameters ("nodes=4").
#include <string>

#include "harness.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cpsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto params = fuzz::directive_lines(text, "#param ");
  const std::string path = fuzz::write_input("fuzz-platform.yaml", data, size);
  fuzz::guarded("platform", [&] { scenario::load_platform(path, params); });
  return 0;
}
