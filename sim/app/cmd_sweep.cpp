// `cpsim sweep`: runs every point of a sweep file in its own `cpsim run` process (SimGrid
// allows one engine per process), N at a time, and records each as it finishes: one CSV row
// and one result JSON per point, both written atomically, so an interrupted sweep loses
// nothing and `--resume` picks up where it stopped.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app/commands.hpp"
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
    if (!fs::exists(csv_path_)) return 0;
    const auto recs = parse_csv(read_file(csv_path_));
    if (recs.empty()) return 0;
    const auto& head = recs.front();
    std::map<std::string, size_t> by_id;
    for (size_t i : todo) by_id[points_[i].id] = i;
    size_t kept = 0;
    for (size_t r = 1; r < recs.size(); ++r) {
      Row row;
      for (size_t c = 0; c < head.size() && c < recs[r].size(); ++c) {
        if (head[c] == "id") row.id = recs[r][c];
        else if (head[c] == "status") row.status = recs[r][c];
        else if (head[c] == "reason") row.reason = recs[r][c];
        else row.cells[head[c]] = recs[r][c];
      }
      const auto it = by_id.find(row.id);
      if (it == by_id.end() || row.status != "ok" || !fs::exists(json_path(it->second))) continue;
      // The sweep file may have changed since: a row counts only for the same values.
      bool same = true;
      for (const auto& [k, v] : points_[it->second].values) same = same && row.cells[k] == v;
      if (!same) continue;
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

int run_sweep(const SweepArgs& a) {
  scenario::Sweep sweep;
  try {
    sweep = scenario::load_sweep_file(a.sweep_file);
  } catch (const scenario::InputError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  std::optional<std::pair<size_t, size_t>> shard;
  if (!a.shard.empty()) {
    shard = parse_shard(a.shard);
    if (!shard) {
      std::cerr << "error: --shard: expected i/K with 0 <= i < K, got '" << a.shard << "'\n";
      return 2;
    }
  }
  if (a.timeout_s < 0 || !std::isfinite(a.timeout_s)) {
    std::cerr << "error: --timeout: expected seconds >= 0 (0 = no limit)\n";
    return 2;
  }
  for (auto& p : sweep.points) p.overrides.insert(p.overrides.end(), a.sets.begin(), a.sets.end());
  std::vector<size_t> todo;
  for (size_t i = 0; i < sweep.points.size(); ++i)
    if (!shard || i % shard->second == shard->first) todo.push_back(i);
  {
    std::map<std::string, size_t> seen;
    for (const auto& p : sweep.points)
      if (!seen.emplace(p.id, 0).second) {
        std::cerr << a.sweep_file << ": error: two points share the id '" << p.id << "'\n";
        return 2;
      }
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
  const std::string csv_name =
      shard ? "results." + std::to_string(shard->first) + "-of-" + std::to_string(shard->second) + ".csv"
            : "results.csv";
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
  auto* cmd = app.add_subcommand("sweep", "run every scenario of a sweep file, N at a time");
  cmd->add_option("sweep", a->sweep_file, "sweep YAML file")->required();
  cmd->add_option("-o,--out", a->out_dir, "output directory (default: <sweep name>-sweep)");
  cmd->add_option("-j,--jobs", a->jobs, "scenarios run at once (default: CPU count)");
  cmd->add_option("--timeout", a->timeout_s, "seconds one scenario may run before it is killed (0 = no limit)")
      ->default_str("600");
  cmd->add_option("--set", a->sets,
                  "override a scenario key in every point, after the sweep's own values (repeatable)");
  cmd->add_flag("--resume", a->resume, "keep the points a previous run finished; run the rest");
  cmd->add_flag("--list", a->list, "print the expanded points and exit");
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing but errors");
  // Documented in docs/workflow.md; hidden here: for batch schedulers (one shard per job).
  cmd->add_option("--shard", a->shard, "run only points whose index % K == i (i/K)")->group("");
  cmd->callback([a, &rc] { rc = run_sweep(*a); });
}

}  // namespace cpsim::app
