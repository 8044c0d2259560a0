// nccl-tests logs -> NcclLog tables (format: nccl-tests src/common.cu, writeDeviceReport and the
// per-size PRINT of each test's table).
#include "scenario/nccl_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "scenario/load.hpp"

namespace cpsim::scenario {

namespace {

/// Larger logs are not nccl-tests output (a whole 8 B..16 GiB sweep of every test with NCCL INFO
/// lines at every rank of 1,024 GPUs is a few MB).
constexpr std::uintmax_t kMaxLogBytes = 64ull << 20;

[[noreturn]] void fail(const std::string& file, int line, const std::string& what) {
  const std::string where = line > 0 ? file + ":" + std::to_string(line) : file;
  throw InputError(where + ": error: " + what, file, line, 0, "", what);
}

/// Index of the first byte of `s` that is not part of valid UTF-8, or npos.
size_t bad_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    if (c >= 0x80) {
      if (c >= 0xC2 && c <= 0xDF) extra = 1;
      else if ((c & 0xF0) == 0xE0) extra = 2;
      else if (c >= 0xF0 && c <= 0xF4) extra = 3;
      else return i;
    }
    for (int k = 1; k <= extra; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    i += 1 + extra;
  }
  return std::string::npos;
}

/// The line without the launcher's prefix: srun --label ("  0: "), mpirun --tag-output
/// ("[1,0]<stdout>:"), and the trailing carriage return of a log copied from Windows.
std::string strip_prefix(std::string l) {
  if (!l.empty() && l.back() == '\r') l.pop_back();
  static const std::regex prefix(R"(^(\s*\d+:\s|\[\d+,\d+\]<std(out|err)>:\s?))");
  std::smatch m;
  if (std::regex_search(l, m, prefix)) l = m.suffix();
  return l;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string t; in >> t;) w.push_back(t);
  return w;
}

bool number(const std::string& t, double& v) {
  if (t.empty()) return false;
  char* end = nullptr;
  v = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() && std::isfinite(v);
}

std::string file_name_op(const std::string& file) {
  const std::string base = std::filesystem::path(file).filename().string();
  for (const char* p : {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf",
                        "sendrecv_perf", "broadcast_perf", "reduce_perf"}) {
    if (base.find(p) != std::string::npos) return p;
  }
  return {};
}

struct Builder {
  std::string file, op_hint;
  std::vector<NcclLog> out;
  NcclLog cur;
  bool in_test = false;   // a "Collective test starting" or a table header was seen
  bool table = false;     // the column header was seen
  int header_line = 0;
  std::set<int> ranks;
  int info_nranks = 0;
  std::string command_program;  // "..._perf" on a command line before the test

  void start(int line) {
    cur = NcclLog{};
    cur.file = file;
    cur.first_line = line;
    in_test = true;
    table = false;
    ranks.clear();
    info_nranks = 0;
  }

  void finish(int line, double avg) {
    if (!table) fail(file, line, "'# Avg bus bandwidth' with no table before it");
    if (cur.rows.empty()) fail(file, line, "the table that starts at line " +
                                              std::to_string(header_line) + " has no rows");
    cur.last_line = line;
    cur.avg_busbw_GBps = avg;
    cur.ranks = !ranks.empty() ? static_cast<int>(ranks.size()) : info_nranks;
    if (cur.program.empty()) cur.program = command_program;
    if (cur.program.empty()) cur.program = file_name_op(file);
    cur.op = nccl_test_op(cur.program);
    if (cur.op.empty()) {
      if (!op_hint.empty()) {
        cur.op = op_hint;
      } else {
        fail(file, cur.first_line,
             "cannot tell which nccl-tests program wrote this table (no 'Collective test "
             "starting' line, no *_perf on a command line or in the file name): give --op");
      }
    } else if (!op_hint.empty() && op_hint != cur.op) {
      fail(file, cur.first_line, "this test is " + cur.program + " (" + cur.op +
                                     "), but --op says " + op_hint);
    }
    out.push_back(std::move(cur));
    in_test = table = false;
  }
};

}  // namespace

std::string nccl_test_op(const std::string& program) {
  static const std::map<std::string, std::string> ops = {
      {"all_reduce_perf", "allreduce"},        {"all_gather_perf", "allgather"},
      {"reduce_scatter_perf", "reducescatter"}, {"alltoall_perf", "alltoall"},
      {"sendrecv_perf", "sendrecv"},            {"broadcast_perf", "broadcast"},
      {"reduce_perf", "reduce"}};
  auto it = ops.find(program);
  return it == ops.end() ? "" : it->second;
}

std::vector<NcclLog> parse_nccl_log(const std::string& text, const std::string& file,
                                    const std::string& op_hint) {
  Builder b;
  b.file = file;
  b.op_hint = op_hint;
  static const std::regex starting(R"(^#\s*Collective test starting:\s*(\S+))");
  static const std::regex concluded(R"(^#\s*Collective test concluded:\s*(\S+))");
  static const std::regex version(R"(^#\s*nccl-tests version \S+.*nccl-library=(\d+))");
  static const std::regex rank_line(
      R"(^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.*\S))");
  static const std::regex info_version(R"(NCCL INFO NCCL version (\d+\.\d+\.\d+))");
  static const std::regex info_nranks(R"(NCCL INFO .*\bnranks (\d+))");
  static const std::regex command(R"((?:^|[\s/])([a-z_]+_perf)(?:\s|$))");
  static const std::regex avg(R"(^#\s*Avg bus bandwidth\s*:\s*(\S+))");
  std::istringstream in(text);
  std::string raw;
  int n = 0;
  std::string version_seen;
  while (std::getline(in, raw)) {
    ++n;
    if (bad_utf8(raw) != std::string::npos)
      fail(file, n, "not UTF-8 text (byte " + std::to_string(bad_utf8(raw) + 1) +
                        " of the line): is this an nccl-tests log?");
    const std::string l = strip_prefix(raw);
    std::smatch m;
    if (l.find("NCCL INFO") != std::string::npos || l.find("NCCL WARN") != std::string::npos) {
      if (std::regex_search(l, m, info_version)) version_seen = m[1];
      if (b.in_test && std::regex_search(l, m, info_nranks))
        b.info_nranks = std::max(b.info_nranks, std::stoi(m[1]));
      continue;
    }
    if (std::regex_search(l, m, version)) {
      const int code = std::stoi(m[1]);  // NCCL_VERSION_CODE: major*10000 + minor*100 + patch
      version_seen = std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
                     std::to_string(code % 100);
      continue;
    }
    if (std::regex_search(l, m, starting)) {
      if (b.table) fail(file, n, "a new test starts before the table that starts at line " +
                                     std::to_string(b.header_line) +
                                     " ended with '# Avg bus bandwidth' (truncated log?)");
      b.start(n);
      b.cur.program = m[1];
      b.cur.nccl_version = version_seen;
      continue;
    }
    if (std::regex_search(l, m, concluded)) {
      if (!b.out.empty() && b.out.back().program.empty()) b.out.back().program = m[1];
      continue;
    }
    if (std::regex_search(l, m, rank_line)) {
      if (!b.in_test) {
        b.start(n);
        b.cur.nccl_version = version_seen;
      }
      b.ranks.insert(std::stoi(m[1]));
      const std::string host = m[2];
      if (std::find(b.cur.hosts.begin(), b.cur.hosts.end(), host) == b.cur.hosts.end())
        b.cur.hosts.push_back(host);
      if (b.cur.device.empty()) b.cur.device = m[3];
      continue;
    }
    if (std::regex_search(l, m, avg)) {
      double v = 0;
      if (!number(m[1], v)) fail(file, n, "expected a number after '# Avg bus bandwidth :'");
      if (b.cur.nccl_version.empty()) b.cur.nccl_version = version_seen;
      b.finish(n, v);
      continue;
    }
    const auto w = words(l);
    if (w.empty()) continue;
    if (w[0] == "#") {
      // The column header: "#  size  count  type  redop  root  time  algbw  busbw #wrong ...".
      if (w.size() >= 3 && w[1] == "size" && w[2] == "count") {
        if (b.table) fail(file, n, "a second table header inside the table that starts at line " +
                                       std::to_string(b.header_line) +
                                       " (two logs concatenated, or a truncated one?)");
        if (!b.in_test) {
          b.start(n);
          b.cur.nccl_version = version_seen;
        }
        b.table = true;
        b.header_line = n;
      }
      continue;
    }
    if (!b.table) {
      if (std::regex_search(l, m, command) && nccl_test_op(m[1]) != "") b.command_program = m[1];
      continue;
    }
    // A row: size count type redop root time algbw busbw #wrong [time algbw busbw #wrong].
    double size = 0, count = 0, root = 0;
    if (!number(w[0], size) || !number(w[1], count)) {
      // Lines of other tools or of the shell between rows are skipped; a row that starts
      // with numbers must parse whole.
      continue;
    }
    if (w.size() != 9 && w.size() != 13)
      fail(file, n, "a table row has " + std::to_string(w.size()) +
                        " columns; nccl-tests prints 9 (out-of-place) or 13 (and in-place): "
                        "size count type redop root time algbw busbw #wrong (truncated line?)");
    NcclLogRow r;
    r.line = n;
    r.size_bytes = size;
    r.count = count;
    r.type = w[2];
    r.redop = w[3];
    if (!number(w[4], root)) fail(file, n, "expected the root rank (a number) in column 5, got '" + w[4] + "'");
    r.root = static_cast<int>(root);
    if (!number(w[5], r.time_us) || !number(w[6], r.algbw_GBps) || !number(w[7], r.busbw_GBps))
      fail(file, n, "expected numbers for time, algbw and busbw in columns 6-8");
    if (w.size() == 13 && (!number(w[9], r.ip_time_us) || !number(w[10], r.ip_algbw_GBps) ||
                           !number(w[11], r.ip_busbw_GBps)))
      fail(file, n, "expected numbers for the in-place time, algbw and busbw in columns 10-12");
    if (r.size_bytes < 0 || r.time_us < 0 || r.busbw_GBps < 0)
      fail(file, n, "negative size, time or bandwidth");
    if (!b.cur.rows.empty()) {
      const NcclLogRow& p = b.cur.rows.front();
      if (p.type != r.type || p.redop != r.redop || p.root != r.root)
        fail(file, n, "this row's type/redop/root (" + r.type + " " + r.redop + " " + w[4] +
                          ") differ from the table's first row at line " + std::to_string(p.line) +
                          " (" + p.type + " " + p.redop + " " + std::to_string(p.root) +
                          "): two tests mixed in one table");
      if (r.size_bytes < b.cur.rows.back().size_bytes)
        fail(file, n, "sizes go down (" + w[0] + " after " +
                          std::to_string(static_cast<long long>(b.cur.rows.back().size_bytes)) +
                          "): two tests mixed in one table");
    }
    b.cur.rows.push_back(r);
  }
  if (b.table)
    fail(file, n, "the table that starts at line " + std::to_string(b.header_line) +
                      " has no '# Avg bus bandwidth' line: the log is truncated");
  if (b.out.empty())
    fail(file, std::max(n, 1), "no nccl-tests table found (expected a '#  size  count  type ...' "
                               "header, rows, and '# Avg bus bandwidth')");
  return b.out;
}

std::vector<NcclLog> read_nccl_log(const std::string& path, const std::string& op_hint) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(path, 0, "no such file");
  if (!fs::is_regular_file(st)) fail(path, 0, "not a regular file (an nccl-tests log is read whole)");
  if (fs::file_size(path, ec) > kMaxLogBytes)
    fail(path, 0, "larger than 64 MiB: not an nccl-tests log");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, 0, "cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_nccl_log(ss.str(), path, op_hint);
}

}  // namespace cpsim::scenario
