#include "support/touch_ahead.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>

namespace cpsim::support {

struct TouchAhead::Impl {
  std::atomic<bool> stop{false};
  std::thread t;
};

TouchAhead::TouchAhead(std::vector<std::pair<void*, size_t>> ranges) {
  size_t total = 0;
  for (const auto& r : ranges) total += r.second;
  if (total < kMinBytes) return;
  impl_ = std::make_unique<Impl>();
  try {
    impl_->t = std::thread([ranges = std::move(ranges), stop = &impl_->stop] {
      constexpr uintptr_t kPage = 4096;
      for (const auto& [p, bytes] : ranges) {
        const auto b = reinterpret_cast<uintptr_t>(p);
        for (uintptr_t lo = (b + kPage - 1) & ~(kPage - 1); lo < b + bytes; lo += kTouchStep) {
          if (stop->load(std::memory_order_relaxed)) return;
          madvise(reinterpret_cast<void*>(lo), std::min(b + bytes, lo + kTouchStep) - lo, MADV_POPULATE_WRITE);
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

}  // namespace cpsim::support
