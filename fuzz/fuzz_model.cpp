// Fuzz target: a model file through scenario::load_model, then the parameter count of what it
// accepted, which must be finite.
#include <cmath>

#include "harness.hpp"
#include "model/transformer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cpsim;
  const std::string path = fuzz::write_input("fuzz-model.yaml", data, size);
  fuzz::guarded("model", [&] {
    const scenario::ModelSpec m = scenario::load_model(path);
    fuzz::check(std::isfinite(model::total_params(m)), "model", "parameter count is not finite");
  });
  return 0;
}
