#pragma once
/// Chunks for ChunkedVector faulted in ahead, on another core, while the task graph
/// is built.
///
/// Why: the first touch of a fresh page is a page fault and a page cleared by the kernel
/// (touch_ahead.hpp). Building the 70B full replay's graph stores
/// 3.2 M ops and their edges, ~400 MB of chunks; measured with perf on a cold run (huge pages
/// then), page clearing was ~55 % of the build's samples (1.9 s against 0.75 s warm), all on
/// the building thread while the other core sat idle.
///
/// While a ChunkWarmer is alive, ChunkedVector's 4 MB chunks come from it: a thread keeps a few
/// chunks faulted in ahead of the builder, as many as it has taken so far up to kAhead, so a
/// small graph (a chunk or two) warms at most one chunk it never uses. Nothing is shared but
/// memory that ChunkedVector frees as it frees its own chunks; the build's results are the same
/// bytes. One warmer at a time per process (plan() is not re-entered): a second one warms nothing.
#include <cstddef>
#include <memory>

namespace cpsim::support {

class ChunkWarmer {
 public:
  /// ChunkedVector's default chunk, the one the graph's ops and edges use.
  static constexpr size_t kChunkBytes = size_t{4} << 20;
  /// Chunks' alignment: a page, since MADV_POPULATE_WRITE wants a page-aligned start (2 MB
  /// while chunks asked for huge pages, touch_ahead.hpp).
  static constexpr size_t kAlign = 4096;
  /// Chunks kept ready at most (16 MB): faulting one in takes the other core ~8 ms, filling it
  /// the builder ~10 ms (3.2 M ops of 104 B in ~0.75 s warm), so a few ahead keep it fed.
  static constexpr size_t kAhead = 4;
  ChunkWarmer();
  ~ChunkWarmer();
  ChunkWarmer(const ChunkWarmer&) = delete;
  ChunkWarmer& operator=(const ChunkWarmer&) = delete;

  /// A chunk of `bytes` from the live warmer, faulted in, aligned and released as
  /// ChunkedVector's own (operator new with kAlign); nullptr if there is no
  /// warmer, it warms chunks of another size, or none is ready yet.
  static void* take(size_t bytes);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cpsim::support
