#pragma once
/// One collective's simulated nccl-tests curve, as `cpsim collective` computes each row: what
/// `cpsim calibrate nccl` fits a platform against.
#include <string>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::app {

struct CurvePoint {
  double bytes = 0;
  double time_s = 0;
  double busbw_GBps = 0;  ///< nccl-tests' bus bandwidth (algbw x the op's factor)
  std::string algo, proto;
  int channels = 0;
};

/// `op` (allreduce, allgather, reducescatter, alltoall, broadcast, reduce, sendrecv) on ranks
/// 0..ranks-1 of `spec`, one replay per size of `sizes` (bytes as nccl-tests reports them), with
/// NCCL's automatic algorithm, protocol and channels and `cpsim collective`'s automatic choice of
/// stepwise or pipelined collectives. Throws UsageError for an unknown op or too many ranks.
std::vector<CurvePoint> simulate_curve(const scenario::PlatformSpec& spec, const std::string& op,
                                       int ranks, const std::vector<double>& sizes,
                                       scenario::EngineKind engine);

}  // namespace cpsim::app
