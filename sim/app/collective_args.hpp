#pragma once
/// `cpsim collective`'s command line, nccl-tests style (-b/-e/-f, -d, -o, -n), and its checks:
/// every bad value is a UsageError (exit 2) before anything is simulated.
#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenario/specs.hpp"
#include "schedule/nccl_tuner.hpp"

namespace cpsim::app {

/// Bad command-line input: printed as is, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// At most this many sizes per run (nccl-tests' 8 B..16 GiB x2 is 32).
constexpr size_t kMaxSizes = 64;
/// Largest size: 1 TiB, above any GPU's memory (nccl-tests needs the buffer on the GPU); far
/// larger sizes lose precision in the engines' double-precision clocks (1e20 B took the same
/// time as 1e23 B with SimGrid while the analytic engine scaled).
constexpr double kMaxSizeBytes = 1024.0 * 1024 * 1024 * 1024;

struct CollArgs {
  std::string platform;
  std::vector<std::string> params;
  std::string op_name;
  int ranks = 0;  ///< 0 = every GPU of the platform
  std::string sizes;
  std::string minbytes, maxbytes;
  double stepfactor = 0;  ///< 0 = not given (2)
  std::string engine = "simgrid";
  std::string protocol_name = "auto", algo_name = "auto", redop = "sum", datatype = "float";
  std::string collectives = "auto";
  int channels = 0;
  int iters = 20;
  std::string json;
  // filled by finish_args
  schedule::CollOp op = schedule::CollOp::AllReduce;
  bool sendrecv = false;
  schedule::Protocol protocol = schedule::Protocol::Auto;
  schedule::Algorithm algorithm = schedule::Algorithm::Auto;
  scenario::EngineKind engine_kind = scenario::EngineKind::SimGrid;
  std::vector<double> size_list;
};

void add_collective_options(CLI::App& sub, CollArgs& a);
/// Parses and checks the raw strings into the typed fields; throws UsageError.
void finish_args(CollArgs& a);

/// "4096", "1K", "8G", "64KiB", "1MB": bytes, K = 1024 as in nccl-tests' -b / -e.
double parse_size(const std::string& text, const std::string& flag);
/// "A..B" (x2 steps), "A,B,C"; sizes < 1 byte, above kMaxSizeBytes, or more than kMaxSizes throw.
std::vector<double> parse_sizes(const std::string& s);

/// nccl-tests' per-op conventions.
struct Factors {
  double busbw = 1;      ///< busbw / algbw
  double count_div = 1;  ///< size = count x type x count_div
  double type_bytes = 4;
  std::string redop;     ///< "sum"... or "none"
  int root = -1;
};
Factors op_factors(const CollArgs& a, int n);

}  // namespace cpsim::app
