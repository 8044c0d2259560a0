#include "report/comm_split.hpp"

#include <iterator>
#include <string_view>
#include <vector>

#include "report/intervals.hpp"

namespace cpsim::report {

namespace {
constexpr const char* kKindNames[] = {"cp", "tp", "dp", "pp", "ep", "other"};
constexpr int kKinds = static_cast<int>(std::size(kKindNames));
}  // namespace

int comm_kind_index(uint16_t s) {
  namespace st = schedule::stream;
  if (st::is_cp(s)) return 0;
  if (s == st::kTpSend || s == st::kTpRecv) return 1;
  if (s == st::kDpSend || s == st::kDpRecv) return 2;
  if (s >= st::kPpSend && s <= st::kPpGradRecv) return 3;
  if (s == st::kEpSend || s == st::kEpRecv) return 4;  // expert-parallel dispatch / combine
  return 5;
}

const char* comm_kind(uint16_t s) { return kKindNames[comm_kind_index(s)]; }

std::map<std::string, CommKind> communication_by_kind(const schedule::TaskGraph& g,
                                                      const schedule::Trace& tr, RankOps& ro) {
  const int nr = g.num_ranks();
  // tp, cp, pp and dp always; the others where a transfer has them. Bytes sent summed in op
  // order per rank.
  bool present[kKinds] = {true, true, true, true, false, false};
  std::vector<double> sent[kKinds];
  for (auto& v : sent) v.assign(static_cast<size_t>(nr), 0.0);
  g.for_each_op([&](schedule::OpId, const schedule::Op& op) {
    if (op.kind != schedule::OpKind::Transfer) return;
    const int k = comm_kind_index(op.stream);
    present[k] = true;
    sent[k][static_cast<size_t>(op.rank)] += op.bytes;
  });
  std::map<std::string, CommKind> out;
  for (int k = 0; k < kKinds; ++k)
    if (present[k]) out[kKindNames[k]];
  // Rank by rank (RankOps): each kind's sums still run over the ranks in order.
  int active = 0;
  Intervals comp, by_kind[kKinds];
  ro.for_each_rank([&](int r, size_t first, size_t last) {
    comp.clear();
    for (auto& v : by_kind) v.clear();
    for (size_t i = first; i < last; ++i) {
      const schedule::OpId id = ro.ids()[i];
      const uint8_t f = ro.flags()[i];
      // Host-side overheads are not GPU compute (and would make a mirrored replica's rank,
      // which only joins the DP collectives, look simulated): see metrics.cpp.
      if (f & RankOps::kTransfer)
        add_interval(by_kind[f >> RankOps::kKindShift], tr.start_s[id], tr.end_s[id]);
      else if (!(f & RankOps::kOverhead))
        add_interval(comp, tr.start_s[id], tr.end_s[id]);
    }
    const Intervals c = merged(std::move(comp));
    comp = Intervals();
    if (c.empty()) return;
    active++;
    for (int k = 0; k < kKinds; ++k) {
      if (!present[k]) continue;
      CommKind& m = out[kKindNames[k]];
      const Intervals x = merged(std::move(by_kind[k]));
      by_kind[k] = Intervals();
      m.total_s += measure(x);
      m.exposed_s += measure_minus(x, c);
      m.bytes += sent[k][static_cast<size_t>(r)];
    }
  });
  for (auto& [k, m] : out)
    if (active > 0) {
      m.total_s /= active;
      m.exposed_s /= active;
      m.bytes /= active;
    }
  return out;
}

}  // namespace cpsim::report
