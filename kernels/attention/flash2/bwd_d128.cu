// One head dim per translation unit, so nvcc compiles them in parallel.
#include "cuda_kernels.cuh"

namespace cpsim::kernels::flash2 {
template cudaError_t launch_backward<128>(const BwdParams&, cudaStream_t);
}  // namespace cpsim::kernels::flash2
