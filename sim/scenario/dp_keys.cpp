// Data-parallel keys of `parallel` -> ParallelSpec, and their cross-checks.
#include "scenario/dp_keys.hpp"

#include <string>

namespace cpsim::scenario::detail {
namespace {
const Node* dp_key(const Node& map, const char* key) {
  for (const auto& c : map.children)
    if (c.key == key) return &c;
  return nullptr;
}
}  // namespace

void read_dp_parallel(const MapReader& r, ParallelSpec& p) {
  if (const Node* v = r.get("dp_bucket")) {
    if (v->is_scalar() && v->scalar == "auto") {
      p.dp_bucket_bytes = 0;
    } else {
      p.dp_bucket_bytes = as_bytes(*v);
      check_min(*v, p.dp_bucket_bytes, 0, false);
    }
  }
  if (const Node* v = r.get("overlap_grad_reduce")) p.overlap_grad_reduce = as_bool(*v);
  if (const Node* v = r.get("overlap_param_gather")) p.overlap_param_gather = as_bool(*v);
  if (const Node* v = r.get("align_param_gather")) p.align_param_gather = as_bool(*v);
  if (const Node* v = r.get("grad_reduce_dtype")) p.grad_reduce_fp32 = as_choice(*v, {"fp32", "bf16"}) == 0;
  if (const Node* v = r.get("reshard_after_forward"))
    p.reshard_after_forward =
        static_cast<ParallelSpec::Reshard>(as_choice(*v, {"default", "always", "never"}));
  if (const Node* v = r.get("dp_replicate")) p.dp_replicate = static_cast<int>(as_int(*v, 1, 1'000'000));
}

void check_dp(const ParallelSpec& p, const Node& par) {
  // Megatron's arguments.py: --overlap-param-gather needs --use-distributed-optimizer and
  // --overlap-grad-reduce; --align-param-gather only changes when the overlapped gathers start.
  if (const Node* v = dp_key(par, "overlap_param_gather"); v && p.overlap_param_gather) {
    if (p.zero_stage < 1 || p.zero_stage > 2)
      fail_at(*v, "true needs parallel.zero_stage 1 or 2 (Megatron's distributed optimizer), got " +
                      std::to_string(p.zero_stage) +
                      (p.zero_stage == 3 ? " (FSDP gathers each block before its forward by itself)" : ""));
    if (!p.overlap_grad_reduce)
      fail_at(*v, "true needs parallel.overlap_grad_reduce: true (Megatron requires --overlap-grad-reduce "
                  "for --overlap-param-gather)");
  }
  if (const Node* v = dp_key(par, "align_param_gather"); v && p.align_param_gather && !p.overlap_param_gather)
    fail_at(*v, "true needs parallel.overlap_param_gather: true (it sets when the overlapped gathers start)");
  if (const Node* v = dp_key(par, "overlap_grad_reduce"); v && p.overlap_grad_reduce && p.zero_stage == 3)
    fail_at(*v, "applies to zero_stage 0-2 (Megatron's DDP); FSDP (zero_stage 3) reduce-scatters each "
                "block's gradients as its backward ends by itself");
  if (const Node* v = dp_key(par, "reshard_after_forward");
      v && p.zero_stage != 3 && p.reshard_after_forward != ParallelSpec::Reshard::Default)
    fail_at(*v, "applies to FSDP (zero_stage 3), got zero_stage " + std::to_string(p.zero_stage));
  // HSDP is FSDP2 over a (replicate, shard) mesh: torchtitan's ParallelDims requires
  // dp_replicate x dp_shard = the data-parallel degree.
  if (const Node* v = dp_key(par, "dp_replicate"); v && p.dp_replicate > 1) {
    if (p.zero_stage != 3)
      fail_at(*v, "applies to FSDP (zero_stage 3: HSDP replicates FSDP's shard groups), got zero_stage " +
                      std::to_string(p.zero_stage));
    if (p.dp % p.dp_replicate != 0)
      fail_at(*v, "expected a divisor of parallel.dp (" + std::to_string(p.dp) + ": dp_replicate x shard degree), got " +
                      std::to_string(p.dp_replicate));
    if (p.ep > 1)
      fail_at(*v, "expected 1 with expert parallelism (ep " + std::to_string(p.ep) +
                      "): HSDP of expert weights is not modelled");
  }
}

}  // namespace cpsim::scenario::detail
