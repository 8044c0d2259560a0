#include "report/comm_split.hpp"

#include <algorithm>
#include <vector>

#include "report/intervals.hpp"

namespace cpsim::report {

namespace {
constexpr const char* kKindNames[kCommKinds] = {"cp", "tp", "dp", "pp", "ep", "other"};
}  // namespace

int comm_kind_index(uint16_t s) {
  namespace st = schedule::stream;
  if (st::is_cp(s)) return 0;
  if (s == st::kTpSend || s == st::kTpRecv) return 1;
  if (s == st::kDpSend || s == st::kDpRecv || s == st::kDpReplicateSend || s == st::kDpReplicateRecv) return 2;
  if (s >= st::kPpSend && s <= st::kPpGradRecv) return 3;
  if (s == st::kEpSend || s == st::kEpRecv) return 4;  // expert-parallel dispatch / combine
  return 5;
}

const char* comm_kind(uint16_t s) { return kKindNames[comm_kind_index(s)]; }

CommSplit::CommSplit(const schedule::TaskGraph& g) {
  const size_t nr = static_cast<size_t>(std::max(0, g.num_ranks()));
  // tp, cp, pp and dp always; the others where a transfer has them. Bytes sent summed in op
  // order per rank.
  for (int k = 0; k < kCommKinds; ++k) present_[k] = k < 4;
  for (auto& v : sent_) v.assign(nr, 0.0);
  g.for_each_op([&](schedule::OpId, const schedule::Op& op) {
    if (op.kind != schedule::OpKind::Transfer) return;
    const int k = comm_kind_index(op.stream);
    present_[k] = true;
    sent_[k][static_cast<size_t>(op.rank)] += op.bytes;
  });
  for (int k = 0; k < kCommKinds; ++k)
    if (present_[k]) out_[kKindNames[k]];
}

CommSplit::Share CommSplit::share(const RankTimelines& t) const {
  Share s;
  if (t.compute.empty()) return s;  // (a rank that only joins DP collectives: not in the means)
  s.computes = true;
  for (int k = 0; k < kCommKinds; ++k) {
    if (!present_[k]) continue;
    s.total_s[k] = measure(t.by_kind[k]);
    s.exposed_s[k] = measure_minus(t.by_kind[k], t.compute);
  }
  return s;
}

void CommSplit::add(int r, const Share& s) {
  if (!s.computes) return;
  ++active_;
  // Each kind's sums run over the ranks in order, as the caller walks them.
  for (int k = 0; k < kCommKinds; ++k) {
    if (!present_[k]) continue;
    CommKind& m = out_[kKindNames[k]];
    m.total_s += s.total_s[k];
    m.exposed_s += s.exposed_s[k];
    m.bytes += sent_[k][static_cast<size_t>(r)];
  }
}

std::map<std::string, CommKind> CommSplit::result() const {
  std::map<std::string, CommKind> out = out_;
  for (auto& [k, m] : out)
    if (active_ > 0) {
      m.total_s /= active_;
      m.exposed_s /= active_;
      m.bytes /= active_;
    }
  return out;
}

}  // namespace cpsim::report
