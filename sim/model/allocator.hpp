#pragma once
/// PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp) as a size model: what a
/// set of live tensors costs in `memory_allocated` (blocks) and in `memory_reserved` (the
/// segments cudaMalloc'd to hold them), and the memory outside the allocator (the CUDA context,
/// NCCL's buffers). Users read `max_memory_reserved`; nvidia-smi adds the rest.
#include <string>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::model {

// CUDACachingAllocator.cpp's constants (PyTorch 2.x, unchanged since 1.x).
inline constexpr double kMinBlockSize = 512;          // every request is rounded up to 512 B
inline constexpr double kSmallSize = 1 << 20;         // up to 1 MiB: the small pool
inline constexpr double kSmallBuffer = 2 << 20;       // small-pool segments are 2 MiB
inline constexpr double kMinLargeAlloc = 10 << 20;    // below 10 MiB, large requests share...
inline constexpr double kLargeBuffer = 20 << 20;      // ...a 20 MiB segment
inline constexpr double kRoundLarge = 2 << 20;        // at or above it, cudaMalloc of a 2 MiB multiple

/// round_size: the block a request of `bytes` gets (a multiple of 512 B, at least 512 B).
double allocator_block_bytes(double bytes);
/// get_allocation_size: the segment cudaMalloc'd when no cached block fits the request.
double allocator_segment_bytes(double bytes);

/// `count` live tensors of `tensor_bytes` each, as the allocator holds them.
struct AllocatorFootprint {
  double allocated = 0;  ///< blocks (memory_allocated)
  double reserved = 0;   ///< the part of the segments they fill (memory_reserved)
};
/// Without expandable segments: small-pool tensors pack floor(2 MiB / block) to a segment,
/// mid-size ones floor(20 MiB / block) to a 20 MiB segment, large ones take a segment each,
/// rounded to 2 MiB; a segment's tail of 1 MiB or less is not split off (should_split needs
/// more than kSmallSize), so the block keeps it and it counts as allocated. With expandable
/// segments the blocks sit back to back in one growing mapping, every tail splits off:
/// reserved = allocated = the blocks.
AllocatorFootprint allocator_footprint(double tensor_bytes, double count, bool expandable_segments);

/// The allocator as the scenario runs it (`memory.allocator`), each choice with why.
struct AllocatorSettings {
  bool expandable_segments = false;
  double fragmentation = 0;  ///< share of the reserved peak held in free, unusable blocks
  std::string source;        ///< the key or default that set them
};
AllocatorSettings allocator_settings(const scenario::Scenario& sc);

/// Memory outside the caching allocator, bytes per GPU.
double cuda_context_bytes(const scenario::Scenario& sc);
/// NCCL's connection buffers for the communicators the layout creates (TP, CP, DP, PP, EP), with
/// each communicator's share in `per_group` when given.
struct NcclGroupBuffers {
  std::string group;  ///< "TP", "CP", "DP", "PP", "EP"
  double bytes = 0;
};
double nccl_buffer_bytes(const scenario::Scenario& sc, std::vector<NcclGroupBuffers>* per_group = nullptr);
/// cuBLAS workspaces (through the caching allocator), bytes; `tensors` gets their count.
double cublas_workspace_bytes(const scenario::Scenario& sc, double* tensors);

}  // namespace cpsim::model
