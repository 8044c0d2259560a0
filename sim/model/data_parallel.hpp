#pragma once
/// How the frameworks run data parallelism, as figures the schedule and the memory model share:
/// the bytes a gradient is reduced in, Megatron's bucket size, FSDP's resharding per block.
/// No SimGrid, no graph.
#include "scenario/specs.hpp"

namespace cpsim::model {

/// Bytes per gradient element on the wire and in the gradient buffer: 4 when reduced in fp32
/// (Megatron's default for bf16 training, torchtitan's reduce_dtype), else 2.
double grad_reduce_bytes(const scenario::ParallelSpec& p);

/// The gradient bucket of pipeline stage `stage` in reduced bytes, as Megatron's DDP sizes it:
/// parallel.dp_bucket if set, else max(40M, 1M x dp) parameters (distributed_data_parallel.py);
/// infinite (one bucket after the whole backward) without overlap_grad_reduce, and on every
/// stage but the first ("data-parallel communication on these stages is not on the critical
/// path"). FSDP (zero_stage 3) reduce-scatters each block as its backward ends: 0, a bucket
/// per layer.
double dp_bucket_bytes(const scenario::ParallelSpec& p, int stage);

/// FSDP (zero_stage 3): whether the block `layer` of a model of `layers` frees its gathered
/// weights after its forward (and gathers them again for its backward), per
/// parallel.reshard_after_forward as torchtitan's apply_fsdp resolves it.
bool fsdp_reshards(const scenario::ParallelSpec& p, int layer, int layers);

}  // namespace cpsim::model
