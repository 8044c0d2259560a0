#pragma once
/// The [TP, CP, PP, DP] mesh: which GPU holds which coordinate, and the groups along each axis.
#include <array>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::schedule {

/// Rank placement of the mesh. `order` lists dimensions innermost first: with tp-cp-pp-dp, TP
/// peers are adjacent GPUs (same node) and DP replicas are farthest apart.
class Mesh {
 public:
  enum Dim { kTp = 0, kCp = 1, kPp = 2, kDp = 3 };
  explicit Mesh(const scenario::ParallelSpec& p);
  int size() const { return size_[0] * size_[1] * size_[2] * size_[3]; }
  int dim_size(Dim d) const { return size_[d]; }
  int rank_of(const std::array<int, 4>& coord) const;
  std::array<int, 4> coord_of(int rank) const;
  /// The ranks that differ from `rank` only along `d`, in coordinate order.
  std::vector<int> group(int rank, Dim d) const;

 private:
  std::array<int, 4> size_{};
  std::array<int, 4> order_{};   ///< order_[k] = dimension at nesting level k (0 innermost)
};

}  // namespace cpsim::schedule
