// Kernel profile CSV -> ProfileTable (see profile_csv.hpp).
#include "scenario/profile_csv.hpp"

#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"

namespace cpsim::scenario {
namespace {

constexpr const char* kPath = "cost.profile";

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

class Reader {
 public:
  explicit Reader(const std::string& path) : src_(std::make_shared<detail::Source>()) {
    src_->file = path;
  }

  [[noreturn]] void fail(int line, int col, const std::string& message) const {
    detail::fail(detail::Origin{src_, line, col}, kPath, message);
  }

  ProfileTable read() {
    std::error_code ec;
    if (std::filesystem::is_directory(src_->file, ec))
      fail(0, 0, "cannot read the profile CSV: it is a directory");
    if (!std::filesystem::exists(src_->file, ec))
      fail(0, 0, std::string("cannot read the profile CSV: ") + (ec ? ec.message() : "no such file"));
    std::ifstream in(src_->file, std::ios::binary);
    if (!in) fail(0, 0, std::string("cannot read the profile CSV: ") + std::strerror(errno));
    // The same cap as the YAML loader's, counted as read (a FIFO or device has no size): a real
    // profile is a few hundred rows.
    constexpr size_t kMaxProfileBytes = 16u << 20;
    size_t total = 0;
    std::string text;
    while (std::getline(in, text)) {
      total += text.size() + 1;
      if (total > kMaxProfileBytes) fail(0, 0, "cannot read the profile CSV: larger than 16 MiB");
      if (!text.empty() && text.back() == '\r') text.pop_back();
      src_->lines.push_back(text);
    }
    ProfileTable t;
    t.path = src_->file;
    bool header = false;
    for (size_t i = 0; i < src_->lines.size(); ++i) {
      const std::string& line = src_->lines[i];
      const int line_no = static_cast<int>(i) + 1;
      const auto first = line.find_first_not_of(" \t");
      if (first == std::string::npos || line[first] == '#') continue;
      split(line);
      if (!header) {
        for (size_t c = 0; c < cells_.size(); ++c) col_[cells_[c]] = c;
        for (const char* c : kColumns) {
          if (!col_.count(c)) fail(line_no, 1, std::string("the header has no column '") + c + "'");
        }
        header = true;
        continue;
      }
      t.rows.push_back(row(line, line_no));
    }
    if (!header) fail(0, 0, "empty profile (no header line)");
    if (t.rows.empty()) fail(0, 0, "the profile has no rows");
    return t;
  }

 private:
  static constexpr const char* kColumns[] = {
      "gpu",     "kernel",   "direction", "q_len", "kv_len",  "mask",   "unmasked_fraction",
      "heads_q", "heads_kv", "head_dim",  "dtype", "time_us", "tflops", "source",
      "commit"};

  void split(const std::string& line) {
    cells_.clear();
    starts_.clear();
    size_t at = 0;
    while (true) {
      const size_t comma = line.find(',', at);
      cells_.push_back(line.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      starts_.push_back(static_cast<int>(at) + 1);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }

  ProfileRow row(const std::string& line, int line_no) const {
    auto cell = [&](const char* name) -> const std::string& {
      const size_t i = col_.at(name);
      if (i >= cells_.size()) {
        fail(line_no, static_cast<int>(line.size()) + 1,
             "row has " + std::to_string(cells_.size()) + " columns, the header " +
                 std::to_string(col_.size()));
      }
      return cells_[i];
    };
    auto at = [&](const char* name) { return starts_[col_.at(name)]; };
    auto number = [&](const char* name, bool positive) {
      const std::string& s = cell(name);
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) ||
          (positive && !(v > 0)) || v < 0) {
        fail(line_no, at(name),
             std::string("column '") + name + "': '" + s + "' is not a " +
                 (positive ? "positive number" : "number >= 0"));
      }
      return v;
    };
    // Shapes within the scenario limits (seq_len, heads, head_dim), so the casts are defined.
    auto whole = [&](const char* name, double max) {
      const double v = number(name, true);
      if (v != std::floor(v) || v > max) {
        fail(line_no, at(name),
             std::string("column '") + name + "': '" + cell(name) +
                 "' is not a whole number from 1 to " + std::to_string(int64_t(max)));
      }
      return v;
    };
    ProfileRow r;
    r.line = line_no;
    r.gpu = cell("gpu");
    r.kernel = cell("kernel");
    const std::string& dir = cell("direction");
    if (dir != "fwd" && dir != "bwd" && dir != "fwdbwd") {
      fail(line_no, at("direction"),
           "column 'direction': expected fwd, bwd or fwdbwd, got '" + dir + "'");
    }
    r.backward = dir == "bwd";
    r.fwdbwd = dir == "fwdbwd";
    const auto mask = parse_mask(cell("mask"));
    if (!mask) {
      fail(line_no, at("mask"),
           "column 'mask': expected " + mask_choices() + ", got '" + cell("mask") + "'");
    }
    r.mask = *mask;
    const std::string& source = cell("source");
    bool known = false;
    for (size_t i = 0; i < std::size(kRowSourceNames); ++i) {
      if (source == kRowSourceNames[i]) {
        r.source = static_cast<RowSource>(i);
        known = true;
      }
    }
    if (!known) {
      fail(line_no, at("source"),
           "column 'source': expected measured, published or derived, got '" + source + "'");
    }
    r.unmasked_fraction = number("unmasked_fraction", true);
    if (r.unmasked_fraction > 1 + 1e-9) {
      fail(line_no, at("unmasked_fraction"), "column 'unmasked_fraction': above 1");
    }
    r.q_len = static_cast<int64_t>(whole("q_len", 1099511627776.0));
    r.kv_len = static_cast<int64_t>(whole("kv_len", 1099511627776.0));
    r.heads_q = static_cast<int>(whole("heads_q", 1e6));
    r.heads_kv = static_cast<int>(whole("heads_kv", 1e6));
    r.head_dim = static_cast<int>(whole("head_dim", 65536));
    r.time_s = number("time_us", true) * 1e-6;
    if (!(r.time_s > 0)) {  // a denormal time_us underflows to 0 s, whose log is -inf
      fail(line_no, at("time_us"),
           "column 'time_us': '" + cell("time_us") + "' is not a positive number");
    }
    r.reference = cell("commit");
    return r;
  }

  std::shared_ptr<detail::Source> src_;
  std::map<std::string, size_t> col_;
  std::vector<std::string> cells_;
  std::vector<int> starts_;
};

}  // namespace

ProfileTable read_profile_csv(const std::string& path) { return Reader(path).read(); }

std::string find_bundled_profile(const GpuSpec& gpu, const std::string& impl) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(data_dir()) / "kernels" / "profiles";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  const std::string name = lower(gpu.name);
  const std::string mid = impl.empty() ? "" : "-" + lower(impl);
  for (const std::string suffix : {"-measured.csv", "-published.csv"}) {
    const std::string tail = mid + suffix;
    std::string best, best_key;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.size() <= tail.size() ||
          file.compare(file.size() - tail.size(), tail.size(), tail) != 0) {
        continue;
      }
      const std::string key = lower(file.substr(0, file.size() - tail.size()));
      if (key.find('-') != std::string::npos) continue;  // another implementation's file
      bool match = name.find(key) != std::string::npos;
      if (!match && suffix == "-published.csv" && key == "h100") {
        match = name.find("h800") != std::string::npos || name.find("h200") != std::string::npos;
      }
      if (match &&
          (key.size() > best_key.size() || (key.size() == best_key.size() && file < best))) {
        best = entry.path().string();
        best_key = key;
      }
    }
    if (!best.empty()) return best;
  }
  return {};
}

}  // namespace cpsim::scenario
