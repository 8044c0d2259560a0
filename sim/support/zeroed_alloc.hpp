#pragma once
/// An allocator for large per-op arrays that a vector can size without touching: its memory
/// reads as zero before it is written (calloc: fresh pages from the kernel for a large block,
/// cleared by calloc for a small one), so value-initialising an element writes nothing.
///
/// Why: the trace's per-op times are 16 B per op, 389 MB on the 70B full replay, and a first
/// touch of a fresh page is a page fault and a page cleared (touch_ahead.hpp),
/// and sizing them with std::vector wrote every page before the replay began; now they are
/// written, faults and all, on the idle core while the replay runs (engine/trace_writer.hpp).
///
/// The price of writing nothing: a vector shrunk and then grown again keeps what its memory
/// held past the shrink, not zeros. The trace's arrays are sized once.
#include <cstddef>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <utility>

namespace cpsim::support {

template <class T>
struct ZeroedAlloc {
  static_assert(std::is_arithmetic_v<T>, "all-zero bits must be a zero value");
  using value_type = T;
  ZeroedAlloc() = default;
  template <class U>
  ZeroedAlloc(const ZeroedAlloc<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator
  T* allocate(size_t n) {
    void* p = std::calloc(n, sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) noexcept { std::free(p); }
  /// Value-initialisation: the memory is zero already (see above).
  template <class U>
  void construct(U*) noexcept {}
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
  template <class U>
  bool operator==(const ZeroedAlloc<U>&) const noexcept {
    return true;
  }
};

}  // namespace cpsim::support
