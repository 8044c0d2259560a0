#include "engine/trace_writer.hpp"

#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>

#include "support/threads.hpp"

namespace cpsim::engine::detail {

namespace {
void write_all(const TraceWriter::Entry* b, const TraceWriter::Entry* e) {
  for (; b != e; ++b) *b->slot = b->t;
}
}  // namespace

/// Blocks handed over in sequence: block s is buffer s % kBlocks. The replay fills block
/// `next` only once the writer is done with block next - kBlocks; meanwhile it fills `spare`
/// and writes that itself.
struct TraceWriter::Ring {
  /// 32 blocks, 2 MB: ~11 ms of the 70B full replay's ends and starts.
  static constexpr uint32_t kBlocks = 32;
  static constexpr uint32_t kStop = uint32_t{1} << 31;
  /// How long the writer sleeps when it has caught up: ~3 blocks of the 70B full replay.
  static constexpr int kPollUs = 1000;
  std::unique_ptr<Entry[]> blocks{new Entry[size_t{kBlocks} * kBlock]};
  std::unique_ptr<Entry[]> spare{new Entry[kBlock]};
  std::atomic<uint32_t> published{0};  ///< blocks handed over, kStop once there are no more
  std::atomic<uint32_t> consumed{0};   ///< blocks written by the writer
  uint32_t next = 0;                   ///< the replay's: the block it fills (unless on_spare)
  bool on_spare = false;
  std::thread t;

  Entry* block(uint32_t s) const { return blocks.get() + size_t{s % kBlocks} * kBlock; }

  void run() {
    uint32_t c = 0;
    for (;;) {
      const uint32_t p = published.load(std::memory_order_acquire);
      for (; c < (p & ~kStop); consumed.store(++c, std::memory_order_release)) write_all(block(c), block(c) + kBlock);
      if (p & kStop) return;
      // Polled, not woken: a wake-up is a system call on the replay's thread for each block.
      while (published.load(std::memory_order_relaxed) == p) std::this_thread::sleep_for(std::chrono::microseconds(kPollUs));
    }
  }
};

TraceWriter::TraceWriter(schedule::Trace& tr, size_t n, bool keep, unsigned threads) {
  if (!keep) return;
  tr.start_s = schedule::TimeArray(n);
  tr.end_s = schedule::TimeArray(n);
  start_s_ = tr.start_s.data();
  end_s_ = tr.end_s.data();
  if (support::threads_for(threads, n) < 2) return;
  auto ring = std::make_unique<Ring>();
  try {
    ring->t = std::thread([r = ring.get()] { r->run(); });
  } catch (const std::system_error&) {
    return;  // no thread: written in place
  }
  ring_ = std::move(ring);
  fill_ = ring_->block(0);
  fill_end_ = fill_ + kBlock;
}

void TraceWriter::hand_over() {
  Ring& r = *ring_;
  if (r.on_spare) {
    ++blocks_here_;
    write_all(r.spare.get(), fill_);
  } else {
    r.published.store(++r.next, std::memory_order_release);
  }
  r.on_spare = r.next - r.consumed.load(std::memory_order_acquire) >= Ring::kBlocks;
  fill_ = r.on_spare ? r.spare.get() : r.block(r.next);
  fill_end_ = fill_ + kBlock;
}

void TraceWriter::finish() {
  if (!ring_) return;
  Ring& r = *ring_;
  write_all(r.on_spare ? r.spare.get() : r.block(r.next), fill_);  // the last, partly filled
  r.published.store(r.next | Ring::kStop, std::memory_order_release);
  r.t.join();
  ring_.reset();
  fill_ = fill_end_ = nullptr;
}

TraceWriter::~TraceWriter() { finish(); }

}  // namespace cpsim::engine::detail
