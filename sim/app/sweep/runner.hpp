#pragma once
/// Runs sweep points locally: each in its own `cpsim run` process (SimGrid allows one engine
/// per process), N at a time (app/process_pool's run_batch), recording each CSV row and result
/// JSON as it finishes.
#include <optional>
#include <string>
#include <vector>

#include "app/process_pool.hpp"
#include "app/sweep/results_csv.hpp"

namespace cpsim::app::sweep {

/// The first line of a child's stderr that says what went wrong.
std::string failure_reason(const std::string& log);

class SweepRunner {
 public:
  /// Points run as `cpsim run` commands on `runner`; `clock` times them (timeouts, ETA).
  SweepRunner(const SweepArgs& a, std::vector<scenario::SweepPoint> points, std::string csv_name,
              pool::Runner& runner, pool::Clock& clock);

  std::string json_path(size_t i) const;
  std::string log_path(size_t i) const;

  /// Keeps the rows of a previous run that succeeded and whose JSON is still there.
  size_t load_previous(const std::vector<size_t>& todo);

  /// Runs the points in `todo` that have no row yet. Returns the process exit code.
  int run(const std::vector<size_t>& todo);

 private:
  pool::Runner::Id spawn(size_t i);
  void remove_stale_temporaries(const std::vector<size_t>& todo) const;
  Row& record(size_t i, const pool::Finished& f);
  void report_point(size_t i, size_t done, size_t total, double wall_s);
  void write_csv();

  const SweepArgs& args_;
  std::vector<scenario::SweepPoint> points_;
  fs::path dir_;
  std::string csv_path_;
  pool::Runner& runner_;
  pool::Clock& clock_;
  std::vector<std::string> swept_, header_;
  std::vector<std::optional<Row>> rows_;
  bool tty_ = false;
};

}  // namespace cpsim::app::sweep
