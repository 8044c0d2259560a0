#include "model/data_parallel.hpp"

#include <algorithm>
#include <limits>

namespace cpsim::model {

double grad_reduce_bytes(const scenario::ParallelSpec& p) { return p.grad_reduce_fp32 ? 4.0 : 2.0; }

double dp_bucket_bytes(const scenario::ParallelSpec& p, int stage) {
  if (p.zero_stage >= 3) return 0;
  // Megatron-LM megatron/core/distributed/distributed_data_parallel.py: bucket_size is None
  // (one bucket) unless overlap_grad_reduce, and None on pipeline ranks > 0.
  if (!p.overlap_grad_reduce || stage > 0) return std::numeric_limits<double>::infinity();
  if (p.dp_bucket_bytes > 0) return p.dp_bucket_bytes;
  // DistributedDataParallelConfig.bucket_size default: max(40000000, 1000000 * dp_size)
  // parameters, "larger DP sizes need larger buckets to ensure collectives do not become
  // latency-bound" (dp_size is the data-parallel world size without CP).
  return std::max(40e6, 1e6 * p.dp) * grad_reduce_bytes(p);
}

bool fsdp_reshards(const scenario::ParallelSpec& p, int layer, int layers) {
  using R = scenario::ParallelSpec::Reshard;
  switch (p.reshard_after_forward) {
    case R::Always: return true;
    case R::Never: return false;
    case R::Default: break;
  }
  // torchtitan apply_fsdp, policy "default": under PP no block reshards ("to avoid
  // per-microbatch all-gathers, which can be expensive and non-overlapped"); else every block
  // but the last ("FSDP would prefetch it immediately").
  if (p.pp > 1) return false;
  return layer < layers - 1;
}

}  // namespace cpsim::model
