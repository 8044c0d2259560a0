// `cpsim diff A B`: two `cpsim run --json` results side by side with their deltas (step,
// throughput, memory, communication by kind, breakdown, time by category, critical path), or two
// `cpsim sweep` output directories point by point.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "app/sweep/results_csv.hpp"
#include "report/output.hpp"

namespace cpsim::app {

namespace {

namespace diff_fs = std::filesystem;
using diff_json = nlohmann::json;

/// A result JSON is a few MB (its last_ops and links lists are bounded); a sweep's results.csv
/// holds one short row per point. Anything larger is not what `diff` expects.
constexpr std::uintmax_t kDiffMaxBytes = 64ull << 20;

/// Bad input: the message names the file and what was expected; exit 2.
struct DiffInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string diff_read_bounded(const diff_fs::path& p, const char* expected) {
  std::error_code ec;
  if (!diff_fs::is_regular_file(p, ec))
    throw DiffInputError(p.string() + ": no such file (expected " + expected + ")");
  const auto size = diff_fs::file_size(p, ec);
  if (ec) throw DiffInputError(p.string() + ": cannot read: " + ec.message());
  if (size > kDiffMaxBytes)
    throw DiffInputError(p.string() + ": " + std::to_string(size >> 20) + " MiB, above the 64 MiB limit (expected " +
                         expected + ")");
  std::ifstream in(p, std::ios::binary);
  if (!in) throw DiffInputError(p.string() + ": cannot open for reading");
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

constexpr const char* kDiffResultExpected = "a cpsim result JSON, as `cpsim run --json FILE` writes";

diff_json diff_load_result(const diff_fs::path& p) {
  const std::string text = diff_read_bounded(p, kDiffResultExpected);
  diff_json j = diff_json::parse(text, nullptr, false);
  if (j.is_discarded()) throw DiffInputError(p.string() + ": not valid JSON (expected " + kDiffResultExpected + ")");
  // The keys every `cpsim run --json` writes (report::result_json).
  for (const char* k : {"step_time_s", "engine", "scope", "breakdown"}) {
    if (!j.is_object() || !j.contains(k))
      throw DiffInputError(p.string() + ": no key '" + k + "' (expected " + kDiffResultExpected + ")");
  }
  if (!j["step_time_s"].is_number() || !j["breakdown"].is_object())
    throw DiffInputError(p.string() + ": 'step_time_s' is not a number or 'breakdown' not an object (expected " +
                         kDiffResultExpected + ")");
  return j;
}

std::optional<double> diff_number(const diff_json& j, const std::string& pointer) {
  const diff_json::json_pointer ptr(pointer);
  if (!j.contains(ptr)) return std::nullopt;
  const auto& v = j.at(ptr);
  if (v.is_number()) return v.get<double>();
  return std::nullopt;
}

/// A key as one JSON pointer token (RFC 6901: '~' -> "~0", '/' -> "~1").
std::string diff_token(const std::string& k) {
  std::string t;
  for (const char c : k) t += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
  return t;
}

std::string diff_fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string diff_pad_left(const std::string& s, size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}
std::string diff_pad_right(const std::string& s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

/// One compared quantity: where it is in the result, how it is printed (scale and printf
/// format of the printed unit).
struct DiffMetric {
  std::string label;
  std::string pointer;
  double scale = 1;
  const char* format = "%.4f";
};

/// The quantities in the order a reader looks for them; keys present in either result only.
std::vector<DiffMetric> diff_metrics(const diff_json& a, const diff_json& b) {
  std::vector<DiffMetric> m = {
      {"step time, s", "/step_time_s"},
      {"throughput, tokens/s", "/tokens_per_s", 1, "%.0f"},
      {"model TFLOP/s per GPU", "/tflops_per_gpu", 1, "%.1f"},
      {"MFU, %", "/mfu", 100, "%.2f"},
      {"peak memory per GPU, GB", "/memory/peak_bytes_per_rank", 1e-9, "%.3f"},
      {"memory capacity, GB", "/memory/capacity_bytes", 1e-9, "%.2f"},
      {"compute, s", "/breakdown/compute_s"},
      {"exposed comm, s", "/breakdown/exposed_comm_s"},
      {"idle, s", "/breakdown/idle_s"},
  };
  // Communication by kind: the parallel axes first, in the order a mesh is written.
  auto keys_of = [&](const char* ptr) {
    std::vector<std::string> keys;
    for (const diff_json* j : {&a, &b}) {
      const diff_json::json_pointer p(ptr);
      if (!j->contains(p) || !j->at(p).is_object()) continue;
      for (const auto& [k, v] : j->at(p).items())
        if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
    }
    return keys;
  };
  std::vector<std::string> kinds;
  const auto comm = keys_of("/communication");
  for (const char* k : {"cp", "tp", "dp", "pp", "ep"})
    if (std::find(comm.begin(), comm.end(), k) != comm.end()) kinds.push_back(k);
  for (const auto& k : comm)
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  for (const auto& k : kinds) {
    m.push_back({k + " comm total, s", "/communication/" + diff_token(k) + "/total_s"});
    m.push_back({k + " comm exposed, s", "/communication/" + diff_token(k) + "/exposed_s"});
  }
  for (const auto& k : keys_of("/time_by_category_s"))
    m.push_back({"time: " + k + ", s", "/time_by_category_s/" + diff_token(k)});
  m.push_back({"critical path, s", "/critical_path/length_s"});
  for (const auto& k : keys_of("/critical_path/by_category_s"))
    m.push_back({"critical path: " + k + ", s", "/critical_path/by_category_s/" + diff_token(k)});
  return m;
}

/// The scenario keys whose values differ (leaves, dotted), so the reader sees what was changed.
void diff_scenario(const diff_json& a, const diff_json& b, const std::string& at,
                   std::vector<std::array<std::string, 3>>& out) {
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const auto& k : keys) {
      const std::string path = at.empty() ? k : at + "." + k;
      static const diff_json kMissing = "(absent)";
      diff_scenario(a.contains(k) ? a[k] : kMissing, b.contains(k) ? b[k] : kMissing, path, out);
    }
    return;
  }
  if (a != b) {
    auto text = [](const diff_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    out.push_back({at, text(a), text(b)});
  }
}

int diff_results(const diff_fs::path& pa, const diff_fs::path& pb, const std::string& json_out) {
  const diff_json a = diff_load_result(pa);
  const diff_json b = diff_load_result(pb);
  auto str = [](const diff_json& j, const char* ptr) {
    const diff_json::json_pointer p(ptr);
    return j.contains(p) && j.at(p).is_string() ? j.at(p).get<std::string>() : std::string("-");
  };
  std::cout << "cpsim diff\n  A: " << pa.string() << "  (" << str(a, "/name") << ", " << str(a, "/engine") << ", "
            << str(a, "/scope") << ")\n  B: " << pb.string() << "  (" << str(b, "/name") << ", "
            << str(b, "/engine") << ", " << str(b, "/scope") << ")\n";
  std::vector<std::array<std::string, 3>> changed;
  if (a.contains("scenario") && b.contains("scenario")) diff_scenario(a["scenario"], b["scenario"], "", changed);
  if (!changed.empty()) {
    std::cout << "  scenario keys that differ:\n";
    for (size_t i = 0; i < changed.size() && i < 20; ++i)
      std::cout << "    " << changed[i][0] << ": " << changed[i][1].substr(0, 60) << " -> "
                << changed[i][2].substr(0, 60) << "\n";
    if (changed.size() > 20) std::cout << "    ... and " << changed.size() - 20 << " more\n";
  }
  std::cout << "\n";

  const auto metrics = diff_metrics(a, b);
  size_t w = 24;
  for (const auto& m : metrics) w = std::max(w, m.label.size());
  std::cout << "  " << diff_pad_right("", w) << diff_pad_left("A", 14) << diff_pad_left("B", 14)
            << diff_pad_left("B - A", 14) << diff_pad_left("%", 10) << "\n";
  diff_json rows = diff_json::array();
  for (const auto& m : metrics) {
    const auto va = diff_number(a, m.pointer), vb = diff_number(b, m.pointer);
    if (!va && !vb) continue;
    diff_json row = {{"metric", m.label}, {"pointer", m.pointer}, {"a", va ? diff_json(*va) : diff_json()},
                     {"b", vb ? diff_json(*vb) : diff_json()}, {"delta", nullptr}, {"delta_pct", nullptr}};
    std::string d = "-", pct = "-";
    if (va && vb) {
      const double delta = *vb - *va;
      row["delta"] = delta;
      d = diff_fmt((std::string("%+") + (m.format + 1)).c_str(), delta * m.scale);
      if (*va != 0) {
        row["delta_pct"] = 100 * delta / std::fabs(*va);
        pct = diff_fmt("%+.2f", 100 * delta / std::fabs(*va));
      }
    }
    rows.push_back(row);
    std::cout << "  " << diff_pad_right(m.label, w) << diff_pad_left(va ? diff_fmt(m.format, *va * m.scale) : "-", 14)
              << diff_pad_left(vb ? diff_fmt(m.format, *vb * m.scale) : "-", 14) << diff_pad_left(d, 14)
              << diff_pad_left(pct, 10) << "\n";
  }
  const std::string verdict_a = str(a, "/memory/verdict"), verdict_b = str(b, "/memory/verdict");
  std::cout << "\n  memory verdict A: " << verdict_a << "\n  memory verdict B: " << verdict_b << "\n";
  if (!json_out.empty()) {
    diff_json j = {{"kind", "results"},
                   {"a", {{"file", pa.string()}, {"name", str(a, "/name")}, {"verdict", verdict_a}}},
                   {"b", {{"file", pb.string()}, {"name", str(b, "/name")}, {"verdict", verdict_b}}},
                   {"metrics", rows}};
    diff_json sc = diff_json::array();
    for (const auto& c : changed) sc.push_back({{"key", c[0]}, {"a", c[1]}, {"b", c[2]}});
    j["scenario_changes"] = sc;
    report::write_atomic(json_out, j.dump(2) + "\n");
  }
  return 0;
}

/// A sweep directory's rows with the columns they were swept on.
struct DiffSweep {
  std::vector<sweep::Row> rows;
  std::vector<std::string> swept;  ///< value columns: neither id/status/reason nor a metric
};

DiffSweep diff_load_sweep(const diff_fs::path& dir) {
  constexpr const char* expected = "a `cpsim sweep` output directory with results.csv and runs/";
  const diff_fs::path csv = dir / "results.csv";
  std::error_code ec;
  if (!diff_fs::is_regular_file(csv, ec))
    throw DiffInputError(dir.string() + ": no results.csv (expected " + expected + ")");
  const auto recs = sweep::parse_csv(diff_read_bounded(csv, expected));
  if (recs.empty()) throw DiffInputError(csv.string() + ": empty (expected a header line with id,status,...)");
  const auto& head = recs.front();
  for (const char* k : {"id", "status", "step_time_s"})
    if (std::find(head.begin(), head.end(), k) == head.end())
      throw DiffInputError(csv.string() + ": no column '" + k + "' (expected " + expected + ")");
  DiffSweep s;
  for (const auto& h : head) {
    bool metric = h == "id" || h == "status" || h == "reason";
    for (const auto& m : sweep::kMetrics) metric |= h == m.column;
    if (!metric) s.swept.push_back(h);
  }
  for (size_t r = 1; r < recs.size(); ++r) {
    sweep::Row row;
    for (size_t c = 0; c < head.size() && c < recs[r].size(); ++c) {
      if (head[c] == "id") row.id = recs[r][c];
      else if (head[c] == "status") row.status = recs[r][c];
      else if (head[c] == "reason") row.reason = recs[r][c];
      else row.cells[head[c]] = recs[r][c];
    }
    s.rows.push_back(std::move(row));
  }
  return s;
}

std::string diff_label(const sweep::Row& r, const std::vector<std::string>& swept) {
  std::string l;
  for (const auto& k : swept) {
    const auto it = r.cells.find(k);
    l += (l.empty() ? "" : " ") + k + "=" + (it == r.cells.end() ? "" : it->second);
  }
  return l.empty() ? r.id : l;
}

std::string diff_join(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "" : ", ") + k;
  return s;
}

std::optional<double> diff_step(const sweep::Row& r) {
  if (r.status != "ok") return std::nullopt;
  const auto it = r.cells.find("step_time_s");
  if (it == r.cells.end() || it->second.empty()) return std::nullopt;
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used == it->second.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

int diff_sweeps(const diff_fs::path& da, const diff_fs::path& db, const std::string& json_out) {
  const DiffSweep a = diff_load_sweep(da), b = diff_load_sweep(db);
  // Points pair by the values of the keys both sweeps swept (the ids are only positions, which
  // move when an axis gains a value; an axis only one sweep has is what was changed), when those
  // values name each point once in both; otherwise by id.
  std::vector<std::string> common;
  for (const auto& k : a.swept)
    if (std::find(b.swept.begin(), b.swept.end(), k) != b.swept.end()) common.push_back(k);
  auto unique_by = [&](const DiffSweep& s) {
    std::set<std::string> labels;
    for (const auto& r : s.rows)
      if (!labels.insert(diff_label(r, common)).second) return false;
    return true;
  };
  // Of those, the keys with one value in every point of both say nothing about a point.
  std::vector<std::string> varying;
  for (const auto& k : common) {
    std::set<std::string> values;
    for (const DiffSweep* s : {&a, &b})
      for (const auto& r : s->rows) {
        const auto it = r.cells.find(k);
        values.insert(it == r.cells.end() ? "" : it->second);
      }
    if (values.size() > 1) varying.push_back(k);
  }
  common = varying;
  const bool by_values = !common.empty() && unique_by(a) && unique_by(b);
  auto key = [&](const sweep::Row& r, const DiffSweep&) { return by_values ? diff_label(r, common) : r.id; };
  std::map<std::string, const sweep::Row*> in_b;
  for (const auto& r : b.rows) in_b.emplace(key(r, b), &r);
  std::set<std::string> seen;
  std::cout << "cpsim diff (sweeps, points paired by "
            << (by_values ? "the values of " + diff_join(common) : std::string("id")) << ")\n  A: "
            << da.string() << "  (" << a.rows.size() << " points)\n  B: " << db.string() << "  (" << b.rows.size()
            << " points)\n\n";
  size_t w = 10;
  for (const auto& r : a.rows) w = std::max(w, std::min<size_t>(key(r, a).size(), 60));
  std::cout << "  " << diff_pad_right("point", w) << diff_pad_left("step A, s", 14) << diff_pad_left("step B, s", 14)
            << diff_pad_left("B - A, s", 14) << diff_pad_left("%", 10) << "\n";
  diff_json points = diff_json::array(), only_a = diff_json::array(), only_b = diff_json::array();
  for (const auto& ra : a.rows) {
    const std::string k = key(ra, a);
    if (!seen.insert(k).second) continue;
    const auto it = in_b.find(k);
    if (it == in_b.end()) {
      only_a.push_back(k);
      continue;
    }
    const sweep::Row& rb = *it->second;
    const auto sa = diff_step(ra), sb = diff_step(rb);
    diff_json p = {{"point", k}, {"id_a", ra.id}, {"id_b", rb.id}, {"status_a", ra.status}, {"status_b", rb.status},
                   {"step_time_s_a", sa ? diff_json(*sa) : diff_json()},
                   {"step_time_s_b", sb ? diff_json(*sb) : diff_json()}, {"delta_s", nullptr}, {"delta_pct", nullptr}};
    std::string d = "-", pct = "-";
    if (sa && sb) {
      p["delta_s"] = *sb - *sa;
      d = diff_fmt("%+.4f", *sb - *sa);
      if (*sa != 0) {
        p["delta_pct"] = 100 * (*sb - *sa) / *sa;
        pct = diff_fmt("%+.2f", 100 * (*sb - *sa) / *sa);
      }
    }
    points.push_back(p);
    std::cout << "  " << diff_pad_right(k.substr(0, 60), w)
              << diff_pad_left(sa ? diff_fmt("%.4f", *sa) : ra.status, 14)
              << diff_pad_left(sb ? diff_fmt("%.4f", *sb) : rb.status, 14) << diff_pad_left(d, 14)
              << diff_pad_left(pct, 10) << "\n";
  }
  std::set<std::string> keys_a;
  for (const auto& r : a.rows) keys_a.insert(key(r, a));
  for (const auto& r : b.rows)
    if (!keys_a.count(key(r, b)) && std::find(only_b.begin(), only_b.end(), key(r, b)) == only_b.end())
      only_b.push_back(key(r, b));
  for (const auto& [name, list] : {std::pair{"A", &only_a}, std::pair{"B", &only_b}}) {
    if (list->empty()) continue;
    std::cout << "\n  only in " << name << ":\n";
    for (const auto& k : *list) std::cout << "    " << k.get<std::string>() << "\n";
  }
  if (!json_out.empty()) {
    diff_json j = {{"kind", "sweeps"},  {"a", da.string()},    {"b", db.string()},
                   {"paired_by", by_values ? diff_json(common) : diff_json("id")}, {"points", points},
                   {"only_in_a", only_a}, {"only_in_b", only_b}};
    report::write_atomic(json_out, j.dump(2) + "\n");
  }
  return 0;
}

struct DiffArgs {
  std::string a, b, json;
};

}  // namespace

void register_diff(CLI::App& app, int& rc) {
  auto args = std::make_shared<DiffArgs>();
  auto* cmd = app.add_subcommand(
      "diff", "compare two `cpsim run --json` results (or two `cpsim sweep` output directories) with deltas");
  cmd->add_option("a", args->a, "result JSON or sweep output directory A")->required();
  cmd->add_option("b", args->b, "result JSON or sweep output directory B")->required();
  cmd->add_option("--json", args->json, "also write the comparison as JSON to this file");
  cmd->callback([args, &rc] {
    try {
      std::error_code ec;
      const bool dir_a = diff_fs::is_directory(args->a, ec), dir_b = diff_fs::is_directory(args->b, ec);
      if (dir_a != dir_b)
        throw DiffInputError(args->b + ": " + (dir_b ? "a directory" : "not a directory") + "; expected " +
                             (dir_a ? "a sweep output directory" : "a result JSON file") + ", as " + args->a +
                             " is (both arguments are result JSONs or both sweep directories)");
      rc = dir_a ? diff_sweeps(args->a, args->b, args->json) : diff_results(args->a, args->b, args->json);
    } catch (const DiffInputError& e) {
      std::cerr << "cpsim diff: error: " << e.what() << "\n";
      rc = 2;
    } catch (const std::exception& e) {
      std::cerr << "cpsim diff: failed: " << e.what() << "\n";
      rc = 1;
    }
  });
}

}  // namespace cpsim::app
