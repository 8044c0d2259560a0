#pragma once
/// The framework's host ops for a region of kernels outside the attention layers (embedding,
/// LM head and loss, a Gated DeltaNet mixer, a MoE block, the optimizer step): placed on the
/// rank's host lane (stream::kHost, in issue order) with the region's first kernel waiting for
/// them, as the attention kernel waits for its call's (attention.cpp), so a host that falls
/// behind shows wherever its ops are issued. The counts and prices are model/host_ops'.
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

/// Adds `seconds` of host work labelled `label` on `rank`'s host lane and makes the first
/// compute-stream op of `rank` with an id at or after `first` (the region, built before this
/// call and issuing no host ops itself) wait for it. Returns the host op, kNoOp when
/// `seconds` is 0 (CUDA graphs: the host issues no framework ops).
OpId add_region_host(TaskGraph& g, int rank, double seconds, const OpLabel& label, OpId first);

}  // namespace cpsim::schedule
