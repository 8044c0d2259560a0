#pragma once
/// An append-only vector stored in fixed chunks, for the task graph's ops.
///
/// Why not std::vector: a graph of 24 M ops (Llama-3 70B, 1,024 GPUs, full replay) is 2.5 GB
/// of Op. A std::vector grows by doubling, so it ends with up to 2x the memory it needs and, at
/// each growth, holds the old and the new buffer at once (3x) and copies every op; perf showed
/// _M_realloc_insert<Op> plus its page faults at ~25 % of a 4 M-op run. Chunks never move: no
/// copy, no peak, at most one partly filled chunk (4 MB) of slack.
/// Chunks are never zero-filled: each element is constructed when pushed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace cpsim::support {

/// kChunkBytes: each chunk's size (elements fill it to within one); 4 MB by default, the graph's
/// ops' and edges' chunks.
template <class T, size_t kChunkBytes = size_t{4} << 20>
class ChunkedVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  static_assert(kChunkBytes >= sizeof(T));
  /// Not a power of two in general: i / kChunk by a constant is a multiply and a shift.
  static constexpr size_t kChunk = kChunkBytes / sizeof(T);
  struct Free {
    void operator()(T* p) const { ::operator delete(p); }
  };
  using Chunk = std::unique_ptr<T[], Free>;
  static Chunk new_chunk() {
    // operator new, not malloc: out of memory goes through the new-handler, which names what
    // the process was doing (app/boundary.cpp).
    return Chunk(static_cast<T*>(::operator new(kChunkBytes)));
  }

 public:
  ChunkedVector() = default;
  ChunkedVector(ChunkedVector&&) noexcept = default;
  ChunkedVector& operator=(ChunkedVector&&) noexcept = default;
  ChunkedVector(const ChunkedVector& o) { *this = o; }
  ChunkedVector& operator=(const ChunkedVector& o) {
    if (this == &o) return *this;
    clear();
    for (const T& v : o) push_back(v);
    return *this;
  }

  void push_back(const T& v) {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(new_chunk());
    ::new (&(*this)[size_]) T(v);
    ++size_;
  }
  T& operator[](size_t i) { return chunks_[i / kChunk][i % kChunk]; }
  const T& operator[](size_t i) const { return chunks_[i / kChunk][i % kChunk]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() {
    chunks_.clear();
    size_ = 0;
  }

  template <class V, class Owner>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = V*;
    using reference = V&;
    Iter() = default;
    Iter(Owner* o, size_t i) : o_(o), i_(i) {}
    reference operator*() const { return (*o_)[i_]; }
    pointer operator->() const { return &(*o_)[i_]; }
    Iter& operator++() {
      ++i_;
      return *this;
    }
    Iter operator++(int) {
      Iter t = *this;
      ++i_;
      return t;
    }
    bool operator==(const Iter& b) const { return i_ == b.i_; }
    bool operator!=(const Iter& b) const { return i_ != b.i_; }

   private:
    Owner* o_ = nullptr;
    size_t i_ = 0;
  };
  using iterator = Iter<T, ChunkedVector>;
  using const_iterator = Iter<const T, const ChunkedVector>;
  iterator begin() { return {this, 0}; }
  iterator end() { return {this, size_}; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  std::vector<Chunk> chunks_;
  size_t size_ = 0;
};

}  // namespace cpsim::support
