#pragma once
/// A map from op id to a small value for the few thousand ops in flight at once (the transfers
/// running as timers, route_bundles.hpp): open addressing with linear probing, deletion by
/// backward shift (no tombstones), Fibonacci hashing.
///
/// Why not std::unordered_map: each transfer run as a timer was one node allocated on join and
/// freed on finish, with a lookup per queued end; callgrind on the 70B full replay cut to 64
/// GPUs put that map's allocations and frees at ~6 % of the replay's instructions.
#include <bit>
#include <cstdint>
#include <vector>

#include "schedule/task_graph.hpp"

namespace cpsim::engine::detail {

class OpMap {
 public:
  OpMap() : slots_(kFirstSlots) {}
  /// id's value, or nullptr if it has none.
  const uint32_t* find(schedule::OpId id) const {
    for (size_t i = home(id);; i = next(i)) {
      if (slots_[i].id == id) return &slots_[i].value;
      if (slots_[i].id == kEmpty) return nullptr;
    }
  }
  /// Sets id's value (id is never kNoOp).
  void set(schedule::OpId id, uint32_t value) {
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
  void erase(schedule::OpId id) {
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
  static constexpr schedule::OpId kEmpty = schedule::kNoOp;
  static constexpr size_t kFirstSlots = 64;
  struct Slot {
    schedule::OpId id = kEmpty;
    uint32_t value = 0;
  };
  size_t home(schedule::OpId id) const {
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

}  // namespace cpsim::engine::detail
