#pragma once
// __global__ wrappers around the kernel bodies and their per-head-dim launchers.
#include <cuda_runtime.h>

#include "cuda.hpp"
#include "cuda_dev.cuh"
#include "flash_bwd.hpp"
#include "flash_fwd.hpp"

namespace cpsim::kernels::flash2 {

template <class T>
__global__ void __launch_bounds__(T::kThreads) fwd_kernel(const FwdParams p) {
  extern __shared__ __align__(128) char smem[];
  CudaDev dev{smem};
  fwd_body<T>(p, dev);
}

template <int D>
__global__ void __launch_bounds__(32 * kDsumWarps) dsum_kernel(const BwdParams p) {
  CudaDev dev{nullptr};
  dsum_body<D>(p, dev);
}

template <class T>
__global__ void __launch_bounds__(T::kThreads) bwd_kernel(const BwdParams p) {
  extern __shared__ __align__(128) char smem[];
  CudaDev dev{smem};
  bwd_body<T>(p, dev);
}

template <int D>
__global__ void __launch_bounds__(kConvertThreads) dq_convert_kernel(const BwdParams p) {
  CudaDev dev{nullptr};
  dq_convert_body<D>(p, dev);
}

template <int D>
__global__ void __launch_bounds__(kConvertThreads) dkv_convert_kernel(const BwdParams p) {
  CudaDev dev{nullptr};
  dkv_convert_body<D>(p, dev);
}

/// Opts `kernel` into more than 48 KiB of dynamic shared memory. The launchers call it once
/// per process and kernel (a function-local static), so timed launches carry no extra API
/// call; that assumes one device model per process.
template <class Kernel>
cudaError_t allow_smem(Kernel kernel, int bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

template <int D>
cudaError_t launch_forward(const FwdParams& p, cudaStream_t stream) {
  using T = typename FwdConfig<D>::Traits;
  static const cudaError_t smem_status = allow_smem(fwd_kernel<T>, T::kSmemBytes);
  if (smem_status != cudaSuccess) return smem_status;
  const dim3 grid(ceil_div(p.q_len, T::kBr), p.heads_q, p.batch);
  fwd_kernel<T><<<grid, T::kThreads, T::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

template <int D>
cudaError_t launch_backward(const BwdParams& p, cudaStream_t stream) {
  using T = typename BwdConfig<D>::Traits;
  const size_t accum_bytes = sizeof(float) * p.batch * p.q_len * p.heads_q * D;
  if (cudaError_t e = cudaMemsetAsync(p.dq_accum, 0, accum_bytes, stream); e != cudaSuccess) {
    return e;
  }
  dsum_kernel<D>
      <<<dim3(ceil_div(p.q_len * p.heads_q, kDsumWarps), p.batch), 32 * kDsumWarps, 0, stream>>>(p);
  static_assert(T::kBc == (D == 256 ? 64 : 128), "backward_key_tile() must match BwdConfig");
  static const cudaError_t smem_status = allow_smem(bwd_kernel<T>, T::kSmemBytes);
  if (smem_status != cudaSuccess) return smem_status;
  const size_t dkv_elems = static_cast<size_t>(p.batch) * p.kv_len * p.heads_kv * D;
  if (p.kv_split > 1) {
    if (cudaError_t e = cudaMemsetAsync(p.dkv_accum, 0, 2 * sizeof(float) * dkv_elems, stream);
        e != cudaSuccess) {
      return e;
    }
  }
  bwd_kernel<T><<<dim3(ceil_div(p.kv_len, T::kBc), p.heads_kv * p.kv_split, p.batch), T::kThreads,
                  T::kSmemBytes, stream>>>(p);
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.q_len * p.heads_q * (D / 2);
  dq_convert_kernel<D><<<static_cast<unsigned>((pairs + kConvertThreads - 1) / kConvertThreads),
                         kConvertThreads, 0, stream>>>(p);
  if (p.kv_split > 1) {
    dkv_convert_kernel<D>
        <<<static_cast<unsigned>((dkv_elems / 2 + kConvertThreads - 1) / kConvertThreads),
           kConvertThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace cpsim::kernels::flash2
