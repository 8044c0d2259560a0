#pragma once
/// Large arrays faulted in on the idle core while the caller works in them.
///
/// Why: the first touch of a fresh page is a page fault and a page cleared by the kernel, and
/// the 70B full replay touches ~0.9 GB. Done on the second core, that cost hides behind work.
///
/// Why 4 KB pages, not transparent huge pages: the graph's chunks and arrays once asked for
/// THP (MADV_HUGEPAGE). On a 2-core virtual machine each huge-page fault cost ~5 ms unless the
/// same 2 MB frames were freed by a huge-page process just before: measured with /proc/vmstat, one
/// 70B full replay took 406 thp_fault_alloc (no compaction) and 2.2-2.5 s of system time,
/// against 0.52-0.65 s with 4 KB pages, whether it ran after 8 s idle, after a 4 KB run or
/// after a link. Five runs of each, alternating, 2 s idle before each: whole process
/// 7.62-9.00 s with THP, 7.16-7.95 s without; replay 4.80-5.63 s against 4.74-5.11 s. Warm
/// (THP after THP, the 70B cut to 16 layers, eight runs each) the two were the same, 1.23-1.60 s
/// against 1.27-1.56 s: fewer TLB misses gained nothing that would pay for it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace cpsim::support {

/// How much TouchAhead faults in at a time.
inline constexpr size_t kTouchStep = size_t{2} << 20;

/// Faults ranges in, writable, on another thread while the caller works in them, 2 MB at a
/// time from the front. It writes nothing: a page the caller has written meanwhile keeps what it holds
/// (MADV_POPULATE_WRITE, Linux 5.14; where the kernel refuses, the caller's own writes fault
/// the pages in as before). Stops early when destroyed; does nothing below kMinBytes.
///
/// Why: measured on a 2-core virtual machine, 900 MB of fresh 4 KB pages written in 0.37-0.64 s on one core (it
/// was 1.9-2.3 s per GB with huge pages, 0.05 s once faulted in). The
/// arrays that assign_ahead fills (the replay's wait counts, the graph's CSR) are written front
/// to back, so the other core faults in the back half meanwhile.
class TouchAhead {
 public:
  static constexpr size_t kMinBytes = size_t{32} << 20;
  explicit TouchAhead(std::vector<std::pair<void*, size_t>> ranges);
  ~TouchAhead();
  TouchAhead(const TouchAhead&) = delete;
  TouchAhead& operator=(const TouchAhead&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// v.assign(n, value) with the second half faulted in on another core meanwhile (TouchAhead).
template <class T>
void assign_ahead(std::vector<T>& v, size_t n, const T& value) {
  std::vector<T>().swap(v);
  v.reserve(n);
  const size_t half = n / 2;
  const TouchAhead ahead({{v.data() + half, (n - half) * sizeof(T)}});
  v.assign(n, value);
}

}  // namespace cpsim::support
