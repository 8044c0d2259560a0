// `cpsim sweep`: runs every point of a sweep file in its own `cpsim run` process (SimGrid
// allows one engine per process), N at a time, and records each as it finishes: one CSV row
// and one result JSON per point, both written atomically, so an interrupted sweep loses
// nothing and `--resume` picks up where it stopped. `--shard i/K` runs one of K shards balanced
// by expected cost; `--slurm` submits the K shards as one Slurm array job and `--merge` joins
// the shards' CSVs into one.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "app/commands.hpp"
#include "app/slurm.hpp"
#include "report/output.hpp"
#include "scenario/load.hpp"
#include "scenario/sweep.hpp"

namespace cpsim::app {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct SweepArgs {
  std::string sweep_file;
  std::string out_dir;
  int jobs = 0;
  double timeout_s = 600;
  bool resume = false;
  bool list = false;
  bool quiet = false;
  std::string shard;
  std::vector<std::string> sets;  ///< extra overrides applied to every point, after its own
  // Slurm and merging.
  bool slurm = false;
  size_t array_size = 0;          ///< K shards / array tasks; 0 = default
  std::string partition;
  std::string time_limit;
  bool wait = false;
  std::string merge_dir;
  std::vector<std::string> sbatch_args;
};

/// The metrics every row carries, in column order: CSV name and JSON pointer in the result.
struct MetricColumn {
  const char* column;
  const char* pointer;
};
constexpr MetricColumn kMetrics[] = {
    {"step_time_s", "/step_time_s"},
    {"tokens_per_s", "/tokens_per_s"},
    {"tflops_per_gpu", "/tflops_per_gpu"},
    {"mfu", "/mfu"},
    {"exposed_comm_s", "/breakdown/exposed_comm_s"},
    {"overlap_fraction", "/attention/overlap_fraction"},
    {"imbalance", "/attention/imbalance"},
    {"peak_bytes_per_rank", "/memory/peak_bytes_per_rank"},
    {"fits", "/memory/fits"},
    {"sim_wall_s", "/simulation/wall_s"},
};

/// One finished point as its CSV row: id, status, reason, swept values, metrics (as text, so a
/// resumed row is written back exactly as it was read).
struct Row {
  std::string id;
  std::string status;  ///< ok | failed | timeout | crashed
  std::string reason;
  std::map<std::string, std::string> cells;  ///< swept keys and metrics by column name
};

// ---- CSV -------------------------------------------------------------------------------

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

/// RFC 4180 records (quoted fields may hold commas, quotes and newlines).
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
    for (size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
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

// ---- helpers ---------------------------------------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The rows of a results CSV (none if it does not exist), cells by column name.
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

std::string format_duration(double s) {
  char buf[32];
  if (s < 10) std::snprintf(buf, sizeof buf, "%.1fs", std::max(0.0, s));
  else if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  return buf;
}

/// The first line of a child's stderr that says what went wrong.
std::string failure_reason(const std::string& log) {
  std::istringstream in(log);
  std::string line, first;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    const size_t b = line.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    line = line.substr(b);
    if (first.empty()) first = line;
    // "file:line:col: error: what" and "scenario: simulation failed: what" -> "what": the
    // status column already says it failed, and every point shares the base file.
    for (const char* mark : {"error: ", "failed: "}) {
      const size_t at = line.find(mark);
      if (at != std::string::npos) return line.substr(at + std::strlen(mark));
    }
  }
  return first;
}

/// Parses "i/K" with 0 <= i < K.
std::optional<std::pair<size_t, size_t>> parse_shard(const std::string& s) {
  const size_t slash = s.find('/');
  if (slash == std::string::npos) return std::nullopt;
  try {
    size_t used = 0;
    const long i = std::stol(s.substr(0, slash), &used);
    if (used != slash) return std::nullopt;
    const std::string ks = s.substr(slash + 1);
    const long k = std::stol(ks, &used);
    if (used != ks.size() || k < 1 || i < 0 || i >= k) return std::nullopt;
    return std::make_pair(static_cast<size_t>(i), static_cast<size_t>(k));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string self_exe() {
  // A test seam: run another program (same arguments) in place of `cpsim run`.
  if (const char* p = std::getenv("CPSIM_SWEEP_CHILD"); p && *p) return p;
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : p.string();
}

volatile sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }

/// Installs SIGINT/SIGTERM handlers for the sweep's lifetime; the children run in their own
/// process groups, so a terminal's Ctrl-C reaches only the sweep, which then stops them.
class InterruptGuard {
 public:
  InterruptGuard() {
    g_interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~InterruptGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

// ---- the runner ------------------------------------------------------------------------

struct Child {
  size_t point = 0;
  pid_t pid = -1;
  Clock::time_point started;
  bool timed_out = false;
  int fork_errno = 0;   ///< set when fork failed (pid == -1)
};

class SweepRunner {
 public:
  SweepRunner(const SweepArgs& a, std::vector<scenario::SweepPoint> points, std::string csv_name)
      : args_(a), points_(std::move(points)), dir_(a.out_dir), csv_path_((dir_ / csv_name).string()) {
    for (const auto& p : points_)
      for (const auto& [k, v] : p.values)
        if (std::find(swept_.begin(), swept_.end(), k) == swept_.end()) swept_.push_back(k);
    header_ = csv_header(swept_);
    rows_.resize(points_.size());
  }

  std::string json_path(size_t i) const { return (dir_ / "runs" / (points_[i].id + ".json")).string(); }
  std::string log_path(size_t i) const { return (dir_ / "logs" / (points_[i].id + ".log")).string(); }

  /// Keeps the rows of a previous run that succeeded and whose JSON is still there.
  size_t load_previous(const std::vector<size_t>& todo) {
    std::map<std::string, size_t> by_id;
    for (size_t i : todo) by_id[points_[i].id] = i;
    size_t kept = 0;
    for (Row& row : read_rows(csv_path_)) {
      const auto it = by_id.find(row.id);
      if (it == by_id.end() || row.status != "ok" || !fs::exists(json_path(it->second))) continue;
      if (!same_values(row, points_[it->second])) continue;
      if (!rows_[it->second]) ++kept;
      rows_[it->second] = std::move(row);
    }
    return kept;
  }

  /// Runs the points in `todo` that have no row yet. Returns the process exit code.
  int run(const std::vector<size_t>& todo) {
    std::vector<size_t> queue;
    size_t done = 0;
    for (size_t i : todo) {
      if (rows_[i]) ++done;
      else queue.push_back(i);
    }
    const size_t total = todo.size(), resumed = done;
    remove_stale_temporaries(todo);
    if (args_.resume && !args_.quiet)
      std::cerr << "sweep: resuming: " << resumed << " of " << total << " points already done\n";
    write_csv();

    const int jobs = std::max(1, args_.jobs);
    tty_ = ::isatty(STDERR_FILENO) && !args_.quiet;
    const auto t0 = Clock::now();
    auto last_draw = t0 - std::chrono::seconds(10);
    std::vector<Child> running;
    size_t next = 0, failed = 0;
    InterruptGuard guard;
    while ((next < queue.size() || !running.empty()) && !g_interrupted) {
      while (next < queue.size() && running.size() < static_cast<size_t>(jobs) && !g_interrupted) {
        running.push_back(spawn(queue[next++]));
      }
      bool changed = false;
      for (size_t c = 0; c < running.size();) {
        Child& ch = running[c];
        int status = 0;
        const pid_t r = ch.pid < 0 ? -1 : ::waitpid(ch.pid, &status, WNOHANG);
        if (r == 0) {
          const double age = std::chrono::duration<double>(Clock::now() - ch.started).count();
          if (args_.timeout_s > 0 && age > args_.timeout_s && !ch.timed_out) {
            ch.timed_out = true;
            ::kill(-ch.pid, SIGKILL);
            ::kill(ch.pid, SIGKILL);
          }
          ++c;
          continue;
        }
        if (r < 0 && ch.pid >= 0 && errno == EINTR) continue;
        const double wall = std::chrono::duration<double>(Clock::now() - ch.started).count();
        const Row& row = record(ch, r < 0 ? -1 : status);
        ++done;
        if (row.status != "ok") ++failed;
        report_point(ch.point, done, total, wall);
        running.erase(running.begin() + static_cast<long>(c));
        changed = true;
      }
      if (changed) write_csv();
      const auto now = Clock::now();
      if (tty_ && (changed || now - last_draw > std::chrono::milliseconds(500))) {
        const double el = std::chrono::duration<double>(now - t0).count();
        const size_t ran = done - resumed;
        std::string eta = "--";
        if (ran > 0) eta = format_duration(el / static_cast<double>(ran) * static_cast<double>(total - done));
        std::cerr << "\r\033[K[" << done << "/" << total << "] failed " << failed << "  ETA " << eta << std::flush;
        last_draw = now;
      }
      if (!changed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (tty_) std::cerr << "\r\033[K" << std::flush;
    if (g_interrupted) {
      for (const Child& ch : running) {
        ::kill(-ch.pid, SIGKILL);
        ::kill(ch.pid, SIGKILL);
      }
      for (const Child& ch : running) ::waitpid(ch.pid, nullptr, 0);
      write_csv();
      std::cerr << "sweep: interrupted after " << done << " of " << total << " points; "
                << "rerun with --resume to finish (" << csv_path_ << ")\n";
      return 130;
    }
    const double el = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!args_.quiet) {
      std::map<std::string, size_t> by_status;
      for (size_t i : todo) by_status[rows_[i] ? rows_[i]->status : "not run"]++;
      std::string counts;
      for (const char* s : {"ok", "failed", "crashed", "timeout", "not run"})
        if (by_status[s]) counts += (counts.empty() ? "" : ", ") + std::to_string(by_status[s]) + " " + s;
      std::cout << "sweep: " << total << " points: " << counts;
      if (resumed) std::cout << " (" << resumed << " kept from the previous run)";
      std::cout << " in " << format_duration(el) << " -> " << csv_path_ << "\n";
    }
    return failed > 0 ? 1 : 0;
  }

 private:
  Child spawn(size_t i) {
    const auto& p = points_[i];
    std::vector<std::string> argv = {exe_, "run", p.base_path};
    for (const auto& o : p.overrides) argv.push_back("--set=" + o);
    argv.insert(argv.end(), {"--json", json_path(i), "-q"});
    std::vector<char*> cargv;
    for (auto& s : argv) cargv.push_back(s.data());
    cargv.push_back(nullptr);

    std::error_code ec;
    fs::remove(json_path(i), ec);  // a stale result must not pass for this run's
    const int log = ::open(log_path(i).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    const pid_t parent = ::getpid();
    Child ch;
    ch.point = i;
    ch.started = Clock::now();
    ch.pid = ::fork();
    if (ch.pid == 0) {
      // Child: only async-signal-safe calls until exec.
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      if (devnull >= 0) {
        ::dup2(devnull, STDIN_FILENO);
        ::dup2(devnull, STDOUT_FILENO);
      }
      if (log >= 0) ::dup2(log, STDERR_FILENO);
      ::execv(cargv[0], cargv.data());
      const char msg[] = "error: cannot execute the cpsim binary\n";
      [[maybe_unused]] const ssize_t w = ::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(127);
    }
    if (ch.pid > 0) ::setpgid(ch.pid, ch.pid);  // also here: no race with the first kill
    if (log >= 0) ::close(log);
    if (devnull >= 0) ::close(devnull);
    if (ch.pid < 0) {
      ch.fork_errno = errno;
      ch.pid = -1;
    }
    return ch;
  }

  /// Drops the half-written result files (report::write_atomic's "<id>.json.tmp.<pid>") that
  /// children killed with an earlier sweep left behind; only this run's points, since other
  /// shards may share the directory.
  void remove_stale_temporaries(const std::vector<size_t>& todo) const {
    std::set<std::string> ids;
    for (size_t i : todo) ids.insert(points_[i].id);
    std::error_code ec;
    std::vector<fs::path> stale;
    for (const auto& e : fs::directory_iterator(dir_ / "runs", ec)) {
      const std::string name = e.path().filename().string();
      const size_t at = name.find(".json.tmp.");
      if (at != std::string::npos && ids.count(name.substr(0, at))) stale.push_back(e.path());
    }
    for (const auto& p : stale) fs::remove(p, ec);
  }

  /// Turns a finished child into its row. `status` is waitpid's, or -1 if it could not run.
  Row& record(const Child& ch, int status) {
    const size_t i = ch.point;
    Row& row = rows_[i].emplace();
    row.id = points_[i].id;
    for (const auto& [k, v] : points_[i].values) row.cells[k] = v;
    const std::string log = read_file(log_path(i));
    const std::string why = failure_reason(log);
    if (ch.pid < 0 || status < 0) {
      row.status = "failed";
      row.reason = "cannot start a process: " + std::string(std::strerror(ch.fork_errno));
    } else if (ch.timed_out) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", args_.timeout_s);
      row.status = "timeout";
      row.reason = std::string("killed after --timeout ") + buf + " s";
    } else if (WIFSIGNALED(status)) {
      row.status = "crashed";
      row.reason = std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
                   ::strsignal(WTERMSIG(status)) + ")" + (why.empty() ? "" : ": " + why);
    } else if (WEXITSTATUS(status) != 0) {
      row.status = "failed";
      row.reason = why.empty() ? "exit code " + std::to_string(WEXITSTATUS(status)) : why;
    } else {
      try {
        const auto j = nlohmann::json::parse(read_file(json_path(i)));
        for (const auto& m : kMetrics) {
          const nlohmann::json::json_pointer ptr(m.pointer);
          if (j.contains(ptr)) row.cells[m.column] = format_number(j.at(ptr));
        }
        row.status = "ok";
      } catch (const std::exception&) {
        row.status = "failed";
        row.reason = "no readable result JSON (" + json_path(i) + ")";
      }
    }
    // Keep a log only when it says something; drop what a killed child was writing
    // (report::write_atomic's temporary file).
    std::error_code ec;
    if (log.empty()) fs::remove(log_path(i), ec);
    if (ch.pid > 0) fs::remove(json_path(i) + ".tmp." + std::to_string(ch.pid), ec);
    return row;
  }

  void report_point(size_t i, size_t done, size_t total, double wall_s) {
    if (args_.quiet) return;
    const Row& row = *rows_[i];
    std::ostringstream line;
    line << "[" << done << "/" << total << "] " << row.status << " " << row.id;
    for (const auto& [k, v] : points_[i].values) line << " " << k << "=" << v;
    if (row.status == "ok") {
      const auto it = row.cells.find("step_time_s");
      if (it != row.cells.end()) {
        char t[48];
        std::snprintf(t, sizeof t, "  time %.4g s", std::atof(it->second.c_str()));
        line << t;
      }
    } else {
      line << ": " << row.reason;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "  (%.1f s)", wall_s);
    line << buf;
    // On a terminal only failures stay on screen; the progress line says the rest.
    if (tty_ && row.status == "ok") return;
    std::cerr << (tty_ ? "\r\033[K" : "") << line.str() << "\n";
  }

  void write_csv() {
    std::vector<const Row*> rows;
    for (const auto& r : rows_)
      if (r) rows.push_back(&*r);
    report::write_atomic(csv_path_, csv_text(header_, rows));
  }

  const SweepArgs& args_;
  std::vector<scenario::SweepPoint> points_;
  fs::path dir_;
  std::string csv_path_;
  std::string exe_ = self_exe();
  std::vector<std::string> swept_, header_;
  std::vector<std::optional<Row>> rows_;
  bool tty_ = false;
};

// ---- shards ------------------------------------------------------------------------------

/// A point's expected cost: GPUs (tp x cp x pp x dp) x tokens per sequence, what its run time
/// grows with. A point its scenario rejects costs 0: it fails at once.
std::vector<double> point_costs(const std::vector<scenario::SweepPoint>& points) {
  std::vector<double> cost(points.size(), 0.0);
  for (size_t i = 0; i < points.size(); ++i) {
    try {
      const scenario::Scenario s = scenario::load_scenario(points[i].base_path, points[i].overrides);
      const auto& p = s.parallel;
      cost[i] = static_cast<double>(p.tp) * p.cp * p.pp * p.dp * static_cast<double>(s.training.seq_len);
    } catch (const std::exception&) {
      cost[i] = 0;
    }
  }
  return cost;
}

/// Point -> shard, a pure function of the costs and K (so of the sweep file, the --set
/// overrides and K): points by cost, largest first (ties by index), each to the shard with the
/// least cost so far (ties: fewer points, then the lower shard). Equal costs deal the points
/// round-robin (index % K); with K <= points no shard is empty.
std::vector<size_t> assign_shards(const std::vector<double>& cost, size_t k) {
  std::vector<size_t> order(cost.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&cost](size_t a, size_t b) { return cost[a] > cost[b]; });
  using Slot = std::tuple<double, size_t, size_t>;  // load, points, shard
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> least;
  for (size_t s = 0; s < k; ++s) least.emplace(0.0, 0, s);
  std::vector<size_t> shard(cost.size(), 0);
  for (size_t i : order) {
    const auto [load, n, s] = least.top();
    least.pop();
    shard[i] = s;
    least.emplace(load + cost[i], n + 1, s);
  }
  return shard;
}

// ---- merging shards ------------------------------------------------------------------------

struct ShardReport {
  size_t points = 0, ok = 0, failed = 0, missing = 0;
  bool has_csv = false;
  std::vector<std::string> failed_ids;
};

/// What K shard CSVs in a directory hold, point by point.
struct Collected {
  std::vector<std::optional<Row>> rows;  ///< by point: its best row, if any
  std::vector<ShardReport> shards;
  size_t ok = 0, failed = 0, missing = 0;

  /// The shards with a point that is not ok: what a resume runs again.
  std::vector<size_t> incomplete() const {
    std::vector<size_t> out;
    for (size_t s = 0; s < shards.size(); ++s)
      if (shards[s].ok < shards[s].points) out.push_back(s);
    return out;
  }
};

/// Reads results.i-of-K.csv for every shard. A row counts for a point when its values are the
/// point's and, if ok, the point's JSON is there (as --resume decides). A row is looked for in
/// every shard's file, not only in the point's own, so a merge never loses a result; an ok row
/// wins over another, then the row of the point's own shard.
Collected collect_shards(const fs::path& dir, const std::vector<scenario::SweepPoint>& points,
                         const std::vector<size_t>& shard_of, size_t k) {
  Collected c;
  c.rows.resize(points.size());
  c.shards.resize(k);
  std::map<std::string, size_t> by_id;
  for (size_t i = 0; i < points.size(); ++i) by_id[points[i].id] = i;
  for (size_t s = 0; s < k; ++s) {
    const fs::path csv = dir / shard_csv_name(s, k);
    c.shards[s].has_csv = fs::exists(csv);
    for (Row& row : read_rows(csv.string())) {
      const auto it = by_id.find(row.id);
      if (it == by_id.end() || !same_values(row, points[it->second])) continue;
      const size_t i = it->second;
      const bool ok = row.status == "ok";
      if (ok && !fs::exists(point_json(dir, points[i]))) continue;
      auto& have = c.rows[i];
      const bool have_ok = have && have->status == "ok";
      if (!have || (ok && !have_ok) || (ok == have_ok && s == shard_of[i])) have = std::move(row);
    }
  }
  for (size_t i = 0; i < points.size(); ++i) {
    ShardReport& r = c.shards[shard_of[i]];
    ++r.points;
    if (!c.rows[i]) {
      ++r.missing, ++c.missing;
    } else if (c.rows[i]->status == "ok") {
      ++r.ok, ++c.ok;
    } else {
      ++r.failed, ++c.failed;
      r.failed_ids.push_back(points[i].id);
    }
  }
  return c;
}

std::vector<std::string> swept_keys(const std::vector<scenario::SweepPoint>& points) {
  std::vector<std::string> swept;
  for (const auto& p : points)
    for (const auto& [k, v] : p.values)
      if (std::find(swept.begin(), swept.end(), k) == swept.end()) swept.push_back(k);
  return swept;
}

/// Writes DIR/results.csv from the collected rows, in point order: the same file a local run of
/// the whole sweep writes. Merging again gives the same bytes.
std::string write_merged(const fs::path& dir, const std::vector<scenario::SweepPoint>& points,
                         const Collected& c) {
  std::vector<const Row*> rows;
  for (const auto& r : c.rows)
    if (r) rows.push_back(&*r);
  const std::string path = (dir / "results.csv").string();
  report::write_atomic(path, csv_text(csv_header(swept_keys(points)), rows));
  return path;
}

// ---- the Slurm manifest --------------------------------------------------------------------

/// DIR/sweep-slurm.json: what was submitted, so that --merge and --resume need only DIR.
constexpr const char* kManifest = "sweep-slurm.json";

struct Manifest {
  std::string sweep_file;  ///< absolute
  size_t shards = 0;
  std::vector<std::string> sets;
  struct Submission {
    std::string job_id;
    std::vector<size_t> shards;
  };
  std::vector<Submission> submissions;
};

/// The manifest of DIR, if any; throws std::runtime_error when it cannot be read.
std::optional<Manifest> read_manifest(const fs::path& dir) {
  const fs::path path = dir / kManifest;
  if (!fs::exists(path)) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(read_file(path.string()));
    Manifest m;
    m.sweep_file = j.at("sweep_file").get<std::string>();
    m.shards = j.at("shards").get<size_t>();
    m.sets = j.value("sets", std::vector<std::string>{});
    for (const auto& s : j.value("submissions", nlohmann::json::array()))
      m.submissions.push_back({s.at("job_id").get<std::string>(), s.at("shards").get<std::vector<size_t>>()});
    if (m.shards == 0) throw std::runtime_error("shards is 0");
    return m;
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot read " + path.string() + ": " + e.what());
  }
}

void write_manifest(const fs::path& dir, const Manifest& m, const slurm::ArrayJob& job) {
  nlohmann::json j;
  j["sweep_file"] = m.sweep_file;
  j["shards"] = m.shards;
  j["sets"] = m.sets;
  j["cpsim"] = job.cpsim;
  j["script"] = (dir / "sweep.sbatch").string();
  auto subs = nlohmann::json::array();
  for (const auto& s : m.submissions) subs.push_back({{"job_id", s.job_id}, {"shards", s.shards}});
  j["submissions"] = subs;
  report::write_atomic((dir / kManifest).string(), j.dump(2) + "\n");
}

/// The Slurm log of the last task that ran shard `s`, if it is there.
std::string task_log(const fs::path& dir, const std::optional<Manifest>& m, size_t s) {
  if (!m) return "";
  for (auto it = m->submissions.rbegin(); it != m->submissions.rend(); ++it)
    if (std::find(it->shards.begin(), it->shards.end(), s) != it->shards.end()) {
      const fs::path log = dir / ("slurm-" + it->job_id + "_" + std::to_string(s) + ".out");
      return fs::exists(log) ? log.string() : "";
    }
  return "";
}

/// Prints what a merge found: one summary line, then each incomplete shard. Returns the exit
/// code: 0 when every point is ok, else 1.
int report_merge(const Collected& c, const fs::path& dir, const std::string& csv_path,
                 const std::optional<Manifest>& m, const std::string& rerun_hint, bool quiet) {
  const size_t k = c.shards.size(), n = c.rows.size();
  if (!quiet) {
    std::string counts = std::to_string(c.ok) + " ok";
    if (c.failed) counts += ", " + std::to_string(c.failed) + " failed";
    if (c.missing) counts += ", " + std::to_string(c.missing) + " missing";
    std::cout << "merge: " << n << " points from " << k << " shards: " << counts << " -> " << csv_path << "\n";
  }
  for (size_t s = 0; s < k; ++s) {
    const ShardReport& r = c.shards[s];
    if (r.ok == r.points) continue;
    std::ostringstream line;
    line << "merge: shard " << s << "/" << k << ": ";
    if (r.missing) {
      line << r.missing << " of " << r.points << " points missing";
      if (!r.has_csv) line << " (no " << shard_csv_name(s, k) << ": the task never wrote a row)";
    }
    if (r.failed) {
      line << (r.missing ? "; " : "") << r.failed << " of " << r.points << " failed:";
      for (size_t f = 0; f < r.failed_ids.size() && f < 5; ++f) line << " " << r.failed_ids[f];
      if (r.failed_ids.size() > 5) line << " ...";
    }
    const std::string log = task_log(dir, m, s);
    if (!log.empty()) line << " (task log " << log << ")";
    std::cerr << line.str() << "\n";
  }
  if (c.ok < n && !rerun_hint.empty()) std::cerr << "merge: run the incomplete shards again: " << rerun_hint << "\n";
  return c.ok == n ? 0 : 1;
}

/// The cpsim binary itself, never the CPSIM_SWEEP_CHILD stand-in: the array tasks run the sweep.
std::string own_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "/proc/self/exe" : p.string();
}

fs::path absolute_dir(const std::string& d) {
  fs::path p = fs::absolute(d).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p;
}

// ---- the subcommand ------------------------------------------------------------------------

constexpr size_t kDefaultArraySize = 32;

int usage_error(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return 2;
}

/// Loads the sweep, appends the --set overrides to every point, rejects duplicate ids.
std::optional<scenario::Sweep> load_points(const std::string& file, const std::vector<std::string>& sets) {
  scenario::Sweep sweep;
  try {
    sweep = scenario::load_sweep_file(file);
  } catch (const scenario::InputError& e) {
    std::cerr << e.what() << "\n";
    return std::nullopt;
  }
  for (auto& p : sweep.points) p.overrides.insert(p.overrides.end(), sets.begin(), sets.end());
  std::set<std::string> seen;
  for (const auto& p : sweep.points)
    if (!seen.insert(p.id).second) {
      std::cerr << file << ": error: two points share the id '" << p.id << "'\n";
      return std::nullopt;
    }
  return sweep;
}

int run_merge(const SweepArgs& a) {
  const fs::path dir = absolute_dir(a.merge_dir);
  if (!fs::is_directory(dir)) return usage_error("--merge: no directory " + dir.string());
  std::optional<Manifest> m;
  try {
    m = read_manifest(dir);
  } catch (const std::exception& e) {
    std::cerr << "merge: " << e.what() << "\n";
    return 1;
  }
  const std::string file = !a.sweep_file.empty() ? a.sweep_file : m ? m->sweep_file : "";
  if (file.empty())
    return usage_error("--merge: " + dir.string() + " has no " + kManifest +
                       " (it was not submitted with --slurm); name the sweep file: cpsim sweep SWEEP.yaml --merge DIR");
  const std::vector<std::string> sets = !a.sets.empty() ? a.sets : m ? m->sets : std::vector<std::string>{};
  size_t k = 0;
  if (m) {
    if (a.array_size && a.array_size != m->shards)
      return usage_error("--merge: " + dir.string() + " was submitted as " + std::to_string(m->shards) +
                         " shards, not " + std::to_string(a.array_size));
    k = m->shards;
  } else if (a.array_size) {
    k = a.array_size;
  } else {
    // Without a manifest, K is in the shard files' names: results.i-of-K.csv.
    std::set<size_t> ks;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      size_t i = 0, kk = 0;
      char tail[8] = {};
      if (std::sscanf(name.c_str(), "results.%zu-of-%zu.cs%1s", &i, &kk, tail) == 3 && name.ends_with(".csv") &&
          shard_csv_name(i, kk) == name && i < kk)
        ks.insert(kk);
    }
    if (ks.empty()) {
      std::cerr << "merge: no shard files (results.i-of-K.csv) in " << dir.string() << "\n";
      return 1;
    }
    if (ks.size() > 1) {
      std::string list;
      for (size_t kk : ks) list += (list.empty() ? "" : ", ") + std::to_string(kk);
      return usage_error("--merge: " + dir.string() + " holds shards of several sizes K (" + list +
                         "); choose one with --array-size K");
    }
    k = *ks.begin();
  }
  const auto sweep = load_points(file, sets);
  if (!sweep) return 2;
  const auto shard_of = assign_shards(point_costs(sweep->points), k);
  const Collected c = collect_shards(dir, sweep->points, shard_of, k);
  std::string hint;
  if (m) hint = "cpsim sweep " + slurm::shell_quote(file) + " --slurm --resume -o " + slurm::shell_quote(dir.string());
  else hint = "cpsim sweep " + slurm::shell_quote(file) + " --shard i/" + std::to_string(k) + " --resume -o " +
              slurm::shell_quote(dir.string()) + " for each shard i above";
  try {
    const std::string csv = write_merged(dir, sweep->points, c);
    return report_merge(c, dir, csv, m, hint, a.quiet);
  } catch (const std::exception& e) {
    std::cerr << "merge: " << e.what() << "\n";
    return 1;
  }
}

double poll_interval_s() {
  // A test seam: how often --wait asks squeue.
  if (const char* p = std::getenv("CPSIM_SLURM_POLL_S"); p && *p) {
    const double v = std::atof(p);
    if (v > 0) return v;
  }
  return 2.0;
}

/// Waits until `job_id` has left the queue, showing how many points its shards finished.
/// Returns false when interrupted.
bool wait_for_job(const std::string& job_id, const fs::path& dir, const std::vector<size_t>& shard_of,
                  const std::vector<size_t>& shards, size_t k, bool quiet) {
  std::set<size_t> mine(shards.begin(), shards.end());
  size_t total = 0;
  for (size_t s : shard_of) total += mine.count(s);
  const bool tty = ::isatty(STDERR_FILENO) && !quiet;
  const double poll_s = poll_interval_s();
  const auto t0 = Clock::now();
  std::string last_line, last_error;
  InterruptGuard guard;
  while (!g_interrupted) {
    const slurm::QueueState q = slurm::query(job_id);
    if (q.gone()) break;
    if (!q.answered) {
      if (q.error != last_error)
        std::cerr << (tty ? "\r\033[K" : "") << "sweep: squeue: " << q.error << " (still waiting)\n";
      last_error = q.error;
    } else if (!quiet) {
      size_t done = 0;
      for (size_t s : shards) done += read_rows((dir / shard_csv_name(s, k)).string()).size();
      const std::string line = "[" + std::to_string(std::min(done, total)) + "/" + std::to_string(total) + "] job " +
                               job_id + ": tasks " + std::to_string(q.running) + " running, " +
                               std::to_string(q.pending) + " pending";
      if (line != last_line) std::cerr << (tty ? "\r\033[K" : "") << line << (tty ? "" : "\n") << std::flush;
      last_line = line;
    }
    const auto until = Clock::now() + std::chrono::duration<double>(poll_s);
    while (!g_interrupted && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (tty) std::cerr << "\r\033[K" << std::flush;
  if (g_interrupted) {
    std::cerr << "sweep: stopped waiting; job " << job_id << " goes on. Merge when it is done: cpsim sweep --merge "
              << slurm::shell_quote(dir.string()) << "\n";
    return false;
  }
  if (!quiet)
    std::cerr << "sweep: job " << job_id << " left the queue after "
              << format_duration(std::chrono::duration<double>(Clock::now() - t0).count()) << "\n";
  return true;
}

int run_slurm(const SweepArgs& a, const scenario::Sweep& sweep) {
  const size_t n = sweep.points.size();
  const fs::path dir = absolute_dir(a.out_dir.empty() ? sweep.name + "-sweep" : a.out_dir);
  if (dir.string().find_first_of(" \t\n%") != std::string::npos)
    return usage_error("--slurm: the output directory's path goes into `#SBATCH --output` and may not hold "
                       "blanks or '%': " + dir.string());
  if (n == 0) return usage_error("--slurm: the sweep has no points");
  for (const auto* v : {&a.partition, &a.time_limit})
    if (v->find_first_of("\n\r") != std::string::npos) return usage_error("--partition and --time take one line");
  for (const auto& v : a.sbatch_args)
    if (v.empty() || v.find_first_of("\n\r") != std::string::npos)
      return usage_error("--sbatch-arg takes one sbatch option on one line, e.g. --sbatch-arg=--account=proj");
  std::error_code ec;
  fs::create_directories(dir / "runs", ec);
  if (!ec) fs::create_directories(dir / "logs", ec);
  if (ec) {
    std::cerr << "error: cannot create " << dir.string() << ": " << ec.message() << "\n";
    return 1;
  }
  std::optional<Manifest> m;
  try {
    m = read_manifest(dir);
  } catch (const std::exception& e) {
    std::cerr << "sweep: " << e.what() << "\n";
    return 1;
  }
  // A submission still queued would write the same shard files as a new one.
  if (m)
    for (const auto& sub : m->submissions) {
      const slurm::QueueState q = slurm::query(sub.job_id);
      if (!q.answered) {
        std::cerr << "sweep: cannot tell whether job " << sub.job_id << " (an earlier submission to " << dir.string()
                  << ") is still queued: " << q.error << "\n";
        return 1;
      }
      if (!q.gone()) {
        std::cerr << "sweep: job " << sub.job_id << " (an earlier submission to " << dir.string() << ") still has "
                  << q.running << " tasks running and " << q.pending
                  << " pending; wait for it (cpsim sweep --merge shows its progress) or scancel it first\n";
        return 1;
      }
    }

  size_t k = a.array_size ? a.array_size : std::min(n, kDefaultArraySize);
  if (a.resume && m && m->shards != k) {
    if (a.array_size)
      return usage_error("--resume: " + dir.string() + " was submitted as " + std::to_string(m->shards) +
                         " shards; drop --array-size or give the same K");
    k = m->shards;
  }
  if (k > n && !(a.resume && m)) {
    if (!a.quiet) std::cerr << "sweep: --array-size " << k << " > " << n << " points: using " << n << " array tasks\n";
    k = n;
  }
  const auto shard_of = assign_shards(point_costs(sweep.points), k);

  std::vector<size_t> to_run;
  Manifest next;
  next.sweep_file = fs::absolute(sweep.file).lexically_normal().string();
  next.shards = k;
  next.sets = a.sets;
  if (a.resume) {
    const Collected c = collect_shards(dir, sweep.points, shard_of, k);
    to_run = c.incomplete();
    if (m && m->shards == k) next.submissions = m->submissions;
    if (to_run.empty()) {
      if (!a.quiet) std::cerr << "sweep: resuming: all " << n << " points are done; nothing to submit\n";
      return report_merge(c, dir, write_merged(dir, sweep.points, c), m, "", a.quiet);
    }
    if (!a.quiet)
      std::cerr << "sweep: resuming: " << c.ok << " of " << n << " points done; resubmitting "
                << (to_run.size() == 1 ? "shard " : "shards ") << slurm::array_list(to_run) << " of " << k << "\n";
  } else {
    for (size_t s = 0; s < k; ++s) to_run.push_back(s);
    // A fresh sweep, as a local run without --resume: no row of an earlier run survives.
    std::vector<fs::path> stale;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name == "results.csv" || (name.starts_with("results.") && name.find("-of-") != std::string::npos &&
                                    name.ends_with(".csv")))
        stale.push_back(e.path());
    }
    for (const auto& p : stale) fs::remove(p, ec);
  }

  slurm::ArrayJob job;
  std::string name = "cpsim-" + sweep.name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '-';
  job.job_name = name;
  job.cpsim = own_exe();
  job.sweep_file = next.sweep_file;
  job.out_dir = dir.string();
  job.shards = k;
  job.cpus_per_task = a.jobs > 0 ? a.jobs : 1;
  job.timeout_s = a.timeout_s;
  job.partition = a.partition;
  job.time_limit = a.time_limit;
  job.sets = a.sets;
  job.sbatch_args = a.sbatch_args;
  const std::string script = (dir / "sweep.sbatch").string();
  try {
    report::write_atomic(script, slurm::batch_script(job));
    fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  } catch (const std::exception& e) {
    std::cerr << "sweep: " << e.what() << "\n";
    return 1;
  }
  const slurm::Submitted sub = slurm::submit(script, to_run.size() == k ? "" : slurm::array_list(to_run));
  if (!sub.ok) {
    std::cerr << "sweep: sbatch " << script << ": " << sub.error << "\n";
    return 1;
  }
  next.submissions.push_back({sub.job_id, to_run});
  try {
    write_manifest(dir, next, job);
  } catch (const std::exception& e) {
    std::cerr << "sweep: job " << sub.job_id << " submitted, but " << e.what() << "\n";
    return 1;
  }
  size_t points_submitted = 0;
  for (size_t s : shard_of) points_submitted += std::binary_search(to_run.begin(), to_run.end(), s);
  if (a.quiet) {
    if (!a.wait) std::cout << sub.job_id << "\n";
  } else {
    std::cout << "sweep: submitted job " << sub.job_id << ": " << to_run.size()
              << (to_run.size() == 1 ? " array task (shard " : " array tasks (shards ") << slurm::array_list(to_run)
              << " of " << k << ") for " << points_submitted << " of " << n << " points -> " << dir.string() << "\n";
    if (!a.wait)
      std::cout << "sweep: when it is done: cpsim sweep --merge " << slurm::shell_quote(dir.string()) << "\n";
  }
  if (!a.wait) return 0;
  if (!wait_for_job(sub.job_id, dir, shard_of, to_run, k, a.quiet)) return 130;
  const std::optional<Manifest> now = next;
  Collected c = collect_shards(dir, sweep.points, shard_of, k);
  // On a shared filesystem the last files a node wrote may take a moment to show here.
  for (int retry = 0; retry < 3 && c.missing > 0 && !g_interrupted; ++retry) {
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_interval_s()));
    c = collect_shards(dir, sweep.points, shard_of, k);
  }
  try {
    const std::string csv = write_merged(dir, sweep.points, c);
    return report_merge(c, dir, csv, now,
                        "cpsim sweep " + slurm::shell_quote(next.sweep_file) + " --slurm --resume -o " +
                            slurm::shell_quote(dir.string()),
                        a.quiet);
  } catch (const std::exception& e) {
    std::cerr << "merge: " << e.what() << "\n";
    return 1;
  }
}

int run_sweep(const SweepArgs& a) {
  if (!a.merge_dir.empty() && (a.slurm || !a.shard.empty() || a.list || a.wait || a.resume))
    return usage_error("--merge DIR merges what is in DIR; it takes no --slurm, --shard, --list, --wait or --resume");
  if (a.slurm && !a.shard.empty())
    return usage_error("--slurm submits every shard; --shard is what each array task runs");
  if (a.slurm && a.list) return usage_error("--list runs nothing; use --list --shard i/K to see one shard's points");
  if (!a.slurm) {
    if (a.wait) return usage_error("--wait needs --slurm");
    if (!a.partition.empty() || !a.time_limit.empty() || !a.sbatch_args.empty())
      return usage_error("--partition, --time and --sbatch-arg need --slurm");
    if (a.array_size && a.merge_dir.empty()) return usage_error("--array-size needs --slurm or --merge");
  }
  if (a.timeout_s < 0 || !std::isfinite(a.timeout_s))
    return usage_error("--timeout: expected seconds >= 0 (0 = no limit)");
  if (!a.merge_dir.empty()) return run_merge(a);
  if (a.sweep_file.empty()) return usage_error("a sweep file is required: cpsim sweep SWEEP.yaml ...");

  std::optional<std::pair<size_t, size_t>> shard;
  if (!a.shard.empty()) {
    shard = parse_shard(a.shard);
    if (!shard) return usage_error("--shard: expected i/K with 0 <= i < K, got '" + a.shard + "'");
  }
  const auto loaded = load_points(a.sweep_file, a.sets);
  if (!loaded) return 2;
  const scenario::Sweep& sweep = *loaded;
  if (a.slurm) return run_slurm(a, sweep);

  std::vector<size_t> todo;
  if (shard) {
    const auto shard_of = assign_shards(point_costs(sweep.points), shard->second);
    for (size_t i = 0; i < sweep.points.size(); ++i)
      if (shard_of[i] == shard->first) todo.push_back(i);
  } else {
    for (size_t i = 0; i < sweep.points.size(); ++i) todo.push_back(i);
  }

  if (a.list) {
    for (size_t i : todo) {
      const auto& p = sweep.points[i];
      std::cout << p.id << "  " << p.base_path;
      for (const auto& o : p.overrides) std::cout << "  --set " << o;
      std::cout << "\n";
    }
    return 0;
  }

  SweepArgs args = a;
  if (args.out_dir.empty()) args.out_dir = sweep.name + "-sweep";
  if (args.jobs <= 0) args.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::error_code ec;
  fs::create_directories(fs::path(args.out_dir) / "runs", ec);
  if (!ec) fs::create_directories(fs::path(args.out_dir) / "logs", ec);
  if (ec) {
    std::cerr << "error: cannot create " << args.out_dir << ": " << ec.message() << "\n";
    return 1;
  }
  const std::string csv_name = shard ? shard_csv_name(shard->first, shard->second) : "results.csv";
  SweepRunner runner(args, sweep.points, csv_name);
  try {
    if (args.resume) runner.load_previous(todo);
    return runner.run(todo);
  } catch (const std::exception& e) {
    std::cerr << "sweep: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

void register_sweep(CLI::App& app, int& rc) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd = app.add_subcommand("sweep", "run every scenario of a sweep file, N at a time, here or on Slurm");
  cmd->add_option("sweep", a->sweep_file, "sweep YAML file (with --merge: taken from DIR when submitted with --slurm)");
  cmd->add_option("-o,--out", a->out_dir, "output directory (default: <sweep name>-sweep)");
  cmd->add_option("-j,--jobs", a->jobs,
                  "scenarios run at once (default: CPU count; with --slurm: CPUs per array task, default 1)");
  cmd->add_option("--timeout", a->timeout_s, "seconds one scenario may run before it is killed (0 = no limit)")
      ->default_str("600");
  cmd->add_option("--set", a->sets,
                  "override a scenario key in every point, after the sweep's own values (repeatable)");
  cmd->add_flag("--resume", a->resume,
                "keep the points a previous run finished; run the rest (with --slurm: resubmit only the shards "
                "with missing or failed points)");
  cmd->add_flag("--list", a->list, "print the expanded points and exit");
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing but errors (with --slurm: the job id)");
  // Documented in docs/workflow.md; hidden here: what each array task (or batch job) runs.
  cmd->add_option("--shard", a->shard, "run only shard i of K (cost-balanced) (i/K)")->group("");
  auto* slurm = cmd->add_flag("--slurm", a->slurm,
                              "submit the sweep as one Slurm array job of K shards (-o DIR on a shared filesystem)");
  cmd->add_option("--array-size", a->array_size, "K: array tasks (shards) for --slurm (default: min(points, 32))")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--partition", a->partition, "Slurm partition (default: the cluster's)")->needs(slurm);
  cmd->add_option("--time", a->time_limit, "time limit of each array task, Slurm syntax (e.g. 30, 2:00:00)")
      ->needs(slurm);
  cmd->add_option("--sbatch-arg", a->sbatch_args,
                  "an extra sbatch option, e.g. --sbatch-arg=--account=proj (repeatable)")
      ->allow_extra_args(false)
      ->needs(slurm);
  cmd->add_flag("--wait", a->wait, "with --slurm: wait for the job, then merge")->needs(slurm);
  cmd->add_option("--merge", a->merge_dir,
                  "merge the shards in DIR into DIR/results.csv and report missing or failed ones")
      ->type_name("DIR");
  cmd->callback([a, &rc] { rc = run_sweep(*a); });
}

}  // namespace cpsim::app
