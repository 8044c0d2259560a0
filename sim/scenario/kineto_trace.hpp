#pragma once
/// PyTorch profiler (Kineto) Chrome traces read into GPU kernels per rank: the JSON
/// torch.profiler's export_chrome_trace writes (Kineto's ChromeTraceLogger: a top-level
/// "traceEvents" array of complete events, "ph": "X", with "ts" and "dur" in microseconds; GPU
/// work has "cat" "kernel", "gpu_memcpy" or "gpu_memset"; "distributedInfo": {"rank": R} names
/// the rank; "ProfilerStep#N" user annotations bound the steps).
#include <string>
#include <vector>

namespace cpsim::scenario {

struct TraceKernel {
  std::string name;
  double start_us = 0, dur_us = 0;
  int stream = 0;
};

struct KinetoRank {
  std::string file;
  int rank = -1;                          ///< distributedInfo.rank, else the file's position
  std::vector<TraceKernel> kernels;       ///< GPU kernels, memcpys and memsets, by start
  std::vector<std::pair<double, double>> steps;  ///< ProfilerStep#N spans [start, end) in us
};

/// Reads one trace file (a regular file of at most 512 MiB). Throws InputError naming the file
/// (and the JSON position) for a file that is not a Chrome trace, or one with no GPU kernel.
KinetoRank read_kineto_trace(const std::string& path, int default_rank);

}  // namespace cpsim::scenario
