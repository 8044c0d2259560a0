#include "app/sweep/pivot.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <vector>

#include "app/boundary.hpp"
#include "app/sweep/results_csv.hpp"

namespace cpsim::app::sweep {

namespace {

std::string human_time(const std::string& cell) {
  char* end = nullptr;
  const double s = std::strtod(cell.c_str(), &end);
  if (cell.empty() || end != cell.c_str() + cell.size()) return cell;
  char buf[32];
  if (s >= 1) std::snprintf(buf, sizeof buf, "%.3g s", s);
  else if (s >= 1e-3) std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  return buf;
}

void add_unique(std::vector<std::string>& v, const std::string& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

namespace {
std::pair<std::string, std::string> split_spec(const std::string& spec) {
  const size_t comma = spec.find(',');
  if (comma == std::string::npos || spec.find(',', comma + 1) != std::string::npos)
    throw std::invalid_argument("--pivot: expected KEY1,KEY2 (rows, columns), got '" + spec + "'");
  return {spec.substr(0, comma), spec.substr(comma + 1)};
}
}  // namespace

void validate_pivot(const std::string& spec, const std::vector<std::string>& header) {
  const auto [down, across] = split_spec(spec);
  for (const std::string& key : {down, across})
    if (std::find(header.begin(), header.end(), key) == header.end()) {
      std::string msg = "--pivot: '" + key + "' is not a column of results.csv";
      if (const std::string s = suggest(key, header); !s.empty()) msg += " (did you mean '" + s + "'?)";
      throw std::invalid_argument(msg);
    }
}

namespace {

/// The swept keys (results.csv's columns between "reason" and the first metric) besides the
/// two shown that still tell apart points falling in one cell, in column order: each is added
/// while some cell holds points that differ in a swept key, the first such key each time. With
/// scheme and layout both swept, `--pivot seq_len,scheme` needs the layout; a key zipped with
/// one already shown (the Ulysses degree beside the scheme) is never needed.
std::vector<size_t> distinguishing_keys(const std::vector<std::vector<std::string>>& recs, size_t down,
                                        size_t across) {
  const auto& head = recs.front();
  const auto first_metric = std::find(head.begin(), head.end(), kMetrics[0].column);
  std::vector<size_t> swept;
  for (size_t i = 3; i < static_cast<size_t>(first_metric - head.begin()); ++i)
    if (i != down && i != across) swept.push_back(i);
  std::vector<size_t> extra;
  for (;;) {
    std::map<std::vector<std::string>, const std::vector<std::string>*> seen;
    size_t differs = head.size();
    for (size_t i = 1; i < recs.size() && differs == head.size(); ++i) {
      const auto& rec = recs[i];
      if (rec.size() < head.size()) continue;
      std::vector<std::string> key = {rec[down], rec[across]};
      for (size_t k : extra) key.push_back(rec[k]);
      const auto [it, fresh] = seen.emplace(key, &rec);
      if (fresh) continue;
      for (size_t k : swept)
        if ((*it->second)[k] != rec[k]) { differs = k; break; }
    }
    if (differs == head.size()) return extra;
    extra.push_back(differs);
    swept.erase(std::find(swept.begin(), swept.end(), differs));
  }
}

}  // namespace

std::string pivot_table(const std::string& csv_path, const std::string& spec) {
  const auto [down, across] = split_spec(spec);
  const auto recs = parse_csv(read_file(csv_path));
  if (recs.empty()) throw std::invalid_argument("--pivot: no rows in " + csv_path);
  const auto& head = recs.front();
  auto column = [&](const std::string& key) {
    for (size_t i = 0; i < head.size(); ++i)
      if (head[i] == key) return i;
    std::string msg = "--pivot: no column '" + key + "' in " + csv_path;
    if (const std::string s = suggest(key, head); !s.empty()) msg += " (did you mean '" + s + "'?)";
    throw std::invalid_argument(msg);
  };
  const size_t r = column(down), c = column(across), st = column("status"), t = column("step_time_s");
  // A cell holds one point: points that differ in another swept key get columns of their own,
  // labelled KEY2's value then each such key's ("ring/zigzag"), never one over the other.
  const std::vector<size_t> extra = distinguishing_keys(recs, r, c);
  std::string across_name = across;
  for (size_t k : extra) across_name += "/" + head[k];
  std::vector<std::string> rows, cols;
  std::map<std::pair<std::string, std::string>, std::string> cell;
  for (size_t i = 1; i < recs.size(); ++i) {
    const auto& rec = recs[i];
    if (rec.size() < head.size()) continue;
    std::string col = rec[c];
    for (size_t k : extra) col += "/" + rec[k];
    add_unique(rows, rec[r]);
    add_unique(cols, col);
    cell[{rec[r], col}] = rec[st] == "ok" ? human_time(rec[t]) : rec[st];
  }
  // A (row, column) pair no point has shows "-".
  auto shown = [&](const std::string& x, const std::string& col) {
    const auto it = cell.find({x, col});
    return it == cell.end() ? std::string("-") : it->second;
  };
  std::vector<size_t> width(cols.size() + 1, down.size());
  for (const auto& x : rows) width[0] = std::max(width[0], x.size());
  for (size_t j = 0; j < cols.size(); ++j) {
    width[j + 1] = cols[j].size();
    for (const auto& x : rows) width[j + 1] = std::max(width[j + 1], shown(x, cols[j]).size());
  }
  auto pad = [](const std::string& s, size_t w, bool right) {
    const std::string fill(w > s.size() ? w - s.size() : 0, ' ');
    return right ? fill + s : s + fill;
  };
  std::string out = "step time: " + down + " (rows) x " + across_name + " (columns)\n" + pad(down, width[0], false);
  for (size_t j = 0; j < cols.size(); ++j) out += "  " + pad(cols[j], width[j + 1], true);
  out += "\n";
  for (const auto& x : rows) {
    out += pad(x, width[0], false);
    for (size_t j = 0; j < cols.size(); ++j) out += "  " + pad(shown(x, cols[j]), width[j + 1], true);
    out += "\n";
  }
  return out;
}

}  // namespace cpsim::app::sweep
