#include "report/comm_split.hpp"

#include <iterator>
#include <string_view>
#include <vector>

#include "report/intervals.hpp"

namespace cpsim::report {

const char* comm_kind(uint16_t s) {
  namespace st = schedule::stream;
  if (st::is_cp(s)) return "cp";
  if (s == st::kTpSend || s == st::kTpRecv) return "tp";
  if (s == st::kDpSend || s == st::kDpRecv) return "dp";
  if (s >= st::kPpSend && s <= st::kPpGradRecv) return "pp";
  if (s == 17 || s == 18) return "ep";  // expert-parallel dispatch / combine
  return "other";
}

std::map<std::string, CommKind> communication_by_kind(const schedule::TaskGraph& g,
                                                      const schedule::Trace& tr) {
  const int nr = g.num_ranks();
  std::vector<Intervals> comp(static_cast<size_t>(nr));
  // By kind index (a string per transfer and a map lookup were ~2 % of the 70B full replay).
  const char* kinds[] = {"cp", "tp", "dp", "pp", "ep", "other"};
  constexpr int kKinds = std::size(kinds);
  auto index = [&](const char* k) {
    int i = 0;
    while (i + 1 < kKinds && std::string_view(kinds[i]) != k) ++i;
    return i;
  };
  std::vector<Intervals> by_kind[kKinds];
  std::vector<double> sent_by[kKinds];
  for (const char* k : {"tp", "cp", "pp", "dp"}) {
    by_kind[index(k)].resize(static_cast<size_t>(nr));
    sent_by[index(k)].assign(static_cast<size_t>(nr), 0.0);
  }
  const uint32_t overhead = g.interned("overhead");
  g.for_each_op([&](schedule::OpId id, const schedule::Op& op) {
    const double s = tr.start_s[id], e = tr.end_s[id];
    if (op.kind == schedule::OpKind::Compute) {
      // Host-side overheads are not GPU compute (and would make a mirrored replica's rank,
      // which only joins the DP collectives, look simulated): see metrics.cpp.
      if (op.label.category != overhead) add_interval(comp[op.rank], s, e);
      return;
    }
    const int k = index(comm_kind(op.stream));
    auto& c = by_kind[k];
    if (c.empty()) {
      c.resize(static_cast<size_t>(nr));
      sent_by[k].assign(static_cast<size_t>(nr), 0.0);
    }
    add_interval(c[op.rank], s, e);
    add_interval(c[op.peer], s, e);
    sent_by[k][op.rank] += op.bytes;
  });
  std::map<std::string, std::vector<Intervals>> comm;
  std::map<std::string, std::vector<double>> sent;
  for (int k = 0; k < kKinds; ++k)
    if (!by_kind[k].empty()) {
      comm[kinds[k]] = std::move(by_kind[k]);
      sent[kinds[k]] = std::move(sent_by[k]);
    }
  std::map<std::string, CommKind> out;
  int active = 0;
  for (auto& c : comp) {
    c = merged(std::move(c));
    active += !c.empty();
  }
  for (auto& [k, per_rank] : comm) {
    CommKind& m = out[k];
    for (int r = 0; r < nr; ++r) {
      if (comp[r].empty()) continue;
      const Intervals x = merged(std::move(per_rank[r]));
      m.total_s += measure(x);
      m.exposed_s += measure_minus(x, comp[r]);
      m.bytes += sent[k][r];
    }
    if (active > 0) {
      m.total_s /= active;
      m.exposed_s /= active;
      m.bytes /= active;
    }
  }
  return out;
}

}  // namespace cpsim::report
