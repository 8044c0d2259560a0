// Fuzz target: scenario text through scenario::parse_scenario, with `#set key=value` comment
// lines as --set overrides; then what the model stage computes from an accepted scenario
// without SimGrid (cost model, memory estimate), which must be finite.
#include <algorithm>
#include <cmath>
#include <string>

#include "harness.hpp"
#include "model/cost_model.hpp"
#include "model/stack_kernels.hpp"
#include "model/transformer.hpp"

namespace {

using namespace cpsim;

bool finite_cost(const model::Cost& c) { return std::isfinite(c.time_s) && c.time_s >= 0 && std::isfinite(c.flops); }

void exercise_model(const scenario::Scenario& sc) {
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto cost = model::CostModel::make(sc.cost.profile, sc.platform.gpu);
  const int64_t local = sc.training.seq_len / p.cp;
  for (const bool bwd : {false, true}) {
    model::AttentionCall call;
    call.q_len = local;
    call.kv_len = local;
    call.mask = scenario::Mask::Causal;
    call.unmasked_fraction = 0.5;
    call.heads_q = std::max(1, m.heads_q / p.tp);
    call.heads_kv = std::max(1, m.heads_kv / p.tp);
    call.head_dim = m.head_dim;
    call.batch = sc.training.micro_batch;
    call.backward = bwd;
    fuzz::check(finite_cost(cost->attention(call)), "scenario", "attention cost is not finite");
    if (m.linear_heads_v > 0)
      fuzz::check(finite_cost(cost->linear_attention(local, m.linear_heads_v, m.linear_key_dim,
                                                     m.linear_value_dim, 64, bwd)),
                  "scenario", "linear attention cost is not finite");
  }
  const double tokens = static_cast<double>(local) * sc.training.micro_batch;
  fuzz::check(finite_cost(cost->gemm(tokens, m.hidden, m.ffn_hidden / double(p.tp))), "scenario",
              "GEMM cost is not finite");
  fuzz::check(finite_cost(cost->memory_bound(tokens * m.hidden * 2, model::MemClass::Copy)), "scenario",
              "memory-bound cost is not finite");
  const model::MemoryEstimate mem = model::estimate_memory(sc);
  fuzz::check(std::isfinite(mem.peak_bytes), "scenario", "peak memory is not finite");
  cost->describe();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto overrides = fuzz::directive_lines(text, "#set ");
  fuzz::guarded("scenario", [&] {
    exercise_model(scenario::parse_scenario(text, fuzz::work_dir() + "/fuzz.yaml", overrides));
  });
  return 0;
}
