// flash2 GPU entry points: validation, head-dim dispatch, the merge kernel.
#include <stdexcept>

#include "cuda.hpp"
#include "cuda_dev.cuh"
#include "flash_bwd.hpp"

namespace cpsim::kernels::flash2 {

__global__ void __launch_bounds__(32 * kMergeWarps) merge_kernel(const MergeParams p) {
  CudaDev dev{nullptr};
  merge_body(p, dev);
}

cudaError_t forward(const ForwardArgs& args, cudaStream_t stream) {
  if (const std::string e = check(args); !e.empty()) throw std::invalid_argument(e);
  const FwdParams p = make_fwd_params(args);
  switch (args.shape.head_dim) {
    case 64:
      return launch_forward<64>(p, stream);
    case 128:
      return launch_forward<128>(p, stream);
    default:
      return launch_forward<256>(p, stream);
  }
}

cudaError_t backward(const BackwardArgs& args, cudaStream_t stream) {
  if (const std::string e = check(args); !e.empty()) throw std::invalid_argument(e);
  static const int sms = [] {
    int device = 0, n = 132;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      n = 132;
    }
    return n;
  }();
  const BwdParams p = make_bwd_params(args, sms);
  switch (args.shape.head_dim) {
    case 64:
      return launch_backward<64>(p, stream);
    case 128:
      return launch_backward<128>(p, stream);
    default:
      return launch_backward<256>(p, stream);
  }
}

cudaError_t merge(const MergeArgs& args, cudaStream_t stream) {
  if (const std::string e = check(args); !e.empty()) throw std::invalid_argument(e);
  const MergeParams p = make_merge_params(args);
  merge_kernel<<<dim3(ceil_div(p.q_len * p.heads, kMergeWarps), p.batch), 32 * kMergeWarps, 0,
                 stream>>>(p);
  return cudaGetLastError();
}

}  // namespace cpsim::kernels::flash2
