// The memory verdict: memory_verdict.hpp.
#include "model/memory_verdict.hpp"

#include <cstdio>

namespace cpsim::model {

MemoryFit memory_fit(double peak_bytes, double capacity_bytes) {
  if (peak_bytes > capacity_bytes) return MemoryFit::Over;
  if (capacity_bytes - peak_bytes < kTightHeadroom * capacity_bytes) return MemoryFit::Tight;
  return MemoryFit::Fits;
}

std::string memory_verdict(double peak_bytes, double capacity_bytes) {
  char buf[160];
  const MemoryFit f = memory_fit(peak_bytes, capacity_bytes);
  if (f == MemoryFit::Tight)
    std::snprintf(buf, sizeof buf, "tight: %.1f GB reserved of %.1f GB per GPU (%.1f %% headroom, under %.0f %%)",
                  peak_bytes / 1e9, capacity_bytes / 1e9,
                  capacity_bytes > 0 ? 100 * (capacity_bytes - peak_bytes) / capacity_bytes : 0.0,
                  100 * kTightHeadroom);
  else
    std::snprintf(buf, sizeof buf, "%s: %.1f GB reserved of %.1f GB per GPU", f == MemoryFit::Over ? "OOM" : "fits",
                  peak_bytes / 1e9, capacity_bytes / 1e9);
  return buf;
}

const char* memory_fit_word(MemoryFit f) {
  return f == MemoryFit::Over ? "NO" : f == MemoryFit::Tight ? "tight" : "yes";
}

}  // namespace cpsim::model
