// One head dim per translation unit, so nvcc compiles them in parallel.
#include "cuda_kernels.cuh"

namespace cpsim::kernels::flash2 {
template cudaError_t launch_forward<256>(const FwdParams&, cudaStream_t);
}  // namespace cpsim::kernels::flash2
