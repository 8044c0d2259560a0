#pragma once
/// The trace's per-op times, written by another core while the replay runs.
///
/// Why: a replay finishes ops in time order, and a rank's ops lie ~1,000 ids apart on the 70B
/// full replay, so every start and end written into the id-ordered arrays is a cache miss on
/// the replay's one thread (16 B per op: 24.3 M ops, 389 MB). Measured there, the replay without
/// keeping times took 3.52-4.59 s against 4.39-5.12 s with them, four runs each alternating.
/// Here the replay only appends (slot, time) to a block, in order; a full block goes to a
/// thread on the core the replay leaves idle, which writes the times in place. Each time is
/// written once, whoever writes it, so the arrays hold the same bytes as if written in place;
/// the replay waits only when the writer is a whole ring behind, and then writes that block
/// itself.
///
/// What it saves, measured on the 70B full replay (1,024 GPUs, symmetry off), whole process,
/// the times written in place against through this thread, three runs each alternating on a
/// shared 2-core machine (load ~16): wall 1.06-1.27x (median 1.22x), CPU 0.98-1.12x (median
/// 1.12x: the misses stall the replay's thread). JSON identical either way.
///
/// For a small graph or a one-core machine (support::threads_for gives 1), or where no thread
/// can be started, the times are written in place.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "schedule/task_graph.hpp"
#include "schedule/trace.hpp"

namespace cpsim::engine::detail {

class TraceWriter {
 public:
  /// Sizes tr's arrays for n ops (zeros) if `keep`; with
  /// keep false it writes nothing. `threads`: as support::threads_for's `asked` (0: by the
  /// graph's size and the machine's cores; 2 or more: a writer thread).
  TraceWriter(schedule::Trace& tr, size_t n, bool keep, unsigned threads = 0);
  /// Every time handed over is in the trace once this returns (or the destructor ran).
  void finish();
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// Whether the times go to another thread.
  bool threaded() const { return ring_ != nullptr; }
  /// Blocks the caller wrote itself, the writer being a whole ring behind (a diagnostic: none
  /// of the 70B full replay's 11,866).
  size_t blocks_written_here() const { return blocks_here_; }

  void start(schedule::OpId id, double t) { put(start_s_, id, t); }
  void end(schedule::OpId id, double t) { put(end_s_, id, t); }

  struct Entry {
    double* slot;
    double t;
  };
  /// Entries per block: 64 KB, handed over ~2,700 times a second on the 70B full replay.
  static constexpr size_t kBlock = 4096;

 private:
  void put(double* base, schedule::OpId id, double t) {
    if (base == nullptr) return;
    if (fill_ == nullptr) {
      base[id] = t;
      return;
    }
    *fill_++ = Entry{base + id, t};
    if (fill_ == fill_end_) hand_over();
  }
  void hand_over();

  double* start_s_ = nullptr;
  double* end_s_ = nullptr;
  Entry* fill_ = nullptr;  ///< next entry of the block being filled; nullptr: in place
  Entry* fill_end_ = nullptr;
  size_t blocks_here_ = 0;
  struct Ring;
  std::unique_ptr<Ring> ring_;
};

}  // namespace cpsim::engine::detail
