#pragma once
/// What an engine returns and the report reads: when every op of a TaskGraph started and ended.
/// A product of the pipeline, beside the graph it times, so that the report stage reads it
/// without linking an engine (and SimGrid).
#include <string>
#include <vector>

namespace cpsim::schedule {

/// Per-op times.
using TimeArray = std::vector<double>;

struct Trace {
  TimeArray start_s;   ///< per op, simulated seconds
  TimeArray end_s;
  double makespan_s = 0;
  std::string engine;            ///< "simgrid" or "analytic"
  double wall_s = 0;             ///< host wall time the replay took
};

}  // namespace cpsim::schedule
