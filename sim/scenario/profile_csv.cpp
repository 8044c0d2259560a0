// Kernel profile CSV -> ProfileTable (see profile_csv.hpp).
#include "scenario/profile_csv.hpp"

#include <cctype>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <memory>
#include <sstream>

#include "support/bounded_read.hpp"
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

  /// Reads the file: rows after the header (blank and # lines skipped), each parsed by
  /// `parse(line, line_no)` once the header has every column of `columns`.
  template <class Row, class Parse>
  std::vector<Row> read(std::initializer_list<const char*> columns, Parse parse) {
    // The same rules as the YAML loader's (support/bounded_read.hpp): a regular file of at most
    // 16 MiB; a real profile is a few hundred rows.
    std::string why;
    const std::optional<std::string> all = support::read_regular_file(src_->file, support::kMaxInputBytes, why);
    if (!all) fail(0, 0, "cannot read the profile CSV: " + why);
    std::istringstream in(*all);
    std::string text;
    while (std::getline(in, text)) {
      if (!text.empty() && text.back() == '\r') text.pop_back();
      src_->lines.push_back(text);
    }
    std::vector<Row> rows;
    bool header = false;
    for (size_t i = 0; i < src_->lines.size(); ++i) {
      const std::string& line = src_->lines[i];
      const int line_no = static_cast<int>(i) + 1;
      const auto first = line.find_first_not_of(" \t");
      if (first == std::string::npos || line[first] == '#') continue;
      split(line);
      if (!header) {
        for (size_t c = 0; c < cells_.size(); ++c) col_[cells_[c]] = c;
        for (const char* c : columns) {
          if (!col_.count(c)) fail(line_no, 1, std::string("the header has no column '") + c + "'");
        }
        header = true;
        continue;
      }
      rows.push_back(parse(line, line_no));
    }
    if (!header) fail(0, 0, "empty profile (no header line)");
    if (rows.empty()) fail(0, 0, "the profile has no rows");
    return rows;
  }

  ProfileTable read() {
    ProfileTable t;
    t.path = src_->file;
    t.rows = read<ProfileRow>(
        {"gpu", "kernel", "direction", "q_len", "kv_len", "mask", "unmasked_fraction", "heads_q",
         "heads_kv", "head_dim", "dtype", "time_us", "tflops", "source", "commit"},
        [this](const std::string& line, int line_no) { return row(line, line_no); });
    return t;
  }

  /// A GEMM profile: one timed GEMM per row.
  GemmProfileTable read_gemm() {
    GemmProfileTable t;
    t.path = src_->file;
    const bool measured_file = lower(src_->file).find("-measured.csv") != std::string::npos;
    t.rows = read<GemmProfileRow>({"gpu", "dtype", "m", "n", "k", "time_us"},
                                  [&](const std::string& line, int line_no) {
                                    return gemm_row(line, line_no, measured_file);
                                  });
    return t;
  }

  /// A Gated DeltaNet profile: one forward or backward chunk_gated_delta_rule call per row.
  GdnProfileTable read_gdn() {
    GdnProfileTable t;
    t.path = src_->file;
    t.rows = read<GdnProfileRow>(
        {"gpu", "kernel", "direction", "seq_len", "seqs", "heads_k", "heads_v", "key_dim",
         "value_dim", "chunk", "dtype", "time_us", "source", "reference"},
        [this](const std::string& line, int line_no) { return gdn_row(line, line_no); });
    return t;
  }

 private:
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

  const std::string& cell(const std::string& line, int line_no, const char* name) const {
    const size_t i = col_.at(name);
    if (i >= cells_.size()) {
      fail(line_no, static_cast<int>(line.size()) + 1,
           "row has " + std::to_string(cells_.size()) + " columns, the header " +
               std::to_string(col_.size()));
    }
    return cells_[i];
  }
  int at(const char* name) const { return starts_[col_.at(name)]; }
  double number(const std::string& line, int line_no, const char* name, bool positive) const {
    const std::string& s = cell(line, line_no, name);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v) ||
        (positive && !(v > 0)) || v < 0) {
      fail(line_no, at(name),
           std::string("column '") + name + "': '" + s + "' is not a " +
               (positive ? "positive number" : "number >= 0"));
    }
    return v;
  }
  // Shapes within the scenario limits (seq_len, heads, head_dim), so the casts are defined.
  double whole(const std::string& line, int line_no, const char* name, double max) const {
    const double v = number(line, line_no, name, true);
    if (v != std::floor(v) || v > max) {
      fail(line_no, at(name),
           std::string("column '") + name + "': '" + cell(line, line_no, name) +
               "' is not a whole number from 1 to " + std::to_string(int64_t(max)));
    }
    return v;
  }
  RowSource source(const std::string& line, int line_no) const {
    const std::string& s = cell(line, line_no, "source");
    for (size_t i = 0; i < std::size(kRowSourceNames); ++i) {
      if (s == kRowSourceNames[i]) return static_cast<RowSource>(i);
    }
    fail(line_no, at("source"), "column 'source': expected measured, published or derived, got '" + s + "'");
  }
  double time_s(const std::string& line, int line_no) const {
    const double t = number(line, line_no, "time_us", true) * 1e-6;
    if (!(t > 0)) {  // a denormal time_us underflows to 0 s, whose log is -inf
      fail(line_no, at("time_us"),
           "column 'time_us': '" + cell(line, line_no, "time_us") + "' is not a positive number");
    }
    // No kernel runs in under a nanosecond (a launch alone is microseconds); a time this small
    // is a typo, and its rate overflows the curves' arithmetic.
    if (t < 1e-9) {
      fail(line_no, at("time_us"),
           "column 'time_us': '" + cell(line, line_no, "time_us") + "' is below 0.001 us (1 ns): no kernel is that short");
    }
    return t;
  }

  ProfileRow row(const std::string& line, int line_no) const {
    auto cell = [&](const char* name) -> const std::string& { return this->cell(line, line_no, name); };
    auto number = [&](const char* name, bool positive) { return this->number(line, line_no, name, positive); };
    auto whole = [&](const char* name, double max) { return this->whole(line, line_no, name, max); };
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
    r.source = source(line, line_no);
    r.unmasked_fraction = number("unmasked_fraction", true);
    if (r.unmasked_fraction > 1 + 1e-9) {
      fail(line_no, at("unmasked_fraction"), "column 'unmasked_fraction': above 1");
    }
    r.q_len = static_cast<int64_t>(whole("q_len", 1099511627776.0));
    r.kv_len = static_cast<int64_t>(whole("kv_len", 1099511627776.0));
    r.heads_q = static_cast<int>(whole("heads_q", 1e6));
    r.heads_kv = static_cast<int>(whole("heads_kv", 1e6));
    r.head_dim = static_cast<int>(whole("head_dim", 65536));
    r.dtype = lower(cell("dtype"));
    if (r.dtype != "bf16" && r.dtype != "fp16" && r.dtype.rfind("fp8", 0) != 0) {
      fail(line_no, at("dtype"), "column 'dtype': expected bf16, fp16 or fp8 (fp8-<recipe>), got '" + cell("dtype") + "'");
    }
    // MLA rows (Q.K over head_dim, P.V over head_dim_v, as DeepSeek-V3's 192/128) are keyed by
    // the mean of the two, the head dim a scenario's MLA attention runs at (moe_keys.cpp): the
    // same FLOPs, 2 x s^2 x (d_qk + d_v) per head.
    if (col_.count("head_dim_v") && !cell("head_dim_v").empty()) {
      const int dv = static_cast<int>(whole("head_dim_v", 65536));
      if ((r.head_dim + dv) % 2 != 0)
        fail(line_no, at("head_dim_v"), "column 'head_dim_v': head_dim + head_dim_v = " +
                                            std::to_string(r.head_dim + dv) + " is odd (expected an even sum)");
      r.head_dim = (r.head_dim + dv) / 2;
    }
    r.time_s = time_s(line, line_no);
    r.reference = cell("commit");
    return r;
  }

  GemmProfileRow gemm_row(const std::string& line, int line_no, bool measured_file) const {
    GemmProfileRow r;
    r.line = line_no;
    r.gpu = cell(line, line_no, "gpu");
    r.dtype = lower(cell(line, line_no, "dtype"));
    if (r.dtype.empty()) fail(line_no, at("dtype"), "column 'dtype': empty (expected bf16, fp8, ...)");
    // kernels/measure.sh writes the FP8 scaling in a `recipe` column (tensorwise, rowwise,
    // blockwise; bf16 for BF16 rows).
    if (col_.count("recipe")) {
      const std::string recipe = lower(cell(line, line_no, "recipe"));
      if (!recipe.empty() && recipe != r.dtype) r.dtype += "-" + recipe;
    }
    if (col_.count("layout")) r.layout = cell(line, line_no, "layout");
    r.m = whole(line, line_no, "m", 1099511627776.0);
    r.n = whole(line, line_no, "n", 1099511627776.0);
    r.k = whole(line, line_no, "k", 1099511627776.0);
    r.time_s = time_s(line, line_no);
    r.source = measured_file ? RowSource::Measured : RowSource::Published;
    if (col_.count("source")) {
      const std::string& s = cell(line, line_no, "source");
      bool named = false;
      for (size_t i = 0; i < std::size(kRowSourceNames); ++i)
        if (s == kRowSourceNames[i]) {
          r.source = static_cast<RowSource>(i);
          named = true;
        }
      if (!named) r.reference = s;
    }
    if (col_.count("reference")) r.reference = cell(line, line_no, "reference");
    return r;
  }

  GdnProfileRow gdn_row(const std::string& line, int line_no) const {
    GdnProfileRow r;
    r.line = line_no;
    r.gpu = cell(line, line_no, "gpu");
    r.kernel = cell(line, line_no, "kernel");
    const std::string& dir = cell(line, line_no, "direction");
    if (dir != "fwd" && dir != "bwd") {
      fail(line_no, at("direction"), "column 'direction': expected fwd or bwd, got '" + dir + "'");
    }
    r.backward = dir == "bwd";
    r.seq_len = static_cast<int64_t>(whole(line, line_no, "seq_len", 1099511627776.0));
    r.seqs = static_cast<int>(whole(line, line_no, "seqs", 1e6));
    r.heads_k = static_cast<int>(whole(line, line_no, "heads_k", 1e6));
    r.heads_v = static_cast<int>(whole(line, line_no, "heads_v", 1e6));
    r.key_dim = static_cast<int>(whole(line, line_no, "key_dim", 65536));
    r.value_dim = static_cast<int>(whole(line, line_no, "value_dim", 65536));
    r.chunk = static_cast<int>(whole(line, line_no, "chunk", 65536));
    r.time_s = time_s(line, line_no);
    r.source = source(line, line_no);
    r.reference = cell(line, line_no, "reference");
    return r;
  }

  std::shared_ptr<detail::Source> src_;
  std::map<std::string, size_t> col_;
  std::vector<std::string> cells_;
  std::vector<int> starts_;
};

}  // namespace

ProfileTable read_profile_csv(const std::string& path) { return Reader(path).read(); }

GdnProfileTable read_gdn_profile_csv(const std::string& path) { return Reader(path).read_gdn(); }

GemmProfileTable read_gemm_profile_csv(const std::string& path) { return Reader(path).read_gemm(); }

std::string find_bundled_gemm_profile(const GpuSpec& gpu) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(data_dir()) / "kernels" / "profiles";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  const std::string name = lower(gpu.name);
  for (const std::string tail : {"-gemm-measured.csv", "-gemm-published.csv"}) {
    std::string best, best_key;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string file = lower(entry.path().filename().string());
      if (file.size() <= tail.size() || file.compare(file.size() - tail.size(), tail.size(), tail) != 0)
        continue;
      const std::string key = file.substr(0, file.size() - tail.size());
      if (key.find('-') != std::string::npos || name.find(key) == std::string::npos) continue;
      if (key.size() > best_key.size() || (key.size() == best_key.size() && entry.path().string() < best)) {
        best = entry.path().string();
        best_key = key;
      }
    }
    if (!best.empty()) return best;
  }
  return {};
}

std::string find_bundled_gdn_profile(const GpuSpec& gpu) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(data_dir()) / "kernels" / "profiles";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return {};
  const std::string name = lower(gpu.name);
  for (const std::string suffix : {"-measured.csv", "-published.csv"}) {
    std::string best;
    int best_rank = 0;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string file = lower(entry.path().filename().string());
      const size_t gdn = file.find("-gdn-");
      if (gdn == std::string::npos || file.size() <= suffix.size() ||
          file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      const std::string key = file.substr(0, gdn);
      // This GPU's own figures first; then, on Hopper, another Hopper part's (H100, H200 and
      // H800 are one SM90 compute die).
      const bool hopper_key = key == "h100" || key == "h200" || key == "h800";
      const int rank = name.find(key) != std::string::npos ? 2
                       : (gpu.arch == GpuArch::Hopper && hopper_key) ? 1 : 0;
      if (rank > best_rank || (rank == best_rank && rank > 0 && entry.path().string() < best)) {
        best = entry.path().string();
        best_rank = rank;
      }
    }
    if (!best.empty()) return best;
  }
  return {};
}

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
