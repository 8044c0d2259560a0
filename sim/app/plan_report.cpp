// `cpsim plan`'s table and "why the others lost": plan_report.hpp.
#include "app/plan_report.hpp"

#include <algorithm>
#include <map>

#include "app/text_format.hpp"
#include "model/memory_verdict.hpp"
#include "scenario/enum_names.hpp"

namespace cpsim::app::plan {

namespace {

std::string cut(const std::string& s, size_t w) { return s.size() <= w ? s : s.substr(0, w - 1) + "~"; }

/// The label's words: "tp1 cp4 pp1 dp2 v1 m2 ring-zigzag rc=full z2" -> its axes.
std::vector<std::string> words(const std::string& label) {
  std::vector<std::string> w;
  size_t i = 0;
  while (i < label.size()) {
    const size_t j = label.find(' ', i);
    w.push_back(label.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return w;
}

/// Widest label column: the longest scheme label ("doublering-i16-contiguous") with the other
/// axes fits in about 70; past that the line would wrap on an 80-column terminal before `why`.
constexpr size_t kLabelWidth = 72;
/// Widest cell of the ranked table's scheme and axis columns.
constexpr size_t kCellWidth = 26;

}  // namespace

std::string text_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       const std::vector<bool>& right, size_t max_width) {
  std::vector<size_t> w(header.size(), 0);
  auto widen = [&](const std::vector<std::string>& r) {
    for (size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], std::min(r[c].size(), max_width));
  };
  widen(header);
  for (const auto& r : rows) widen(r);
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t c = 0; c < w.size(); ++c) {
      const std::string v = cut(c < r.size() ? r[c] : "", max_width);
      const std::string padv(w[c] - v.size(), ' ');
      if (c) out += "  ";
      out += (c < right.size() && right[c]) ? padv + v : v + padv;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(header);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string ranked_table(const Result& res, int top, double peak_flops, int gpus, double capacity_bytes) {
  std::vector<std::string> header = {"rank", "tp", "cp", "pp", "dp", "v", "m", "scheme", "recompute", "zero"};
  for (const auto& a : res.axes) header.push_back(a);
  for (const char* h : {"mem GB", "analytic s", "SimGrid s", "tokens/s", "MFU"}) header.push_back(h);
  std::vector<bool> right(header.size(), false);
  for (size_t c : {0, 1, 2, 3, 4, 5, 6}) right[c] = true;
  for (size_t c = header.size() - 5; c < header.size(); ++c) right[c] = true;
  std::vector<std::vector<std::string>> rows;
  for (size_t k = 0; k < res.ranked.size() && static_cast<int>(k) < top; ++k) {
    const auto& c = res.all[res.ranked[k]];
    const double mfu = c.step_s() > 0 ? c.model_flops / (c.step_s() * gpus * peak_flops) : 0;
    const std::vector<std::string> w = words(c.label);
    std::vector<std::string> r = {std::to_string(k + 1), std::to_string(c.tp), std::to_string(c.cp),
                                  std::to_string(c.pp), std::to_string(c.dp), std::to_string(c.vstages),
                                  std::to_string(c.micro_batches), w.size() > 6 ? w[6] : "-",
                                  scenario::name_of(c.recompute, scenario::kRecomputeNames),
                                  std::to_string(c.zero_stage)};
    for (size_t a = 0; a < res.axes.size(); ++a) r.push_back(a < c.axis_values.size() ? c.axis_values[a] : "-");
    const bool tight = model::memory_fit(c.peak_bytes, capacity_bytes) == model::MemoryFit::Tight;
    r.push_back(fmt("%.1f", c.peak_bytes / 1e9) + (tight ? " tight" : ""));
    r.push_back(fmt("%.3f", c.analytic_s));
    r.push_back(c.simgrid_s > 0 ? fmt("%.3f", c.simgrid_s) : "-");
    r.push_back(fmt("%.0f", c.tokens_per_s()));
    r.push_back(fmt("%.1f%%", 100 * mfu));
    rows.push_back(std::move(r));
  }
  return text_table(header, rows, right, kCellWidth);
}

std::vector<size_t> near_misses(const Result& res) {
  const size_t best = res.ranked.empty() ? SIZE_MAX : res.ranked.front();
  // Best attention layer per (TP, CP): how far a screened scheme was from it.
  std::map<std::pair<int, int>, double> best_attn;
  for (const auto& c : res.all)
    if (c.attention_layer_s > 0) {
      auto [it, fresh] = best_attn.try_emplace({c.tp, c.cp}, c.attention_layer_s);
      if (!fresh) it->second = std::min(it->second, c.attention_layer_s);
    }
  struct Group {
    std::vector<const char*> statuses;
    size_t shown;
    double (*key)(const Candidate&, const std::map<std::pair<int, int>, double>&);  // smaller = closer
  };
  const Group groups[] = {
      {{"ranked"}, 5, [](const Candidate& c, const auto&) { return -c.tokens_per_s(); }},
      {{"budget", "bounded", "too_big"}, 5,
       [](const Candidate& c, const auto&) { return c.estimate_s > 0 ? -c.tokens_per_step / c.estimate_s : 0.0; }},
      {{"screened"}, 3,
       [](const Candidate& c, const auto& ba) {
         const auto it = ba.find({c.tp, c.cp});
         return c.attention_layer_s > 0 && it != ba.end() ? c.attention_layer_s / it->second : 1e300;
       }},
      {{"oom"}, 5, [](const Candidate& c, const auto&) { return c.peak_bytes; }},
      {{"dominated"}, 2, [](const Candidate&, const auto&) { return 0.0; }},
      {{"failed"}, 3, [](const Candidate&, const auto&) { return 0.0; }},
      {{"invalid"}, 2, [](const Candidate&, const auto&) { return 0.0; }},
  };
  std::vector<size_t> out;
  for (const Group& g : groups) {
    std::vector<size_t> mine;
    for (size_t i = 0; i < res.all.size(); ++i) {
      const auto& c = res.all[i];
      if (i == best || c.why.empty()) continue;
      if (std::any_of(g.statuses.begin(), g.statuses.end(), [&](const char* s) { return c.status == s; }))
        mine.push_back(i);
    }
    std::stable_sort(mine.begin(), mine.end(), [&](size_t a, size_t b) {
      const double ka = g.key(res.all[a], best_attn), kb = g.key(res.all[b], best_attn);
      return ka != kb ? ka < kb : res.all[a].label < res.all[b].label;
    });
    for (size_t k = 0; k < mine.size() && k < g.shown; ++k) out.push_back(mine[k]);
  }
  return out;
}

std::string why_lost(const Result& res) {
  const std::vector<size_t> shown = near_misses(res);
  size_t lost = 0;
  for (size_t i = 0; i < res.all.size(); ++i)
    if (res.ranked.empty() || i != res.ranked.front()) lost++;
  std::string out = "why the others lost (closest to winning first, " + std::to_string(shown.size()) + " of " +
                    std::to_string(lost) + "; --json lists all):\n";
  size_t sw = 0, lw = 0;
  for (size_t i : shown) {
    sw = std::max(sw, res.all[i].status.size());
    lw = std::max(lw, std::min(res.all[i].label.size(), kLabelWidth));
  }
  for (size_t i : shown) {
    const auto& c = res.all[i];
    const std::string label = cut(c.label, kLabelWidth);
    out += "  " + c.status + std::string(sw - c.status.size(), ' ') + "  " + label +
           std::string(lw - label.size(), ' ') + "  " + c.why + "\n";
  }
  return out;
}

}  // namespace cpsim::app::plan
