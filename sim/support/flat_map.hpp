#pragma once
/// A hash map from an integer key (an op id, a route's ends) to a small index: open
/// addressing with linear probing, at most half full, deletion by backward shift (no
/// tombstones), Fibonacci hashing (the product's top bits).
///
/// Why not std::unordered_map: its prime-modulo bucket index and node chase were 2.9 % of the
/// 70B full replay's samples in the route cache (looked up ~3 times per transfer), and the
/// solo transfers' member map allocated a node per transfer on join and freed it on finish:
/// instructions counted on the 70B full replay cut to 64 GPUs put those at ~6 % of the replay's
/// instructions.
///
/// Inline: find and set are on every transfer's start and end in the engines.
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

namespace cpsim::support {

/// Key's largest value is never a key (it marks an empty slot).
template <class Key>
class FlatMap {
 public:
  FlatMap() : slots_(kFirstSlots) {}
  /// id's value, or nullptr if it has none.
  const uint32_t* find(Key id) const {
    for (size_t i = home(id);; i = next(i)) {
      if (slots_[i].id == id) return &slots_[i].value;
      if (slots_[i].id == kEmpty) return nullptr;
    }
  }
  /// Sets id's value.
  void set(Key id, uint32_t value) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    size_t i = home(id);
    for (; slots_[i].id != kEmpty; i = next(i))
      if (slots_[i].id == id) {
        slots_[i].value = value;
        return;
      }
    slots_[i] = {id, value};
    ++used_;
  }
  /// Removes id's value, if any.
  void erase(Key id) {
    size_t i = home(id);
    for (; slots_[i].id != id; i = next(i))
      if (slots_[i].id == kEmpty) return;
    // Backward shift: each later entry of the run that may sit in the hole moves into it.
    for (size_t j = next(i);; j = next(j)) {
      if (slots_[j].id == kEmpty) break;
      const size_t h = home(slots_[j].id);
      // j's entry may move to i unless its home lies cyclically in (i, j].
      const bool stays = i <= j ? (h > i && h <= j) : (h > i || h <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].id = kEmpty;
    --used_;
  }
  size_t size() const { return used_; }

 private:
  static constexpr Key kEmpty = std::numeric_limits<Key>::max();
  static constexpr size_t kFirstSlots = 64;
  struct Slot {
    Key id = kEmpty;
    uint32_t value = 0;
  };
  size_t home(Key id) const {
    return static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> (64 - std::countr_zero(slots_.size())));
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (const Slot& s : old)
      if (s.id != kEmpty) set(s.id, s.value);
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace cpsim::support
