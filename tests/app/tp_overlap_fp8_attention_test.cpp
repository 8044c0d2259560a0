// TP-communication overlap (parallel.tp_comm_overlap, TE userbuffers) and FP8 attention
// (training.fp8_attention, TE's FP8 DPA on cuDNN): what they change in a
// run (exposed TP time, step time, TP and CP bytes, the trace's chunks), the kernel price, and
// the refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/cost_model.hpp"
#include "model/fp8_attention.hpp"
#include "scenario/load.hpp"
#include "schedule/tp_overlap.hpp"
#include "support/cli.hpp"
#include "support/scenario_error.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

// One Llama-3 8B layer pass at 32K on one DGX H100, TP 8 with sequence parallelism.
const char* const kTpSp = R"(name: tp8-sp
platform: dgx-h100
model: llama3-8b
training: {seq_len: 32K, recompute: full, precision: fp8}
parallel: {tp: 8, sequence_parallel: true}
simulation: {engine: analytic, scope: layer}
)";

// Llama-3 8B at 64K, TP 2 x CP 4 ring (zig-zag) on one DGX H100, FP8 GEMMs.
const char* const kCpFp8 = R"(name: cp4-fp8
platform: dgx-h100
model: llama3-8b
training: {seq_len: 64K, recompute: full, precision: fp8}
parallel: {tp: 2, cp: 4, attention: {scheme: ring, layout: zigzag}}
simulation: {engine: analytic, scope: layer}
)";

struct RunOut {
  nlohmann::json j;
  std::string trace;
};

RunOut run(const std::string& yaml, const std::string& tag, const std::string& sets = "") {
  const auto trace = std::filesystem::temp_directory_path() / ("cpsim_tpov_" + tag) / "t.json";
  const auto r = cli::run_yaml(yaml, "tpov_" + tag, sets + " --trace " + trace.string());
  EXPECT_EQ(r.out.rc, 0) << r.out.text;
  return {nlohmann::json::parse(cli::slurp(r.dir / "r.json")), cli::slurp(trace)};
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(TpCommOverlap, HidesTpCommunicationWithTheSameBytes) {
  const RunOut off = run(kTpSp, "off");
  const RunOut on = run(kTpSp, "on", "--set parallel.tp_comm_overlap=true");
  const auto& a = off.j["communication"]["tp"];
  const auto& b = on.j["communication"]["tp"];
  // The serial SP collectives are all exposed; the ring exchange / pipelined chunks hide most.
  EXPECT_GT(a["exposed_s"].get<double>(), 0);
  EXPECT_LT(b["exposed_s"].get<double>(), 0.8 * a["exposed_s"].get<double>());
  EXPECT_LT(on.j["step_time_s"].get<double>(), off.j["step_time_s"].get<double>());
  // Same activations cross the TP group either way.
  EXPECT_NEAR(b["bytes"].get<double>(), a["bytes"].get<double>(), 1e-9 * a["bytes"].get<double>());
  // The trace shows the chunks: tp - 1 ring steps per all-gather, 4 pipelined reduce-scatters,
  // the backward's data and weight gradients apart.
  EXPECT_EQ(count(off.trace, "sp_allgather_ring"), 0u);
  EXPECT_GT(count(on.trace, "sp_allgather_ring"), 0u);
  EXPECT_GT(count(on.trace, "sp_reducescatter_chunk"), 0u);
  EXPECT_GT(count(on.trace, "qkv_proj_bwd_wgrad"), 0u);
  EXPECT_GT(count(on.trace, "mlp_down_bwd_dgrad"), 0u);
  // The GEMM FLOPs are the same, only split.
  EXPECT_NEAR(on.j["tflops_per_gpu"].get<double>() * on.j["step_time_s"].get<double>(),
              off.j["tflops_per_gpu"].get<double>() * off.j["step_time_s"].get<double>(),
              1e-6 * off.j["tflops_per_gpu"].get<double>() * off.j["step_time_s"].get<double>());
}

TEST(TpCommOverlap, InterferenceFollowsTeDefaults) {
  // TE's default userbuffers config: ring_exchange 1 SM, pipeline / bulk 16 SMs of H100's 132.
  const auto sc = scenario::parse_scenario(kTpSp, "s.yaml", {});
  EXPECT_EQ(sc.platform.gpu.sm_count, 132);
  EXPECT_DOUBLE_EQ(schedule::ub_slowdown(sc, schedule::kUbPipelineSms), 132.0 / 116.0);
  EXPECT_DOUBLE_EQ(schedule::ub_slowdown(sc, schedule::kUbRingExchangeSms), 132.0 / 131.0);
}

TEST(TpCommOverlap, RefusedWithoutSequenceParallelOrTp) {
  const std::string base = "platform: dgx-h100\nmodel: llama3-8b\ntraining: {seq_len: 8K}\n";
  const std::string no_tp = test::scenario_error(base + "parallel:\n  tp_comm_overlap: true\n");
  EXPECT_NE(no_tp.find("s.yaml:5:"), std::string::npos) << no_tp;
  EXPECT_NE(no_tp.find("needs parallel.tp > 1 and sequence_parallel: true"), std::string::npos) << no_tp;
  const std::string no_sp = test::scenario_error(
      base + "parallel:\n  tp: 8\n  sequence_parallel: false\n  tp_comm_overlap: true\n");
  EXPECT_NE(no_sp.find("s.yaml:7:"), std::string::npos) << no_sp;
  EXPECT_NE(no_sp.find("--sequence-parallel"), std::string::npos) << no_sp;
  EXPECT_EQ(test::scenario_error(base + "parallel: {tp: 8, tp_comm_overlap: true}\n"), "(no error)");
  EXPECT_NE(test::scenario_error(base + "parallel: {tp: 8, tp_comm_overlap: maybe}\n").find("tp_comm_overlap"),
            std::string::npos);
}

TEST(Fp8Attention, ForwardAtThePublishedCudnnRatioBackwardUnchanged) {
  const auto sc = scenario::parse_scenario(kCpFp8, "s.yaml", {});
  const auto cost = model::CostModel::make(sc.cost, sc.platform.gpu);
  model::AttentionCall call;
  call.q_len = call.kv_len = 16384;
  call.mask = scenario::Mask::Causal;
  call.unmasked_fraction = 0.5;
  call.heads_q = 32;
  call.heads_kv = 8;
  call.head_dim = 128;
  const double bf16 = model::attention_cost(*cost, call, false).time_s;
  EXPECT_DOUBLE_EQ(bf16, cost->attention(call).time_s);
  EXPECT_NEAR(bf16 / model::attention_cost(*cost, call, true).time_s, 1005.0 / 595.0, 1e-12);
  call.backward = true;
  EXPECT_DOUBLE_EQ(model::attention_cost(*cost, call, true).time_s, cost->attention(call).time_s);
}

TEST(Fp8Attention, FasterAttentionAndFp8KvOnTheRing) {
  const RunOut bf16 = run(kCpFp8, "bf16attn");
  const RunOut fp8 = run(kCpFp8, "fp8attn", "--set training.fp8_attention=true");
  const double a0 = bf16.j["attention"]["compute_s"].get<double>();
  const double a1 = fp8.j["attention"]["compute_s"].get<double>();
  // Forward (and its recomputation) at 1.69x, backward unchanged: between the two bounds.
  EXPECT_LT(a1, 0.95 * a0);
  EXPECT_GT(a1, a0 / (1005.0 / 595.0));
  // K,V cross the ring in 1 B, dK,dV as before: less than the BF16 bytes, more than half.
  const double b0 = bf16.j["communication"]["cp"]["bytes"].get<double>();
  const double b1 = fp8.j["communication"]["cp"]["bytes"].get<double>();
  EXPECT_LT(b1, 0.9 * b0);
  EXPECT_GT(b1, 0.5 * b0);
  EXPECT_LT(fp8.j["step_time_s"].get<double>(), bf16.j["step_time_s"].get<double>());
}

TEST(Fp8Attention, NeedsFp8Precision) {
  const std::string e = test::scenario_error(
      "platform: dgx-h100\nmodel: llama3-8b\ntraining:\n  seq_len: 8K\n  fp8_attention: true\n");
  EXPECT_NE(e.find("s.yaml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("needs training.precision: fp8"), std::string::npos) << e;
}

}  // namespace CPSIM_TEST_TU
