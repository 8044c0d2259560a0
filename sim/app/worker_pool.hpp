#pragma once
/// Long-lived worker processes that serve one job after another (process_pool.hpp starts a child
/// per job). For searches whose jobs each build a large graph: a fresh child faults every page
/// of its graph in, and on this project's 2-core VM that was 25-35 % of a `cpsim plan` child's
/// time (perf: clear_page_erms; 0.4-3 GB/s, slowest for memory the host had taken back), while
/// a worker's next job reuses the heap its last one freed. Analytic replays only: SimGrid
/// allows one engine per process, so its runs stay one child each.
#include <functional>
#include <string>
#include <vector>

#include "app/process_pool.hpp"

namespace cpsim::app::pool {

class WorkerPool {
 public:
  /// Up to `workers` worker processes, started from this process when a job first needs one, each
  /// running `serve(request)` for the jobs it is given. A worker sees this process's memory as
  /// it was when it was started: a request must carry whatever may have changed since. Workers
  /// keep the memory their jobs freed (their heap is never returned to the system), and what
  /// every worker keeps or a running job may use adds up to at most `total_bytes` (> 0;
  /// resident bytes, as ChildOutcome limits are): an idle worker gives its memory back when a
  /// job elsewhere needs the room.
  WorkerPool(std::function<std::string(const std::string&)> serve, int workers, double total_bytes);
  /// Ends the workers (they exit when their request pipe closes) and reaps them.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  /// serve(requests[k]) for every k, results in job order, each job failing alone as in
  /// run_each_in_children: an exception's message, or the signal that killed its worker (the
  /// pool starts another for the next job). Job k stops at `limits[k]` resident bytes (0: no
  /// limit) or at what its worker already holds, whichever is more (over_memory; that worker
  /// exits). Jobs start in order, the first waiting one that fits, on the idle worker holding
  /// the most memory; one that fits nowhere runs when no job runs.
  std::vector<ChildOutcome> run(const std::vector<std::string>& requests, const std::vector<double>& limits);

  /// Workers started so far (tests: jobs share workers).
  int starts() const { return starts_; }
  /// Resident bytes each live worker held after its last job (tests).
  std::vector<double> kept_bytes() const;

 private:
  struct Worker {
    long pid = -1;
    int to = -1, from = -1;  ///< request and reply pipes
    double kept = 0;         ///< its resident bytes after its last job or trim
    long job = -1;           ///< the job it runs, -1 when idle
    double hold = 0;         ///< what that job may use
  };
  void start_worker(Worker& w);
  void trim(Worker& w);
  void end(Worker& w);
  double held_by_others(const Worker& w) const;

  std::function<std::string(const std::string&)> serve_;
  int max_workers_;
  double total_;
  int starts_ = 0;
  std::vector<Worker> workers_;
};

}  // namespace cpsim::app::pool
