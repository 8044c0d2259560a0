#include "schedule/touch_ahead.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

namespace cpsim::schedule {

struct TouchAhead::Impl {
  std::atomic<bool> stop{false};
  std::thread t;
};

TouchAhead::TouchAhead(std::vector<std::pair<void*, size_t>> ranges, size_t parts) {
  size_t total = 0;
  for (const auto& r : ranges) total += r.second;
  if (total < kMinBytes || parts == 0) return;
  impl_ = std::make_unique<Impl>();
  try {
    impl_->t = std::thread([ranges = std::move(ranges), parts, stop = &impl_->stop] {
      constexpr uintptr_t kPage = 4096;
      bool more = true;
      for (size_t j = 0; more && !stop->load(std::memory_order_relaxed); ++j) {
        more = false;
        for (const auto& [p, bytes] : ranges)
          for (size_t k = 0; k < parts; ++k) {
            const auto b = reinterpret_cast<uintptr_t>(p);
            const uintptr_t part_lo = b + bytes * k / parts, part_hi = b + bytes * (k + 1) / parts;
            const uintptr_t lo = (part_lo + j * kTouchStep + kPage - 1) & ~(kPage - 1);
            const uintptr_t hi = std::min(part_hi, part_lo + (j + 1) * kTouchStep);
            if (lo >= hi) continue;
            more = true;
            madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE);
          }
      }
    });
  } catch (const std::system_error&) {  // no thread: the caller faults them in itself
    impl_.reset();
  }
}

TouchAhead::~TouchAhead() {
  if (!impl_) return;
  impl_->stop = true;
  impl_->t.join();
}

}  // namespace cpsim::schedule
