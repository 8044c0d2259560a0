#pragma once
/// Internal to the scenario stage: the data-parallel keys of `parallel` (Megatron's DDP options,
/// the gradient reduction dtype, FSDP's resharding), read and checked against the mesh.
#include "scenario/specs.hpp"
#include "scenario/yaml_tree.hpp"

namespace cpsim::scenario::detail {

/// The keys read_dp_parallel reads, for the section's MapReader.
inline constexpr const char* kDpKeys[] = {"dp_bucket", "overlap_grad_reduce", "overlap_param_gather",
                                          "align_param_gather", "grad_reduce_dtype",
                                          "reshard_after_forward", "dp_replicate"};

/// parallel.dp_bucket / overlap_* / align_param_gather / grad_reduce_dtype /
/// reshard_after_forward / dp_replicate (r must allow them).
void read_dp_parallel(const MapReader& r, ParallelSpec& p);

/// The checks that relate them to zero_stage; `par` is the section to point at.
void check_dp(const ParallelSpec& p, const Node& par);

}  // namespace cpsim::scenario::detail
