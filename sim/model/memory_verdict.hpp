#pragma once
/// The memory verdict, decided in one place for `cpsim run`, `cpsim memory` and `cpsim plan`:
/// whether the peak per GPU fits the GPU's memory, and whether it fits with room to spare.
/// The estimate counts the tensors a step allocates; PyTorch's caching allocator reserves more
/// than that (rounded blocks, split blocks that cannot be returned: torch.cuda.memory_reserved()
/// >= memory_allocated()), so a peak within a few percent of HBM is a fit on paper that a real
/// run can lose. Such a fit is "tight", not a plain "fits".
#include <string>

namespace cpsim::model {

/// Headroom under which a fit is tight: 5 % of the GPU's memory (`cpsim plan`'s default
/// --memory-budget is the remaining 95 %).
inline constexpr double kTightHeadroom = 0.05;

enum class MemoryFit { Fits, Tight, Over };

/// Over when peak > capacity, Tight when the headroom is under kTightHeadroom x capacity.
MemoryFit memory_fit(double peak_bytes, double capacity_bytes);

/// "fits: 61.2 GB reserved of 80.0 GB per GPU", "tight: 84.4 GB reserved of 85.9 GB per GPU
/// (1.7 % headroom, under 5 %)" or "OOM: 93.1 GB reserved of 80.0 GB per GPU": the head of every
/// memory verdict (the peak is the caching allocator's reserved peak, model/allocator.hpp).
std::string memory_verdict(double peak_bytes, double capacity_bytes);

/// One word for tables: "yes", "tight" or "NO".
const char* memory_fit_word(MemoryFit f);

}  // namespace cpsim::model
