#include "report/rank_ops.hpp"

#include <algorithm>

#include "report/comm_split.hpp"
#include "support/threads.hpp"

namespace cpsim::report {

RankOps::RankOps(const schedule::TaskGraph& g, size_t max_entries, unsigned threads)
    : g_(g), max_(std::max<size_t>(1, max_entries)), overhead_(g.interned("overhead")),
      offload_(g.interned("offload")), attention_(g.interned("attention")) {
  const size_t nr = static_cast<size_t>(std::max(0, g.num_ranks()));
  const unsigned slices = support::threads_for(threads, g.size());
  for (unsigned t = 0; t <= slices; ++t) cut_.push_back(static_cast<schedule::OpId>(g.size() * t / slices));
  before_.assign(slices, std::vector<size_t>(nr, 0));
  // Counted once, in one pass (it runs beside the report's other first pass): each slice's
  // entries per rank, then their prefix sums.
  for (unsigned t = 0; t + 1 < slices; ++t) {
    std::vector<size_t>& next = before_[t + 1];
    g.for_each_op_in(cut_[t], cut_[t + 1], [&](schedule::OpId, const schedule::Op& op) {
      if (mirrored(op)) return;
      next[static_cast<size_t>(op.rank)]++;
      if (op.kind == schedule::OpKind::Transfer) next[static_cast<size_t>(op.peer)]++;
    });
    for (size_t r = 0; r < nr; ++r) next[r] += before_[t][r];
  }
  off_.assign(nr + 1, 0);
  for (size_t r = 0; r < nr; ++r) off_[r + 1] = before_.back()[r];
  g.for_each_op_in(cut_[slices - 1], cut_[slices], [&](schedule::OpId, const schedule::Op& op) {
    if (mirrored(op)) return;
    off_[static_cast<size_t>(op.rank) + 1]++;
    if (op.kind == schedule::OpKind::Transfer) off_[static_cast<size_t>(op.peer) + 1]++;
  });
  for (size_t r = 0; r < nr; ++r) off_[r + 1] += off_[r];
}

/// Each slice of the ops on its own thread, into the places its ranks' entries take (so each
/// rank's stay in id order). On the 70B full replay (1,024 ranks, 30 M entries, four chunks)
/// one thread's loads were 0.17 s each, the report's cores half idle meanwhile.
void RankOps::load(int r0, int r1) {
  if (loaded_[0] == r0 && loaded_[1] == r1) return;
  const size_t base = off_[static_cast<size_t>(r0)], n = off_[static_cast<size_t>(r1)] - base;
  ids_.assign(n, 0);
  flags_.assign(n, 0);
  const unsigned slices = static_cast<unsigned>(before_.size());
  support::on_threads(slices, [&](unsigned t) {
    std::vector<size_t> at(static_cast<size_t>(r1 - r0));
    for (int r = r0; r < r1; ++r)
      at[static_cast<size_t>(r - r0)] = off_[static_cast<size_t>(r)] - base + before_[t][static_cast<size_t>(r)];
    g_.for_each_op_in(cut_[t], cut_[t + 1], [&](schedule::OpId id, const schedule::Op& op) {
      const bool transfer = op.kind == schedule::OpKind::Transfer;
      const bool mine = (op.rank >= r0 && op.rank < r1) || (transfer && op.peer >= r0 && op.peer < r1);
      if (!mine || mirrored(op)) return;
      uint8_t f = 0;
      if (transfer) {
        f = kTransfer | static_cast<uint8_t>(comm_kind_index(op.stream) << kKindShift);
      } else {
        // Host copies (activation offloading) run on the copy engines, not the SMs: like the
        // overheads, they are not GPU compute.
        if (op.label.category == overhead_ || op.label.category == offload_) f |= kOverhead;
        if (op.label.category == attention_) f |= kAttention;
      }
      for (int end = 0; end < (transfer ? 2 : 1); ++end) {
        const int r = end ? op.peer : op.rank;
        if (r < r0 || r >= r1) continue;
        const size_t i = at[static_cast<size_t>(r - r0)]++;
        ids_[i] = id;
        flags_[i] = f;
      }
    }, r0, r1);
  });
  loaded_[0] = r0;
  loaded_[1] = r1;
}

RankTimelines::RankTimelines(const RankOps& ro, size_t first, size_t last, const schedule::Trace& tr) {
  start_s.resize(last - first);
  end_s.resize(last - first);
  // Each read is a cache miss, one after another unless fetched ahead: the ids are known.
  // Measured in one process on the 70B full replay, the whole report with and without, three
  // times each: 2.73-3.11 s against 3.28-3.58 s.
  constexpr size_t kAhead = 16;
  for (size_t i = first; i < last; ++i) {
    if (i + kAhead < last) {
      __builtin_prefetch(&tr.start_s[ro.ids()[i + kAhead]]);
      __builtin_prefetch(&tr.end_s[ro.ids()[i + kAhead]]);
    }
    const schedule::OpId id = ro.ids()[i];
    const uint8_t f = ro.flags()[i];
    const double s = start_s[i - first] = tr.start_s[id], e = end_s[i - first] = tr.end_s[id];
    // Fixed software overheads (platform runtime: host launches, NCCL launches) are not GPU
    // compute: they stay in time_by_category ("overhead") but not in the compute intervals, so a
    // mirrored replica's rank, whose only ops are its DP collectives and their launches, is
    // still recognised as not computing.
    if (f & RankOps::kTransfer) {
      add_interval(by_kind[f >> RankOps::kKindShift], s, e);
    } else if (!(f & RankOps::kOverhead)) {
      add_interval(compute, s, e);
      if (f & RankOps::kAttention) add_interval(attention, s, e);
    }
  }
  compute = merged(std::move(compute));
  attention = merged(std::move(attention));
  for (Intervals& v : by_kind) v = merged(std::move(v));
}

}  // namespace cpsim::report
