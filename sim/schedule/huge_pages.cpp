#include "schedule/huge_pages.hpp"

#include <system_error>
#include <thread>

namespace cpsim::schedule {

struct Prefault::Impl {
  std::thread t;
};

Prefault::Prefault(void* p, size_t bytes) {
  if (bytes < kPrefaultBytes) return;
  constexpr uintptr_t kPage = 4096;
  const auto b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (b + kPage - 1) & ~(kPage - 1);  // madvise wants a page-aligned start
  const uintptr_t hi = b + bytes;
  if (hi <= lo) return;
  impl_ = std::make_unique<Impl>();
  try {
    impl_->t = std::thread([lo, hi] {
      // (A refusal, EINVAL before Linux 5.14, leaves the pages to the caller's writes.)
      madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE);
    });
  } catch (const std::system_error&) {  // no thread: the caller faults them in itself
    impl_.reset();
  }
}

Prefault::~Prefault() {
  if (impl_) impl_->t.join();
}

}  // namespace cpsim::schedule
