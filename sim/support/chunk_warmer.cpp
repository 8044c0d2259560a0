#include "support/chunk_warmer.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace cpsim::support {

namespace {
constexpr size_t kBytes = ChunkWarmer::kChunkBytes;
std::mutex g_mu;
ChunkWarmer::Impl* g_live = nullptr;  // under g_mu
}  // namespace

struct ChunkWarmer::Impl {
  std::condition_variable cv;
  std::vector<void*> ready;  // under g_mu
  size_t taken = 0;          // under g_mu
  bool stop = false;         // under g_mu
  std::thread t;

  /// Chunks to keep ready now: as many as were taken, up to kAhead.
  size_t want() const { return std::min(kAhead, taken); }

  void run() {
    std::unique_lock lk(g_mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || ready.size() < want(); });
      if (stop) return;
      lk.unlock();
      // (No new-handler here: out of memory, the builder's own allocation reports it.)
      void* p = ::operator new(kBytes, std::align_val_t(ChunkWarmer::kAlign), std::nothrow);
      // Faulted in without writing (Linux 5.14); where refused, the builder's writes fault them.
      if (p != nullptr) madvise(p, kBytes, MADV_POPULATE_WRITE);
      lk.lock();
      if (p == nullptr) return;
      ready.push_back(p);
    }
  }
};

ChunkWarmer::ChunkWarmer() {
  std::lock_guard lk(g_mu);
  if (g_live != nullptr) return;
  impl_ = std::make_unique<Impl>();
  g_live = impl_.get();
}

ChunkWarmer::~ChunkWarmer() {
  if (!impl_) return;
  {
    std::lock_guard lk(g_mu);
    impl_->stop = true;
    g_live = nullptr;
  }
  impl_->cv.notify_all();
  if (impl_->t.joinable()) impl_->t.join();
  // Those left over go back to the kernel (their memory may stay in the allocator's heap).
  for (void* p : impl_->ready) {
    madvise(p, kBytes, MADV_DONTNEED);
    ::operator delete(p, std::align_val_t(kAlign));
  }
}

void* ChunkWarmer::take(size_t bytes) {
  std::unique_lock lk(g_mu);
  Impl* w = g_live;
  if (w == nullptr || bytes != kBytes) return nullptr;
  ++w->taken;
  // The thread starts with the second chunk: a graph of one chunk never pays for it.
  if (!w->t.joinable() && w->taken >= 2) {
    try {
      w->t = std::thread([w] { w->run(); });
    } catch (const std::system_error&) {  // no thread: the builder faults its chunks itself
      g_live = nullptr;
      return nullptr;
    }
  }
  void* p = nullptr;
  if (!w->ready.empty()) {
    p = w->ready.back();
    w->ready.pop_back();
  }
  lk.unlock();
  w->cv.notify_one();
  return p;
}

}  // namespace cpsim::support
