#pragma once
/// What the flash2 kernel bodies are written against. A body is a function template over a
/// `Dev` that supplies the few warp-level primitives they use (thread and block indices,
/// __syncthreads, ldmatrix, mma.sync, shuffles, cp.async, checked global loads and stores).
/// cuda_dev.cuh implements Dev with PTX; emulator.hpp implements it on the CPU, one fiber per
/// thread, so the fragment index arithmetic is tested in CI without a GPU.
///
/// Dev interface (all members; `N` a compile-time int):
///   int thread(), block_x(), block_y(), block_z();  char* smem();  void sync();
///   void ldsm_x4(const uint16_t* smem, uint32_t (&r)[4]);    // ldmatrix.x4
///   void ldsm_x4_t(const uint16_t* smem, uint32_t (&r)[4]);  // ldmatrix.x4.trans
///   void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);  // m16n8k16
///   float shfl_xor(float, int lane_mask);  float shfl_idx(float, int src_lane);
///   void cp_async16(void* smem, const void* global, bool valid);  // !valid: zero-fill
///   void cp_async_commit();  template <int N> void cp_async_wait();
///   float exp2(float);  float log(float);  uint32_t pack_bf16x2(float lo, float hi);
///   float bf16_lo(uint32_t pair);  float bf16_hi(uint32_t pair);
///   float load_f32(const float*);  int32_t load_i32(const int32_t*);
///   uint32_t load_u32(const uint32_t*);  void store_u32(uint32_t*, uint32_t);
///   void store_f32(float*, float);  void atomic_add(float*, float);
#include <cstdint>

#if defined(__CUDACC__)
#define CPK_DEVICE __device__ __forceinline__
#define CPK_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CPK_DEVICE inline
#define CPK_HOST_DEVICE inline
#endif
#if defined(__CUDACC__)
#define CPK_UNROLL _Pragma("unroll")
#define CPK_UNROLL_2 _Pragma("unroll 2")
#else
#define CPK_UNROLL
#define CPK_UNROLL_2
#endif

namespace cpsim::kernels::flash2 {

constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kPosInf = __builtin_huge_valf();
constexpr float kLog2e = 1.4426950408889634f;

CPK_HOST_DEVICE constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
CPK_HOST_DEVICE constexpr int imin(int a, int b) { return a < b ? a : b; }
CPK_HOST_DEVICE constexpr int imax(int a, int b) { return a > b ? a : b; }

/// Element offset of (row, col) in a shared-memory tile of kRow BF16 per row, its 16-byte
/// chunks XOR-swizzled by (row mod 8): the 8 row addresses of one ldmatrix 8x8 matrix, and
/// 8 consecutive cp.async chunks of one row, then fall in 8 different bank groups.
template <int kRow>
CPK_HOST_DEVICE constexpr int swz(int row, int col) {
  static_assert(kRow % 64 == 0, "a swizzled row must hold a multiple of 8 chunks of 16 bytes");
  return row * kRow + ((((col >> 3) ^ row) & 7) | ((col >> 3) & ~7)) * 8 + (col & 7);
}

/// Kernel parameters. Tensors are BF16 (raw bits) with the last dimension contiguous; strides
/// are in elements.
struct Strides {
  int64_t batch = 0, row = 0, head = 0;
};

struct MaskParams {
  bool causal = false;
  int64_t q_offset = 0, k_offset = 0;
  const int32_t* q_doc = nullptr;  ///< [batch, q_len] or null
  const int32_t* k_doc = nullptr;  ///< [batch, kv_len] or null
};

struct FwdParams {
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  uint16_t* o = nullptr;
  float* lse = nullptr;  ///< [batch, heads_q, q_len]
  Strides q_str, k_str, v_str, o_str;
  int batch = 0, q_len = 0, kv_len = 0, heads_q = 0, heads_kv = 0, group = 1;
  float scale = 0, scale_log2 = 0;
  MaskParams mask;
};

struct BwdParams {
  const uint16_t* q = nullptr;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  const uint16_t* o = nullptr;
  const uint16_t* dout = nullptr;
  const float* lse = nullptr;  ///< [batch, heads_q, q_len]
  uint16_t* dq = nullptr;
  uint16_t* dk = nullptr;
  uint16_t* dv = nullptr;
  float* dq_accum = nullptr;  ///< [batch, q_len, heads_q, head_dim] fp32, zeroed before
  float* dsum = nullptr;      ///< [batch, heads_q, q_len]: rowsum(dout * o)
  /// [2, batch, kv_len, heads_kv, head_dim] fp32 dK (scaled), dV sums, zeroed before; used
  /// when kv_split > 1
  float* dkv_accum = nullptr;
  Strides q_str, k_str, v_str, o_str, do_str, dq_str, dk_str, dv_str;
  int batch = 0, q_len = 0, kv_len = 0, heads_q = 0, heads_kv = 0, group = 1, head_dim = 0;
  /// CTAs per (key tile, key/value head), each taking group / kv_split of the query heads
  /// that share it; with more than one, their dK, dV meet in dkv_accum through atomics.
  int kv_split = 1;
  float scale = 0, scale_log2 = 0;
  MaskParams mask;
};

struct MergeParams {
  const float* o1 = nullptr;     ///< [batch, q_len, heads, head_dim] fp32 (may alias o)
  const float* lse1 = nullptr;   ///< [batch, heads, q_len] (may alias lse)
  const uint16_t* o2 = nullptr;  ///< [batch, q_len, heads, head_dim] BF16
  const float* lse2 = nullptr;
  float* o = nullptr;
  float* lse = nullptr;
  int batch = 0, q_len = 0, heads = 0, head_dim = 0;
};

/// Tile classes of a (query tile, key tile) pair under the mask.
enum : int { kTileSkip = 0, kTileFull = 1, kTilePartial = 2 };

/// Class of the tile rows [i0, i1) x cols [j0, j1) (ends already clipped to the lengths;
/// `ragged` if the tile itself was clipped). Document ids must be nondecreasing.
template <class Dev>
CPK_DEVICE int classify_tile(Dev& dev, const MaskParams& m, const int32_t* qdoc,
                             const int32_t* kdoc, int i0, int i1, int j0, int j1, bool ragged) {
  if (i1 <= i0 || j1 <= j0) return kTileSkip;
  bool partial = ragged;
  if (m.causal) {
    const int64_t q_lo = m.q_offset + i0, q_hi = m.q_offset + i1 - 1;
    const int64_t k_lo = m.k_offset + j0, k_hi = m.k_offset + j1 - 1;
    if (k_lo > q_hi) return kTileSkip;
    if (k_hi > q_lo) partial = true;
  }
  if (qdoc) {
    const int32_t dq_lo = dev.load_i32(qdoc + i0), dq_hi = dev.load_i32(qdoc + i1 - 1);
    const int32_t dk_lo = dev.load_i32(kdoc + j0), dk_hi = dev.load_i32(kdoc + j1 - 1);
    if (dk_hi < dq_lo || dk_lo > dq_hi) return kTileSkip;
    if (!(dq_lo == dq_hi && dk_lo == dk_hi && dq_lo == dk_lo)) partial = true;
  }
  return partial ? kTilePartial : kTileFull;
}

/// Loads rows [row0, row0 + R) of a [len, D] BF16 matrix (row stride `stride`) into a swizzled
/// shared tile with cp.async; rows past `len` are zero-filled.
template <int R, int D, int kThreads, class Dev>
CPK_DEVICE void load_tile(Dev& dev, uint16_t* s, const uint16_t* g, int64_t stride, int row0,
                          int len) {
  constexpr int kChunks = D / 8;
  for (int c = dev.thread(); c < R * kChunks; c += kThreads) {
    const int r = c / kChunks, ch = c % kChunks;
    const bool ok = row0 + r < len;
    const uint16_t* src = ok ? g + static_cast<int64_t>(row0 + r) * stride + ch * 8 : g;
    dev.cp_async16(s + swz<D>(r, ch * 8), src, ok);
  }
}

/// acc[MT][NT] (m16 x n8 fragments) += A[m0 .. m0 + 16 MT) x B[.., n0 .. n0 + 8 NT) over
/// K = 16 KSTEPS, both operands in swizzled shared memory:
///   A row-major [m][k] (row length AROW), or with A_T stored [k][m];
///   B stored [n][k] (row length BROW, i.e. B^T row-major: "col" operand), or with B_T [k][n].
/// k runs from a_k0 in A and b_k0 in B.
template <int MT, int NT, int KSTEPS, bool A_T, bool B_T, int AROW, int BROW, class Dev>
CPK_DEVICE void warp_gemm(Dev& dev, float (&acc)[MT][NT][4], const uint16_t* sA, int m0, int a_k0,
                          const uint16_t* sB, int n0, int b_k0) {
  static_assert(NT % 2 == 0, "B fragments are loaded two n8 tiles at a time");
  const int l = dev.thread() & 31;
  // Unrolled by 2, not fully: full unrolling hoists loads and spills the 128-register
  // accumulators of the d128 / d256 kernels.
  CPK_UNROLL_2
  for (int ks = 0; ks < KSTEPS; ++ks) {
    uint32_t a[MT][4];
    CPK_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
      if constexpr (!A_T) {
        dev.ldsm_x4(sA + swz<AROW>(m0 + mt * 16 + (l & 15), a_k0 + ks * 16 + (l >> 4) * 8), a[mt]);
      } else {
        dev.ldsm_x4_t(sA + swz<AROW>(a_k0 + ks * 16 + (l & 7) + (l >> 4) * 8,
                                     m0 + mt * 16 + ((l >> 3) & 1) * 8),
                      a[mt]);
      }
    }
    CPK_UNROLL
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t b[4];
      if constexpr (!B_T) {
        dev.ldsm_x4(sB + swz<BROW>(n0 + np * 16 + (l & 7) + (l >> 4) * 8,
                                   b_k0 + ks * 16 + ((l >> 3) & 1) * 8),
                    b);
      } else {
        dev.ldsm_x4_t(sB + swz<BROW>(b_k0 + ks * 16 + (l & 7) + ((l >> 3) & 1) * 8,
                                     n0 + np * 16 + (l >> 4) * 8),
                      b);
      }
      CPK_UNROLL
      for (int mt = 0; mt < MT; ++mt) {
        dev.mma(acc[mt][2 * np], a[mt], b[0], b[1]);
        dev.mma(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

template <int MT, int NT>
CPK_DEVICE void zero(float (&acc)[MT][NT][4]) {
  CPK_UNROLL
  for (int mt = 0; mt < MT; ++mt) {
    CPK_UNROLL
    for (int nt = 0; nt < NT; ++nt) {
      CPK_UNROLL
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
    }
  }
}

}  // namespace cpsim::kernels::flash2
