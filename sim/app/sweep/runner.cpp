#include "app/sweep/runner.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "report/output.hpp"
#include "scenario/load.hpp"
#include "support/safe_write.hpp"

namespace cpsim::app::sweep {

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

SweepRunner::SweepRunner(const SweepArgs& a, std::vector<scenario::SweepPoint> points, std::string csv_name,
                         pool::Runner& runner, pool::Clock& clock)
    : args_(a), points_(std::move(points)), dir_(a.out_dir), csv_path_((dir_ / csv_name).string()),
      runner_(runner), clock_(clock) {
  for (const auto& p : points_)
    for (const auto& [k, v] : p.values)
      if (std::find(swept_.begin(), swept_.end(), k) == swept_.end()) swept_.push_back(k);
  header_ = csv_header(swept_);
  rows_.resize(points_.size());
}

std::string SweepRunner::json_path(size_t i) const { return (dir_ / "runs" / (points_[i].id + ".json")).string(); }
std::string SweepRunner::log_path(size_t i) const { return (dir_ / "logs" / (points_[i].id + ".log")).string(); }


/// Keeps the rows of a previous run that succeeded, whose JSON is still there and was produced
/// by the scenario the point resolves to now.
size_t SweepRunner::load_previous(const std::vector<size_t>& todo) {
  std::map<std::string, size_t> by_id;
  for (size_t i : todo) by_id[points_[i].id] = i;
  size_t kept = 0;
  for (Row& row : read_rows(csv_path_)) {
    const auto it = by_id.find(row.id);
    if (it == by_id.end() || row.status != "ok") continue;
    if (!same_values(row, points_[it->second])) continue;
    // The row's metrics come again from its JSON: a row whose JSON does not parse (a
    // truncated or corrupted file) runs again, and a corrupted CSV cell is not kept.
    const auto j = read_result_json(json_path(it->second));
    if (!j || !result_of_point(points_[it->second], *j)) continue;
    fill_metrics(row, *j);
    if (!rows_[it->second]) ++kept;
    rows_[it->second] = std::move(row);
  }
  return kept;
}

/// Runs the points in `todo` that have no row yet. Returns the process exit code.
int SweepRunner::run(const std::vector<size_t>& todo) {
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

  tty_ = ::isatty(STDERR_FILENO) && !args_.quiet;
  const double t0 = clock_.now_s();
  double last_draw = t0 - 10;
  size_t failed = 0;
  pool::InterruptGuard guard;
  const bool finished = pool::run_batch(
      runner_, clock_, queue.size(), args_.jobs, args_.timeout_s, [&](size_t q) { return spawn(queue[q]); },
      [&](const pool::Finished& f) {
        const Row& row = record(queue[f.index], f);
        ++done;
        if (row.status != "ok") ++failed;
        report_point(queue[f.index], done, total, f.wall_s);
      },
      [&](bool changed) {
        if (changed) write_csv();
        const double now = clock_.now_s();
        if (tty_ && (changed || now - last_draw > 0.5)) {
          const size_t ran = done - resumed;
          std::string eta = "--";
          if (ran > 0) eta = format_duration((now - t0) / static_cast<double>(ran) * static_cast<double>(total - done));
          std::cerr << "\r\033[K[" << done << "/" << total << "] failed " << failed << "  ETA " << eta << std::flush;
          last_draw = now;
        }
      });
  if (tty_) std::cerr << "\r\033[K" << std::flush;
  if (!finished) {
    // The points it killed (SIGKILL, their group) could not remove their result's temporary.
    remove_stale_temporaries(todo);
    write_csv();
    std::cerr << "sweep: interrupted after " << done << " of " << total << " points; "
              << "rerun with --resume to finish (" << csv_path_ << ")\n";
    return pool::interrupted_exit_code();
  }
  const double el = clock_.now_s() - t0;
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

pool::Runner::Id SweepRunner::spawn(size_t i) {
  const auto& p = points_[i];
  std::vector<std::string> args = {"run", p.base_path};
  for (const auto& o : p.overrides) args.push_back("--set=" + o);
  args.insert(args.end(), {"--json", json_path(i), "-q"});
  std::error_code ec;
  fs::remove(json_path(i), ec);  // a stale result must not pass for this run's
  return runner_.start_cpsim(args, log_path(i));
}

/// Drops the half-written result files (report::write_atomic's "<id>.json.tmp.<pid>") that
/// children killed with an earlier sweep left behind; only this run's points, since other
/// shards may share the directory.
void SweepRunner::remove_stale_temporaries(const std::vector<size_t>& todo) const {
  std::set<std::string> ids;
  for (size_t i : todo) ids.insert(points_[i].id);
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir_ / "runs", ec)) {
    const std::string name = e.path().filename().string();
    for (const auto& id : ids)
      if (name.starts_with(support::temp_prefix(id + ".json")) || name.starts_with(id + ".json.tmp."))
        stale.push_back(e.path());
  }
  for (const auto& p : stale) fs::remove(p, ec);
}

/// Turns a finished command into its row.
Row& SweepRunner::record(size_t i, const pool::Finished& f) {
  using How = pool::Exit::How;
  Row& row = rows_[i].emplace();
  row.id = points_[i].id;
  for (const auto& [k, v] : points_[i].values) row.cells[k] = v;
  std::string log;  // none when the command never started
  if (fs::is_regular_file(log_path(i))) log = read_file(log_path(i));
  const std::string why = failure_reason(log);
  if (f.exit.how == How::NotStarted) {
    row.status = "failed";
    row.reason = "cannot start a process: " + std::string(std::strerror(f.exit.code));
  } else if (f.timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", args_.timeout_s);
    row.status = "timeout";
    row.reason = std::string("killed after --timeout ") + buf + " s";
  } else if (f.exit.how == How::Signaled) {
    row.status = "crashed";
    row.reason = std::string("killed by signal ") + std::to_string(f.exit.code) + " (" +
                 ::strsignal(f.exit.code) + ")" + (why.empty() ? "" : ": " + why);
  } else if (f.exit.code != 0) {
    row.status = "failed";
    row.reason = why.empty() ? "exit code " + std::to_string(f.exit.code) : why;
  } else {
    if (const auto j = read_result_json(json_path(i))) {
      fill_metrics(row, *j);
      row.status = "ok";
    } else {
      row.status = "failed";
      row.reason = "no readable result JSON (" + json_path(i) + ")";
    }
  }
  // Keep a log only when it says something; drop what a killed child was writing
  // (report::write_atomic's temporary file).
  std::error_code ec;
  if (log.empty()) fs::remove(log_path(i), ec);
  if (f.exit.how != How::NotStarted) {
    std::vector<fs::path> tmp;
    const std::string prefix = support::temp_prefix(points_[i].id + ".json");
    for (const auto& e : fs::directory_iterator(dir_ / "runs", ec))
      if (e.path().filename().string().starts_with(prefix)) tmp.push_back(e.path());
    for (const auto& p : tmp) fs::remove(p, ec);
  }
  return row;
}

void SweepRunner::report_point(size_t i, size_t done, size_t total, double wall_s) {
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

void SweepRunner::write_csv() {
  std::vector<const Row*> rows;
  for (const auto& r : rows_)
    if (r) rows.push_back(&*r);
  report::write_atomic(csv_path_, csv_text(header_, rows));
}

}  // namespace cpsim::app::sweep
