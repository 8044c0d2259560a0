#pragma once
/// Sweep files: a base scenario and the keys to vary.
///   name: cp-scaling                 # optional (default: file stem)
///   base: anchor-128k.yaml           # relative to the sweep file
///   axes:                            # cartesian product, first axis varies slowest
///     parallel.cp: [2, 4, 8]
///     parallel.attention.scheme: [ring, allgather]
///   zip:                             # optional: each mapping's lists vary together
///     - {training.seq_len: [32K, 128K], parallel.cp: [2, 8]}
/// Errors follow the InputError contract of load.hpp. Each value is checked against the base
/// scenario on its own (keys, types, units); checks that relate several keys (GPU count,
/// divisibility) are left to each point, since a sweep may legitimately hold infeasible points.
#include <string>
#include <utility>
#include <vector>

namespace cpsim::scenario {

/// One scenario of a sweep: load it with load_scenario(base_path, overrides).
struct SweepPoint {
  std::string id;                                            ///< "0007": index, zero-padded
  std::string base_path;                                     ///< the base scenario file
  std::vector<std::string> overrides;                        ///< "key.path=value"
  std::vector<std::pair<std::string, std::string>> values;   ///< (key.path, value as YAML)
};

struct Sweep {
  std::string name;                ///< `name:` or the sweep file's stem
  std::string file;
  std::vector<SweepPoint> points;  ///< in expansion order
};

/// The most points one sweep may expand to.
constexpr size_t kMaxSweepPoints = 1'000'000;

Sweep load_sweep_file(const std::string& path);
std::vector<SweepPoint> load_sweep(const std::string& path);

}  // namespace cpsim::scenario
