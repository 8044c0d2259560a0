#pragma once
/// flash2 on the GPU (sm_80 or newer): BF16 attention forward / backward with FP32 accumulation
/// and the online-softmax merge. Device pointers; asynchronous on `stream`.
#include <cuda_runtime_api.h>

#include "api.hpp"

namespace cpsim::kernels::flash2 {

/// Throw std::invalid_argument when check() rejects the arguments; otherwise return the
/// launch status (cudaSuccess, or the error of the failed launch).
cudaError_t forward(const ForwardArgs& args, cudaStream_t stream = nullptr);
/// Launches, in order: zero the dQ accumulator, D = rowsum(dO * O), the main kernel, dQ to BF16.
cudaError_t backward(const BackwardArgs& args, cudaStream_t stream = nullptr);
cudaError_t merge(const MergeArgs& args, cudaStream_t stream = nullptr);

/// Per-head-dim launchers (cuda_kernels.cuh), instantiated in one translation unit each.
template <int D>
cudaError_t launch_forward(const FwdParams& p, cudaStream_t stream);
template <int D>
cudaError_t launch_backward(const BwdParams& p, cudaStream_t stream);

}  // namespace cpsim::kernels::flash2
