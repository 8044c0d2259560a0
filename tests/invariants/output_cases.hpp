#pragma once
// The fixed cases of the output properties (outputs_agree_test.cpp, outputs_determinism_test.cpp):
// points of the anchor scenario across scopes, engines and every CP scheme, small enough that
// each runs in well under a second, and the one sweep that holds them all (a zip, so each case
// is one point). The same list every run: a failing property names its case.
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "support/cli.hpp"

namespace cpsim::test::outputs {

inline const std::string kBase = CPSIM_SOURCE_DIR "/scenarios/anchor-128k-ring-zigzag.yaml";

/// The swept keys, in the sweep file's order; every case sets each of them.
inline const std::vector<std::string> kKeys = {"simulation.scope", "simulation.engine", "parallel.attention.scheme",
                                               "parallel.attention.layout", "parallel.attention.ulysses_degree",
                                               "training.seq_len"};

struct Case {
  std::vector<std::string> values;  ///< one per kKeys
  std::string text() const {
    std::string s;
    for (size_t i = 0; i < kKeys.size(); ++i) s += (i ? " " : "") + kKeys[i] + "=" + values[i];
    return s;
  }
  std::string sets() const {
    std::string s;
    for (size_t i = 0; i < kKeys.size(); ++i) s += " --set " + kKeys[i] + "=" + values[i];
    return s;
  }
  const std::string& operator[](const std::string& key) const {
    for (size_t i = 0; i < kKeys.size(); ++i)
      if (kKeys[i] == key) return values[i];
    throw std::out_of_range(key);
  }
};

/// The schedules of sweeps/schedules-x-seqlen.yaml: scheme, layout, Ulysses degree.
inline const std::vector<std::vector<std::string>> kSchedules = {
    {"ring", "zigzag", "0"}, {"ring", "contiguous", "0"}, {"allgather", "zigzag", "0"},
    {"ulysses", "zigzag", "0"}, {"usp", "zigzag", "2"}};

/// A grid (every schedule at 16K and 32K, one attention layer, analytic: what a heatmap draws),
/// then whole steps and layers and the SimGrid engine.
inline std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* seq : {"16K", "32K"})
    for (const auto& s : kSchedules) out.push_back({{"attention-layer", "analytic", s[0], s[1], s[2], seq}});
  out.push_back({{"step", "analytic", "ring", "zigzag", "0", "16K"}});
  out.push_back({{"step", "simgrid", "usp", "zigzag", "2", "16K"}});
  out.push_back({{"layer", "simgrid", "ulysses", "zigzag", "0", "16K"}});
  out.push_back({{"attention-layer", "simgrid", "ring", "contiguous", "0", "32K"}});
  out.push_back({{"attention-layer", "simgrid", "allgather", "zigzag", "0", "16K"}});
  return out;
}

/// The sweep file holding every case as one point (ids 0000, 0001, ... in list order).
inline std::string sweep_yaml(const std::vector<Case>& cs) {
  std::string y = "name: output-cases\nbase: " + kBase + "\nzip:\n";
  for (size_t k = 0; k < kKeys.size(); ++k) {
    y += (k ? "    " : "  - ") + kKeys[k] + ": [";
    for (size_t i = 0; i < cs.size(); ++i) y += (i ? ", " : "") + cs[i].values[k];
    y += "]\n";
  }
  return y;
}

/// The result JSON with its one wall-clock field, simulation.wall_s (how long the simulator
/// itself ran), zeroed; `count` gets how many were zeroed. Every other byte must repeat.
inline std::string json_without_wall_time(const std::string& text, int* count = nullptr) {
  static const std::regex wall(R"("wall_s": ?[-+0-9.eE]+)");
  if (count) *count = static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), wall),
                                                      std::sregex_iterator()));
  return std::regex_replace(text, wall, R"("wall_s": 0)");
}

}  // namespace cpsim::test::outputs
