#pragma once
/// A profiled step and its simulation as one Chrome trace on one time axis: each profiled rank
/// gets a "measured" process (a thread per CUDA stream, the profiler's kernels with the window's
/// start at 0) beside a "simulated" process (cpsim's own trace of that rank, from 0). Perfetto
/// shows both at once; tools/cpsim_plot.py measured draws it. Every event's "cat" is the same
/// kernel class on both sides (attention, gemm, memory, collective, p2p; cpsim's overhead too).
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace cpsim::app {

struct MeasuredKernel {
  std::string name, kernel_class;
  double start_us = 0, dur_us = 0;  ///< start since the window's start
  int stream = 0;
};

struct MeasuredRank {
  int rank = 0;
  std::string file, window;
  double window_us = 0;  ///< the profiled step's length
  std::vector<MeasuredKernel> kernels;
};

/// The merged trace. `simulated` is a trace as `cpsim run --trace` writes it (process_name
/// "GPU r" per rank); ranks the simulation does not have get a measured process only, and the
/// trace's otherData says which.
/// Each process also gets a "step" thread with one event (cat "step") spanning its step: the
/// profiled window, or the simulated `step_us`.
nlohmann::json compare_timeline(const std::vector<MeasuredRank>& measured, const nlohmann::json& simulated,
                                double step_us, const std::string& scenario);

}  // namespace cpsim::app
