#include "report/comm_split.hpp"

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
  std::map<std::string, std::vector<Intervals>> comm;
  std::map<std::string, std::vector<double>> sent;
  for (const char* k : {"tp", "cp", "pp", "dp"}) {
    comm[k].resize(static_cast<size_t>(nr));
    sent[k].assign(static_cast<size_t>(nr), 0.0);
  }
  for (schedule::OpId id = 0; id < g.size(); ++id) {
    const auto& op = g.op(id);
    const std::pair<double, double> iv{tr.start_s[id], tr.end_s[id]};
    if (op.kind == schedule::OpKind::Compute) {
      // Host-side overheads are not GPU compute (and would make a mirrored replica's rank,
      // which only joins the DP collectives, look simulated): see metrics.cpp.
      if (g.str(op.label.category) != "overhead") comp[op.rank].push_back(iv);
      continue;
    }
    const std::string k = comm_kind(op.stream);
    auto& c = comm[k];
    if (c.empty()) {
      c.resize(static_cast<size_t>(nr));
      sent[k].assign(static_cast<size_t>(nr), 0.0);
    }
    c[op.rank].push_back(iv);
    c[op.peer].push_back(iv);
    sent[k][op.rank] += op.bytes;
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
