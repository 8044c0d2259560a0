#pragma once
/// Transparent huge pages for the few arrays that grow with the graph (issue 20).
///
/// Why: a 24 M-op graph touches gigabytes once, and in this project's VM each first touch of a
/// 4 KB page is a fault (perf: pvm_irq_enable and page-fault paths at ~22 % of a 3.9 M-op run).
/// Debian's kernel ships THP in "madvise" mode: only ranges that ask get 2 MB pages. Asking for
/// the graph's arrays cut that run's user time from 4.9 s to 3.0 s (measured with glibc's
/// glibc.malloc.hugetlb=1 tunable, which asks for every large allocation).
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace cpsim::schedule {

inline constexpr size_t kHugePage = size_t{2} << 20;

/// Asks for huge pages on the 2 MB-aligned part of [p, p + bytes). A hint: ignored where THP is
/// off, harmless on memory already touched.
inline void huge_page_hint(void* p, size_t bytes) {
  if (bytes < kHugePage) return;
  const auto b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (b + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t hi = (b + bytes) & ~(kHugePage - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

/// Faults ranges in, writable, on another thread while the caller works in them, 2 MB at a
/// time: each range cut in `parts` equal parts, taken a chunk each in turn, for a caller that
/// works through every part at about the same pace (the replay through each replica's ops).
/// It writes nothing: a page the caller has written meanwhile keeps what it holds
/// (MADV_POPULATE_WRITE, Linux 5.14; where the kernel refuses, the caller's own writes fault
/// the pages in as before). Stops early when destroyed; does nothing below kMinBytes.
///
/// Why: in this project's VM the first touch of memory the guest has not touched lately costs
/// the host's page faults too: measured, 1 GB memset in a fresh process 1.9-2.3 s on one core
/// and 1.06 s split over two (0.05 s once faulted in); the 70B full replay touches ~1 GB. The
/// trace's times (zeroed_alloc.hpp) are written over the whole replay while its second core
/// idles: faulted in beforehand they held the replay's start back (0.6 s of its setup, cold).
class TouchAhead {
 public:
  static constexpr size_t kMinBytes = size_t{32} << 20;
  TouchAhead(std::vector<std::pair<void*, size_t>> ranges, size_t parts = 1);
  ~TouchAhead();
  TouchAhead(const TouchAhead&) = delete;
  TouchAhead& operator=(const TouchAhead&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// v.assign(n, value) on huge pages: reserve (untouched memory), hint, then fill; the second
/// half faulted in on another core meanwhile (TouchAhead).
template <class T>
void assign_huge(std::vector<T>& v, size_t n, const T& value) {
  std::vector<T>().swap(v);
  v.reserve(n);
  huge_page_hint(v.data(), n * sizeof(T));
  const size_t half = n / 2;
  const TouchAhead ahead({{v.data() + half, (n - half) * sizeof(T)}});
  v.assign(n, value);
}

}  // namespace cpsim::schedule
