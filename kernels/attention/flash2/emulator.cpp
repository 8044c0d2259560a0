// CPU SIMT emulator: fibers (ucontext) for threads, slots between warp barriers for
// warp-collective operations.
#include "emulator.hpp"

#include <ucontext.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "../reference/reference.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define CPK_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CPK_EMU_ASAN 1
#endif
#endif
#if defined(CPK_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace cpsim::kernels::flash2::emu {
namespace {

[[noreturn]] void fault(const char* fmt, ...) {
  std::va_list args;
  va_start(args, fmt);
  std::fputs("flash2 emulator: kernel fault: ", stderr);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::abort();
}

constexpr size_t kStackBytes = 256 * 1024;

// Round to nearest even, as __floats2bfloat162_rn.
uint16_t bf16_bits(float x) { return reference::to_bf16_bits(x); }
float bf16_value(uint16_t bits) { return reference::from_bf16_bits(bits); }

}  // namespace

/// Shared state of the CTA being run, and the fiber scheduler.
class Cta {
 public:
  Cta(const LaunchConfig& cfg, const std::vector<Span>& memory,
      const std::function<void(Lane&)>& body)
      : cfg_(cfg),
        memory_(memory),
        body_(body),
        lanes_(static_cast<size_t>(cfg.threads)),
        contexts_(static_cast<size_t>(cfg.threads)),
        done_(static_cast<size_t>(cfg.threads)),
        block_waiting_(static_cast<size_t>(cfg.threads)),
        block_wait_gen_(static_cast<size_t>(cfg.threads)),
        warp_arrived_(static_cast<size_t>(cfg.threads / 32)),
        warp_gen_(static_cast<size_t>(cfg.threads / 32)),
        slots_(static_cast<size_t>(cfg.threads / 32)) {
    smem_storage_.reset(new unsigned char[static_cast<size_t>(cfg.smem_bytes) + 256]);
    smem_ = smem_storage_.get() + (128 - reinterpret_cast<uintptr_t>(smem_storage_.get()) % 128);
    for (int t = 0; t < cfg.threads; ++t) {
      stacks_.emplace_back(new char[kStackBytes]);
      lanes_[t].cta_ = this;
      lanes_[t].tid_ = t;
    }
  }

  void run_block(int bx, int by, int bz) {
    bx_ = bx;
    by_ = by;
    bz_ = bz;
    std::memset(smem_, 0xff, static_cast<size_t>(cfg_.smem_bytes));  // NaN in BF16 and FP32
    block_arrived_ = 0;
    for (size_t w = 0; w < warp_arrived_.size(); ++w) warp_arrived_[w] = 0;
    for (int t = 0; t < cfg_.threads; ++t) {
      done_[t] = 0;
      block_waiting_[t] = 0;
      lanes_[t].open_.clear();
      lanes_[t].groups_.clear();
      make_fiber(contexts_[t], stacks_[t].get(), &scheduler_);
    }
    remaining_ = cfg_.threads;
    while (remaining_ > 0) {
      const uint64_t before = progress_;
      if (cfg_.schedule == Schedule::Lockstep) {
        for (int t = 0; t < cfg_.threads; ++t) resume(t);
      } else {
        for (int w = 0; w < cfg_.threads / 32; ++w) {
          // Run this warp until each of its threads has finished or waits at __syncthreads.
          for (bool ran = true; ran;) {
            ran = false;
            const uint64_t start = progress_;
            for (int t = 32 * w; t < 32 * w + 32; ++t) {
              if (done_[t] || (block_waiting_[t] && block_gen_ == block_wait_gen_[t])) continue;
              resume(t);
              ran = true;
            }
            if (progress_ == start) break;  // stuck inside the warp: the round check reports it
          }
        }
      }
      if (remaining_ > 0 && progress_ == before) {
        fault("deadlock in block (%d,%d,%d): %d threads wait at barriers no other thread reaches",
              bx, by, bz, remaining_);
      }
    }
  }

  // Barriers. The fiber that completes a barrier continues; the others see the generation
  // change when next scheduled.
  void block_barrier() {
    const int t = current_;
    block_waiting_[t] = 1;
    block_wait_gen_[t] = block_gen_;
    barrier(block_arrived_, block_gen_, cfg_.threads);
    block_waiting_[t] = 0;
  }
  void warp_barrier(int warp) { barrier(warp_arrived_[warp], warp_gen_[warp], 32); }

  struct Slots {
    const uint16_t* addr[32];
    uint32_t a[32][4];
    uint32_t b[32][2];
    float v[32];
  };
  Slots& slots(int warp) { return slots_[warp]; }

  bool in_smem(const void* p, size_t bytes) const {
    const auto* c = static_cast<const unsigned char*>(p);
    return c >= smem_ && c + bytes <= smem_ + cfg_.smem_bytes;
  }
  const std::vector<Span>& memory() const { return memory_; }
  const LaunchConfig& config() const { return cfg_; }
  unsigned char* smem() const { return smem_; }
  int bx_ = 0, by_ = 0, bz_ = 0;

 private:
  // Out of line: getcontext returns twice, and must not share a frame with loop variables.
  [[gnu::noinline]] static void make_fiber(ucontext_t& ctx, char* stack, ucontext_t* link) {
    getcontext(&ctx);
    ctx.uc_stack.ss_sp = stack;
    ctx.uc_stack.ss_size = kStackBytes;
    ctx.uc_link = link;
    makecontext(&ctx, &Cta::fiber_entry, 0);
  }

  void resume(int t) {
    if (done_[t]) return;
    current_ = t;
    active_ = this;
    switch_to(contexts_[t], stacks_[t].get());
    if (done_[t]) --remaining_;
  }

  static void fiber_entry() {
    Cta* self = active_;
    const int t = self->current_;
#if defined(CPK_EMU_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &self->sched_stack_bottom_, &self->sched_stack_size_);
#endif
    self->body_(self->lanes_[t]);
    if (!self->lanes_[t].groups_.empty() || !self->lanes_[t].open_.empty()) {
      fault("thread %d of block (%d,%d,%d) exits with cp.async copies never waited for", t,
            self->bx_, self->by_, self->bz_);
    }
    self->done_[t] = 1;
    ++self->progress_;
#if defined(CPK_EMU_ASAN)
    __sanitizer_start_switch_fiber(nullptr, self->sched_stack_bottom_, self->sched_stack_size_);
#endif
  }

  void switch_to(ucontext_t& ctx, char* stack) {
#if defined(CPK_EMU_ASAN)
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, stack, kStackBytes);
    swapcontext(&scheduler_, &ctx);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    (void)stack;
    swapcontext(&scheduler_, &ctx);
#endif
  }

  void yield() {
    const int t = current_;
#if defined(CPK_EMU_ASAN)
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, sched_stack_bottom_, sched_stack_size_);
    swapcontext(&contexts_[t], &scheduler_);
    __sanitizer_finish_switch_fiber(fake, &sched_stack_bottom_, &sched_stack_size_);
#else
    swapcontext(&contexts_[t], &scheduler_);
#endif
  }

  void barrier(int& arrived, uint64_t& gen, int size) {
    const uint64_t mine = gen;
    ++progress_;
    if (++arrived == size) {
      arrived = 0;
      ++gen;
      return;
    }
    while (gen == mine) yield();
  }

  static inline thread_local Cta* active_ = nullptr;

  const LaunchConfig& cfg_;
  const std::vector<Span>& memory_;
  const std::function<void(Lane&)>& body_;
  std::unique_ptr<unsigned char[]> smem_storage_;
  unsigned char* smem_ = nullptr;
  std::vector<Lane> lanes_;
  std::vector<std::unique_ptr<char[]>> stacks_;
  std::vector<ucontext_t> contexts_;
  ucontext_t scheduler_{};
  std::vector<char> done_;
  std::vector<char> block_waiting_;  ///< at __syncthreads, since generation block_wait_gen_
  std::vector<uint64_t> block_wait_gen_;
  int current_ = 0;
  int remaining_ = 0;
  uint64_t progress_ = 0;
  int block_arrived_ = 0;
  uint64_t block_gen_ = 0;
  std::vector<int> warp_arrived_;
  std::vector<uint64_t> warp_gen_;
  std::vector<Slots> slots_;
  const void* sched_stack_bottom_ = nullptr;
  size_t sched_stack_size_ = 0;
};

int Lane::block_x() const { return cta_->bx_; }
int Lane::block_y() const { return cta_->by_; }
int Lane::block_z() const { return cta_->bz_; }
char* Lane::smem() const { return reinterpret_cast<char*>(cta_->smem()); }
void Lane::sync() { cta_->block_barrier(); }

void Lane::ldsm(const uint16_t* p, uint32_t (&r)[4], bool trans) {
  const int warp = tid_ / 32, lane = tid_ % 32;
  if (!cta_->in_smem(p, 16) || reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    fault("ldmatrix row address %p of thread %d is outside shared memory or not 16-byte aligned",
          static_cast<const void*>(p), tid_);
  }
  Cta::Slots& s = cta_->slots(warp);
  s.addr[lane] = p;
  cta_->warp_barrier(warp);
  const int g = lane / 4, t = lane % 4;
  for (int m = 0; m < 4; ++m) {
    uint16_t lo, hi;
    if (!trans) {  // thread holds row g, columns 2t, 2t+1 of matrix m
      lo = s.addr[m * 8 + g][2 * t];
      hi = s.addr[m * 8 + g][2 * t + 1];
    } else {  // thread holds rows 2t, 2t+1 of column g
      lo = s.addr[m * 8 + 2 * t][g];
      hi = s.addr[m * 8 + 2 * t + 1][g];
    }
    r[m] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
  cta_->warp_barrier(warp);
}

void Lane::mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const int warp = tid_ / 32, lane = tid_ % 32;
  Cta::Slots& s = cta_->slots(warp);
  for (int i = 0; i < 4; ++i) s.a[lane][i] = a[i];
  s.b[lane][0] = b0;
  s.b[lane][1] = b1;
  cta_->warp_barrier(warp);
  // A (16x16, row): lane (r%8)*4 + (k%8)/2, register (r/8) + 2*(k/8), half k%2.
  // B (16x8, col): lane n*4 + (k%8)/2, register k/8, half k%2.
  auto half = [](uint32_t w, int k) {
    return static_cast<uint16_t>(k % 2 ? w >> 16 : w & 0xffffu);
  };
  auto A = [&](int r, int k) {
    return bf16_value(half(s.a[(r % 8) * 4 + (k % 8) / 2][r / 8 + 2 * (k / 8)], k));
  };
  auto B = [&](int k, int n) { return bf16_value(half(s.b[n * 4 + (k % 8) / 2][k / 8], k)); };
  const int g = lane / 4, t = lane % 4;
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int r = g + (e / 2) * 8, n = 2 * t + e % 2;
    float acc = d[e];
    for (int k = 0; k < 16; ++k) acc += A(r, k) * B(k, n);
    out[e] = acc;
  }
  cta_->warp_barrier(warp);
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

float Lane::shfl_xor(float v, int lane_mask) {
  const int warp = tid_ / 32, lane = tid_ % 32;
  Cta::Slots& s = cta_->slots(warp);
  s.v[lane] = v;
  cta_->warp_barrier(warp);
  const float out = s.v[(lane ^ lane_mask) & 31];
  cta_->warp_barrier(warp);
  return out;
}

float Lane::shfl_idx(float v, int src_lane) {
  const int warp = tid_ / 32, lane = tid_ % 32;
  Cta::Slots& s = cta_->slots(warp);
  s.v[lane] = v;
  cta_->warp_barrier(warp);
  const float out = s.v[src_lane & 31];
  cta_->warp_barrier(warp);
  return out;
}

void Lane::cp_async16(void* smem_dst, const void* global_src, bool valid) {
  if (!cta_->in_smem(smem_dst, 16) || reinterpret_cast<uintptr_t>(smem_dst) % 16 != 0) {
    fault("cp.async destination %p of thread %d is outside shared memory or misaligned", smem_dst,
          tid_);
  }
  Copy c{};
  c.dst = smem_dst;
  if (valid) {
    check_global(global_src, 16, false);
    std::memcpy(c.data, global_src, 16);
  }
  if (cta_->config().timing == CopyTiming::Eager) {
    std::memcpy(c.dst, c.data, 16);
  } else {
    open_.push_back(c);
  }
}

void Lane::cp_async_commit() {
  if (cta_->config().timing == CopyTiming::Eager) return;
  groups_.push_back(std::move(open_));
  open_.clear();
}

void Lane::wait_groups(int keep) {
  while (static_cast<int>(groups_.size()) > keep) {
    for (const Copy& c : groups_.front()) std::memcpy(c.dst, c.data, 16);
    groups_.pop_front();
  }
}

float Lane::exp2(float x) const { return std::exp2(x); }
float Lane::log(float x) const { return std::log(x); }
uint32_t Lane::pack_bf16x2(float lo, float hi) const {
  return static_cast<uint32_t>(bf16_bits(lo)) | (static_cast<uint32_t>(bf16_bits(hi)) << 16);
}
float Lane::bf16_lo(uint32_t pair) const {
  return bf16_value(static_cast<uint16_t>(pair & 0xffffu));
}
float Lane::bf16_hi(uint32_t pair) const { return bf16_value(static_cast<uint16_t>(pair >> 16)); }

void Lane::check_global(const void* p, size_t bytes, bool write) const {
  if (reinterpret_cast<uintptr_t>(p) % (bytes < 16 ? bytes : 16) != 0) {
    fault("global access %p of %zu bytes by thread %d of block (%d,%d,%d) is misaligned", p, bytes,
          tid_, cta_->bx_, cta_->by_, cta_->bz_);
  }
  const auto* c = static_cast<const unsigned char*>(p);
  for (const Span& s : cta_->memory()) {
    const auto* lo = static_cast<const unsigned char*>(s.data);
    if (c >= lo && c + bytes <= lo + s.bytes) {
      if (write && !s.writable) break;
      return;
    }
  }
  fault("global %s %p of %zu bytes by thread %d of block (%d,%d,%d) is outside every %sbuffer",
        write ? "write" : "read", p, bytes, tid_, cta_->bx_, cta_->by_, cta_->bz_,
        write ? "writable " : "");
}

float Lane::load_f32(const float* p) {
  check_global(p, 4, false);
  return *p;
}
int32_t Lane::load_i32(const int32_t* p) {
  check_global(p, 4, false);
  return *p;
}
uint32_t Lane::load_u32(const uint32_t* p) {
  check_global(p, 4, false);
  return *p;
}
void Lane::store_u32(uint32_t* p, uint32_t v) {
  check_global(p, 4, true);
  *p = v;
}
void Lane::store_f32(float* p, float v) {
  check_global(p, 4, true);
  *p = v;
}
void Lane::atomic_add(float* p, float v) {
  check_global(p, 4, true);
  *p += v;
}

void run(const LaunchConfig& cfg, const std::vector<Span>& memory,
         const std::function<void(Lane&)>& body) {
  if (cfg.threads <= 0 || cfg.threads % 32 != 0)
    fault("block size %d is not a multiple of 32", cfg.threads);
  Cta cta(cfg, memory, body);
  for (int z = 0; z < cfg.grid_z; ++z)
    for (int y = 0; y < cfg.grid_y; ++y)
      for (int x = 0; x < cfg.grid_x; ++x) cta.run_block(x, y, z);
}

}  // namespace cpsim::kernels::flash2::emu
