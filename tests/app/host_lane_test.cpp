// The host lane end to end: under each training.stack a layer pass issues its framework ops on
// the rank's host thread (model/host_ops.hpp), the attention kernel waits for their issue, and
// the engine decides how much shows in the step: hidden behind a large model's kernels,
// exposed when a small model's kernels are shorter than the host time to issue them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

// Llama 3.2 1B's shape (hidden 2048, 16 layers, 32/8 heads of 64, FFN 8192) at 128 tokens per
// micro-batch: each layer's kernels are shorter than the host time to issue them.
const char* const kSmall = R"(name: small-host-bound
platform: dgx-h100
model: {name: llama3.2-1b, layers: 16, hidden: 2048, heads_q: 32, heads_kv: 8, head_dim: 64,
        ffn_hidden: 8192, vocab: 128256, tied_embeddings: true}
training: {seq_len: 128, micro_batch: 1, micro_batches: 1, recompute: none}
parallel: {tp: 1, cp: 1, dp: 8}
simulation: {engine: analytic, scope: step}
)";

// The same small shape with Gated DeltaNet layers only: no softmax attention kernel at all, so
// the host's ops show only where the GDN mixer, the MLP, the LM head and the optimizer wait.
const char* const kSmallGdn = R"(name: small-gdn-host-bound
platform: dgx-h100
model: {name: gdn-1b, layers: 16, hidden: 2048, heads_q: 16, heads_kv: 16, head_dim: 128,
        ffn_hidden: 8192, vocab: 128256, tied_embeddings: true, pattern: [linear],
        linear_attention: {heads_v: 16, heads_k: 16, key_dim: 128, value_dim: 128, conv_width: 4}}
training: {seq_len: 128, micro_batch: 1, micro_batches: 1, recompute: none}
parallel: {tp: 1, cp: 1, dp: 8}
simulation: {engine: analytic, scope: step}
)";

// A small MoE model (Qwen3-30B-A3B's block at 8 layers, 64 experts, all local, 128 tokens).
const char* const kSmallMoe = R"(name: small-moe-host-bound
platform: dgx-h100
model: {name: moe-small, layers: 8, hidden: 2048, heads_q: 32, heads_kv: 4, head_dim: 128,
        ffn_hidden: 6144, vocab: 151936, tied_embeddings: false,
        moe: {experts: 64, top_k: 8, expert_ffn_hidden: 768}}
training: {seq_len: 128, micro_batch: 1, micro_batches: 1, recompute: none}
parallel: {tp: 1, cp: 1, dp: 8, ep: 1}
simulation: {engine: analytic, scope: step}
)";

const char* const kLarge = R"(name: large-gpu-bound
platform: dgx-h100
model: llama3-8b
training: {seq_len: 8K, micro_batch: 1, micro_batches: 1, recompute: none}
parallel: {tp: 1, cp: 1, dp: 8}
simulation: {engine: analytic, scope: step}
)";

nlohmann::json run_json(const char* yaml, const std::string& tag, const std::string& sets = "") {
  const auto r = cli::run_yaml(yaml, "host_lane_" + tag, sets);
  EXPECT_EQ(r.out.rc, 0) << r.out.text;
  return nlohmann::json::parse(cli::slurp(r.dir / "r.json"));
}

double overhead(const nlohmann::json& j) {
  return j["time_by_category_s"].contains("overhead") ? j["time_by_category_s"]["overhead"].get<double>() : 0.0;
}
double step(const nlohmann::json& j) { return j["step_time_s"].get<double>(); }

}  // namespace

// The stack decides the host ops: torch.compile issues the least host time (few fused kernels,
// each launched cheaply); Megatron-TE's module calls (a TE module's backward costs 6-8 eager
// ops) the most, eager's one op per ATen kernel in between.
TEST(HostLane, StackDecidesTheHostOps) {
  const auto eager = run_json(kLarge, "l_eager", "--set training.stack=torch-eager");
  const auto te = run_json(kLarge, "l_te", "--set training.stack=megatron-te");
  const auto compiled = run_json(kLarge, "l_compile", "--set training.stack=torch-compile");
  EXPECT_GT(overhead(eager), 3 * overhead(compiled));
  EXPECT_GT(overhead(te), 1.2 * overhead(eager));
  // Llama-3 8B at 8K: the kernels outlast the host: its time is hidden, the step barely moves
  // with the host's speed.
  const auto slow = run_json(kLarge, "l_slow", "--set training.stack=torch-eager --set platform.runtime.host_op=20us");
  EXPECT_GT(overhead(slow), 1.8 * overhead(eager));
  EXPECT_LT(step(slow), 1.01 * step(eager));
}

// A 1B model at 128 tokens per micro-batch: the host falls behind the kernels under eager and
// Megatron-TE (whose TE module calls cost more than eager ops), and the step is longer than with
// CUDA graphs, which remove the per-op host time; torch.compile's few, cheap launches stay hidden.
TEST(HostLane, SmallModelExposesTheHostUnderEager) {
  const auto eager = run_json(kSmall, "s_eager", "--set training.stack=torch-eager");
  const auto graphs = run_json(kSmall, "s_graphs", "--set training.stack=torch-eager --set platform.runtime.graphs=true");
  const auto te = run_json(kSmall, "s_te", "--set training.stack=megatron-te");
  const auto te_graphs = run_json(kSmall, "s_te_graphs", "--set training.stack=megatron-te --set platform.runtime.graphs=true");
  const auto compiled = run_json(kSmall, "s_compile", "--set training.stack=torch-compile");
  const auto compiled_graphs =
      run_json(kSmall, "s_compile_graphs", "--set training.stack=torch-compile --set platform.runtime.graphs=true");
  EXPECT_GT(step(eager), 1.03 * step(graphs));
  EXPECT_GT(step(te), 1.05 * step(te_graphs));
  EXPECT_LT(step(compiled), 1.005 * step(compiled_graphs));
}

// Linear-attention layers issue host ops too (FLA's chunk kernels launched from Python, the
// projections, the MLP): a GDN-only small model's host falls behind its kernels, and CUDA graphs
// shorten its step.
TEST(HostLane, GdnOnlySmallModelExposesTheHost) {
  const auto eager = run_json(kSmallGdn, "g_eager", "--set training.stack=torch-eager");
  const auto graphs = run_json(kSmallGdn, "g_graphs", "--set training.stack=torch-eager --set platform.runtime.graphs=true");
  EXPECT_GT(overhead(eager), overhead(graphs) + 1e-3);
  EXPECT_GT(step(eager), 1.03 * step(graphs));
}

// A MoE layer's router, permutes and expert launches beyond the dense MLP (GroupedLinear's
// cuBLAS launch per expert under Megatron-TE) and the optimizer's multi_tensor_apply launches
// over its many expert weights: a slower host shows in the small MoE model's step.
TEST(HostLane, MoeSmallModelHostOps) {
  const auto te = run_json(kSmallMoe, "m_te", "--set training.stack=megatron-te");
  const auto slow = run_json(kSmallMoe, "m_slow", "--set training.stack=megatron-te --set platform.runtime.host_op=40us");
  const auto graphs = run_json(kSmallMoe, "m_graphs", "--set training.stack=megatron-te --set platform.runtime.graphs=true");
  EXPECT_GE(step(te), step(graphs));
  EXPECT_GT(step(slow), 1.08 * step(te));
}

// "compute by layer type" is GPU time: the host lane's ops are not in it, so a run with CUDA
// graphs (no host ops) reports the same per-layer-kind compute as one with eager host ops.
TEST(HostLane, ComputeByLayerKindLeavesTheHostOut) {
  const auto eager = run_json(kLarge, "k_eager", "--set training.stack=torch-eager");
  const auto graphs = run_json(kLarge, "k_graphs", "--set training.stack=torch-eager --set platform.runtime.graphs=true");
  EXPECT_GT(overhead(eager), 0.01);
  EXPECT_NEAR(eager["compute_by_layer_kind_s"]["full-attention"].get<double>(),
              graphs["compute_by_layer_kind_s"]["full-attention"].get<double>(), 1e-9);
}

// A platform that names ops_per_attention keeps the per-call count it names (that many eager
// ops and a launch before each attention kernel) and no layer host ops: the stack no longer
// decides, so every stack pays the same.
TEST(HostLane, NamedOpsPerAttentionOverridesTheStack) {
  const std::string named = " --set platform.runtime.ops_per_attention=8";
  const auto eager = run_json(kLarge, "n_eager", "--set training.stack=torch-eager" + named);
  const auto te = run_json(kLarge, "n_te", "--set training.stack=megatron-te" + named);
  const auto stack = run_json(kLarge, "n_stack", "--set training.stack=torch-eager");
  EXPECT_DOUBLE_EQ(overhead(eager), overhead(te));
  EXPECT_LT(overhead(eager), 0.5 * overhead(stack));
}

}  // namespace CPSIM_TEST_TU
