#include "app/sweep/results_csv.hpp"

#include <algorithm>
#include <cstdio>

#include "report/output.hpp"
#include "scenario/load.hpp"

namespace cpsim::app::sweep {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos && (s.empty() || (s.front() != ' ' && s.back() != ' ')))
    return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}


std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      row.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<std::string> csv_header(const std::vector<std::string>& swept) {
  std::vector<std::string> h = {"id", "status", "reason"};
  h.insert(h.end(), swept.begin(), swept.end());
  for (const auto& m : kMetrics) h.push_back(m.column);
  return h;
}

std::string csv_text(const std::vector<std::string>& header, const std::vector<const Row*>& rows) {
  std::string out;
  auto line = [&out](const std::vector<std::string>& fields) {
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i) out += ',';  // (not "," + std::string&&: GCC 12 -O3's false -Wrestrict, bug 105651)
      out += csv_field(fields[i]);
    }
    out += "\n";
  };
  line(header);
  for (const Row* r : rows) {
    std::vector<std::string> f = {r->id, r->status, r->reason};
    for (size_t i = 3; i < header.size(); ++i) {
      const auto it = r->cells.find(header[i]);
      f.push_back(it == r->cells.end() ? "" : it->second);
    }
    line(f);
  }
  return out;
}

std::vector<Row> read_rows(const std::string& csv_path) {
  std::vector<Row> rows;
  if (!fs::exists(csv_path)) return rows;
  const auto recs = parse_csv(read_file(csv_path));
  if (recs.empty()) return rows;
  const auto& head = recs.front();
  for (size_t r = 1; r < recs.size(); ++r) {
    Row row;
    for (size_t c = 0; c < head.size() && c < recs[r].size(); ++c) {
      if (head[c] == "id") row.id = recs[r][c];
      else if (head[c] == "status") row.status = recs[r][c];
      else if (head[c] == "reason") row.reason = recs[r][c];
      else row.cells[head[c]] = recs[r][c];
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

/// Whether a row was written for this point with its current values: the sweep file may have
/// changed since.
bool result_of_point(const scenario::SweepPoint& p, const nlohmann::json& result) {
  try {
    return result.contains("scenario") &&
           report::scenario_json(scenario::load_scenario(p.base_path, p.overrides)) == result.at("scenario");
  } catch (const std::exception&) {
    return false;  // it no longer loads: run it again and let the run say why
  }
}

bool same_values(const Row& row, const scenario::SweepPoint& p) {
  for (const auto& [k, v] : p.values) {
    const auto it = row.cells.find(k);
    if (it == row.cells.end() || it->second != v) return false;
  }
  return true;
}

std::string point_json(const fs::path& dir, const scenario::SweepPoint& p) {
  return (dir / "runs" / (p.id + ".json")).string();
}

std::string shard_csv_name(size_t i, size_t k) {
  return "results." + std::to_string(i) + "-of-" + std::to_string(k) + ".csv";
}

std::string format_number(const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.9g", v.get<double>());
    return buf;
  }
  if (v.is_string()) return v.get<std::string>();
  return "";
}

std::vector<std::string> swept_keys(const std::vector<scenario::SweepPoint>& points) {
  std::vector<std::string> swept;
  for (const auto& p : points)
    for (const auto& [k, v] : p.values)
      if (std::find(swept.begin(), swept.end(), k) == swept.end()) swept.push_back(k);
  return swept;
}

std::optional<nlohmann::json> read_result_json(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  auto j = nlohmann::json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

void fill_metrics(Row& row, const nlohmann::json& result) {
  for (const auto& m : kMetrics) {
    row.cells.erase(m.column);
    const nlohmann::json::json_pointer ptr(m.pointer);
    if (!result.contains(ptr)) continue;
    const auto& v = result.at(ptr);
    if (m.scale != 0 && v.is_number()) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.4f", v.get<double>() * m.scale);
      row.cells[m.column] = buf;
    } else {
      row.cells[m.column] = format_number(v);
    }
  }
}

}  // namespace cpsim::app::sweep
