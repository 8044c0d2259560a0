#pragma once
/// What an engine returns: when every op of a TaskGraph started and ended.
#include <string>
#include <vector>

namespace cpsim::engine {

struct Trace {
  std::vector<double> start_s;   ///< per op, simulated seconds
  std::vector<double> end_s;
  double makespan_s = 0;
  std::string engine;            ///< "simgrid" or "analytic"
  double wall_s = 0;             ///< host wall time the replay took
  /// bytes carried per link class name (transfers x route), for reports
  std::vector<std::pair<std::string, double>> bytes_per_link_class;
};

}  // namespace cpsim::engine
