#include "report/rank_ops.hpp"

#include <algorithm>

#include "report/comm_split.hpp"

namespace cpsim::report {

RankOps::RankOps(const schedule::TaskGraph& g) {
  const size_t nr = static_cast<size_t>(std::max(0, g.num_ranks()));
  const uint32_t overhead = g.interned("overhead"), attention = g.interned("attention");
  off_.assign(nr + 1, 0);
  g.for_each_op([&](schedule::OpId, const schedule::Op& op) {
    off_[static_cast<size_t>(op.rank) + 1]++;
    if (op.kind == schedule::OpKind::Transfer) off_[static_cast<size_t>(op.peer) + 1]++;
  });
  for (size_t r = 0; r < nr; ++r) off_[r + 1] += off_[r];
  ids_.resize(off_[nr]);
  flags_.resize(off_[nr]);
  std::vector<size_t> at(off_.begin(), off_.end() - 1);
  g.for_each_op([&](schedule::OpId id, const schedule::Op& op) {
    uint8_t f = 0;
    if (op.kind == schedule::OpKind::Transfer) {
      f = kTransfer | (schedule::stream::is_cp(op.stream) ? kCp : 0) |
          static_cast<uint8_t>(comm_kind_index(op.stream) << kKindShift);
    } else {
      if (op.label.category == overhead) f |= kOverhead;
      if (op.label.category == attention) f |= kAttention;
    }
    for (int end = 0; end < (op.kind == schedule::OpKind::Transfer ? 2 : 1); ++end) {
      const size_t i = at[static_cast<size_t>(end ? op.peer : op.rank)]++;
      ids_[i] = id;
      flags_[i] = f;
    }
  });
}

}  // namespace cpsim::report
