#pragma once
/// A CPU SIMT emulator for the flash2 kernel bodies (the `Dev` of simt.hpp), so that their
/// tensor-core fragment layouts, swizzles, masks and online softmax are tested everywhere,
/// CI included, without a GPU. Every CUDA thread is a fiber; CTAs run one after another.
/// Warp-collective operations (ldmatrix, mma.sync, shuffles) exchange data through per-warp
/// slots between two warp barriers, exactly with the lane layouts the PTX ISA documents.
///
/// It also catches what a GPU would hide or make flaky: shared or global accesses outside the
/// CTA's shared memory or the buffers passed to run(); misaligned ldmatrix / cp.async
/// addresses; __syncthreads not reached by every thread (reported as a deadlock); and, with
/// CopyTiming::Deferred, a read of cp.async data before cp_async_wait plus a barrier (the
/// copy lands only at the issuing thread's wait), or with CopyTiming::Eager, a cp.async that
/// overwrites a tile other warps may still be reading (the copy lands at once, while the
/// other warps may not have run yet); Schedule::WarpByWarp makes both hazards deterministic.
/// Shared memory starts as NaN bytes. Numerics: mma
/// accumulates the exact BF16 products in FP32 in k order; exp2 and log are the C library's.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace cpsim::kernels::flash2::emu {

enum class CopyTiming { Deferred, Eager };

/// Lockstep: every thread advances about one warp operation per round, as warps interleave on
/// an SM. WarpByWarp: each warp in turn runs as far as it can (to the next __syncthreads) before
/// the next warp starts: the most skewed legal order, which turns a missing barrier into a
/// wrong result instead of a rare race.
enum class Schedule { Lockstep, WarpByWarp };

struct LaunchConfig {
  int grid_x = 1, grid_y = 1, grid_z = 1;
  int threads = 32;  ///< a multiple of 32
  int smem_bytes = 0;
  CopyTiming timing = CopyTiming::Deferred;
  Schedule schedule = Schedule::WarpByWarp;
};

/// A buffer the kernel may access.
struct Span {
  const void* data = nullptr;
  size_t bytes = 0;
  bool writable = false;
};

class Cta;

/// One emulated CUDA thread: the Dev of simt.hpp.
class Lane {
 public:
  int thread() const { return tid_; }
  int block_x() const;
  int block_y() const;
  int block_z() const;
  char* smem() const;
  void sync();

  void ldsm_x4(const uint16_t* p, uint32_t (&r)[4]) { ldsm(p, r, false); }
  void ldsm_x4_t(const uint16_t* p, uint32_t (&r)[4]) { ldsm(p, r, true); }
  void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
  float shfl_xor(float v, int lane_mask);
  float shfl_idx(float v, int src_lane);

  void cp_async16(void* smem_dst, const void* global_src, bool valid);
  void cp_async_commit();
  template <int N>
  void cp_async_wait() {
    wait_groups(N);
  }

  float exp2(float x) const;
  float log(float x) const;
  uint32_t pack_bf16x2(float lo, float hi) const;
  float bf16_lo(uint32_t pair) const;
  float bf16_hi(uint32_t pair) const;

  float load_f32(const float* p);
  int32_t load_i32(const int32_t* p);
  uint32_t load_u32(const uint32_t* p);
  void store_u32(uint32_t* p, uint32_t v);
  void store_f32(float* p, float v);
  void atomic_add(float* p, float v);

 private:
  friend class Cta;
  struct Copy {
    void* dst;
    unsigned char data[16];
  };
  void ldsm(const uint16_t* p, uint32_t (&r)[4], bool trans);
  void wait_groups(int keep);
  void check_global(const void* p, size_t bytes, bool write) const;

  Cta* cta_ = nullptr;
  int tid_ = 0;
  std::vector<Copy> open_;
  std::deque<std::vector<Copy>> groups_;
};

/// Runs `body` on every thread of every CTA of the grid. Aborts the process with a message on
/// any of the faults listed above (a kernel bug, not a recoverable condition).
void run(const LaunchConfig& cfg, const std::vector<Span>& memory,
         const std::function<void(Lane&)>& body);

}  // namespace cpsim::kernels::flash2::emu
