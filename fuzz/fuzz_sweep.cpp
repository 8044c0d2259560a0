// Fuzz target: a sweep file through scenario::load_sweep_file (which validates every value
// against its base scenario and expands the points), then the first points loaded as `cpsim
// sweep` runs them: the base scenario with the point's overrides. A value the sweep file
// accepted must come back through its override text (emit_flow) as YAML that parses.
#include <algorithm>
#include <string>

#include "harness.hpp"
#include "scenario/sweep.hpp"

namespace {

constexpr size_t kPointsLoaded = 4;

bool override_text_unparsable(const cpsim::scenario::InputError& e) {
  return e.file() == "<--set>" &&
         (e.reason().starts_with("invalid YAML") || e.reason().starts_with("expected one YAML document") ||
          e.reason().starts_with("expected key.path=value"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cpsim;
  const std::string path = fuzz::write_input("fuzz-sweep.yaml", data, size);
  fuzz::guarded("sweep", [&] {
    const scenario::Sweep sweep = scenario::load_sweep_file(path);
    for (size_t i = 0; i < std::min(sweep.points.size(), kPointsLoaded); ++i) {
      const scenario::SweepPoint& p = sweep.points[i];
      fuzz::guarded("sweep", [&] {
        try {
          scenario::load_scenario(p.base_path, p.overrides);
        } catch (const scenario::InputError& e) {
          fuzz::check(!override_text_unparsable(e), "sweep",
                      "point " + p.id + ": an accepted value does not parse back from its override:\n" + e.what());
          throw;
        }
      });
    }
  });
  return 0;
}
