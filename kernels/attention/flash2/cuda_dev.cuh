#pragma once
/// The GPU `Dev` of simt.hpp: PTX for ldmatrix, mma.sync m16n8k16 (BF16 in, FP32 accumulate),
/// cp.async and ex2.approx. sm_80 or newer.
#include <cuda_bf16.h>

#include <cstdint>

#include "simt.hpp"

namespace cpsim::kernels::flash2 {

struct CudaDev {
  char* smem_;

  __device__ __forceinline__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ int block_x() const { return static_cast<int>(blockIdx.x); }
  __device__ __forceinline__ int block_y() const { return static_cast<int>(blockIdx.y); }
  __device__ __forceinline__ int block_z() const { return static_cast<int>(blockIdx.z); }
  __device__ __forceinline__ char* smem() const { return smem_; }
  __device__ __forceinline__ void sync() const { __syncthreads(); }

  __device__ __forceinline__ void ldsm_x4(const uint16_t* p, uint32_t (&r)[4]) const {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
  __device__ __forceinline__ void ldsm_x4_t(const uint16_t* p, uint32_t (&r)[4]) const {
    const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
  __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                      uint32_t b1) const {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ float shfl_xor(float v, int lane_mask) const {
    return __shfl_xor_sync(0xffffffffu, v, lane_mask);
  }
  __device__ __forceinline__ float shfl_idx(float v, int src_lane) const {
    return __shfl_sync(0xffffffffu, v, src_lane);
  }

  __device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) const {
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    const int bytes = valid ? 16 : 0;  // 0: nothing read, 16 zero bytes written
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(bytes));
  }
  __device__ __forceinline__ void cp_async_commit() const {
    asm volatile("cp.async.commit_group;\n" ::);
  }
  template <int N>
  __device__ __forceinline__ void cp_async_wait() const {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
  }

  __device__ __forceinline__ float exp2(float x) const {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
  __device__ __forceinline__ float log(float x) const { return __logf(x); }
  __device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) const {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ __forceinline__ float bf16_lo(uint32_t pair) const {
    return __uint_as_float(pair << 16);
  }
  __device__ __forceinline__ float bf16_hi(uint32_t pair) const {
    return __uint_as_float(pair & 0xffff0000u);
  }

  // Plain loads, not __ldg: the merge kernel may write what it reads (o aliasing o1).
  __device__ __forceinline__ float load_f32(const float* p) const { return *p; }
  __device__ __forceinline__ int32_t load_i32(const int32_t* p) const { return *p; }
  __device__ __forceinline__ uint32_t load_u32(const uint32_t* p) const { return *p; }
  __device__ __forceinline__ void store_u32(uint32_t* p, uint32_t v) const { *p = v; }
  __device__ __forceinline__ void store_f32(float* p, float v) const { *p = v; }
  __device__ __forceinline__ void atomic_add(float* p, float v) const { atomicAdd(p, v); }
};

}  // namespace cpsim::kernels::flash2
