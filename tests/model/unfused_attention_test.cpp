// The unfused attention path (sim/model/unfused_attention): its kernels as Megatron and PyTorch's
// math SDPA launch them, priced from the GEMM cost and the measured memory rates, and the
// scores it keeps for the backward.
#include "model/unfused_attention.hpp"

#include <gtest/gtest.h>

#include <string>

#include "model/cost_model.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using model::AttentionCall;
using scenario::Stack;

namespace {

scenario::GpuSpec h200() {
  scenario::GpuSpec g{"H200-SXM", 989e12, 795e12, 4.08e12, 141.0 * (1 << 30)};
  g.fp8_peak_flops = 1979e12;
  g.fp8_gemm_flops = 1583e12;
  return g;
}

AttentionCall call(int64_t s, int heads, bool causal, bool backward, int kv_heads = 0) {
  AttentionCall c;
  c.q_len = c.kv_len = s;
  c.mask = causal ? scenario::Mask::Causal : scenario::Mask::Full;
  c.unmasked_fraction = causal ? (static_cast<double>(s) + 1) / (2.0 * static_cast<double>(s)) : 1.0;
  c.heads_q = heads;
  c.heads_kv = kv_heads > 0 ? kv_heads : heads;
  c.head_dim = 128;
  c.backward = backward;
  return c;
}

std::unique_ptr<model::CostModel> unfused(Stack stack, const std::string& profile = "none") {
  scenario::CostSpec spec;
  spec.profile = profile;
  spec.attention_kernel = scenario::AttnImpl::Unfused;
  spec.stack = stack;
  return model::CostModel::make(spec, h200());
}

int gemms(const model::UnfusedPrice& p) {
  int n = 0;
  for (const auto& part : p.parts) n += part.gemm ? 1 : 0;
  return n;
}

}  // namespace

// Forward: Q K^T and P V; backward: dP, dV, dQ, dK. Each GEMM over the whole square.
TEST(UnfusedAttention, TwoGemmsForwardFourBackwardOverTheWholeSquare) {
  const auto m = unfused(Stack::MegatronTe);
  for (const Stack st : {Stack::MegatronTe, Stack::TorchEager}) {
    const auto f = model::unfused_attention_price(*m, h200(), st, call(4096, 32, true, false));
    const auto b = model::unfused_attention_price(*m, h200(), st, call(4096, 32, true, true));
    EXPECT_EQ(gemms(f), 2);
    EXPECT_EQ(gemms(b), 4);
    // 2 GEMMs of 2 x 4096 x 4096 x 128 per head: the causal mask skips nothing.
    EXPECT_DOUBLE_EQ(f.total.flops, 2 * 2.0 * 4096 * 4096 * 128 * 32);
    EXPECT_DOUBLE_EQ(b.total.flops, 2 * f.total.flops);
  }
}

// Causal costs at least as much as full: the GEMMs are the same, the mask only adds kernels.
TEST(UnfusedAttention, CausalNeverCheaperThanFull) {
  const auto m = unfused(Stack::TorchEager);
  for (const bool bwd : {false, true}) {
    const double causal = m->attention(call(8192, 16, true, bwd)).time_s;
    const double full = m->attention(call(8192, 16, false, bwd)).time_s;
    EXPECT_GE(causal, full);
  }
  EXPECT_GT(m->attention(call(8192, 16, true, false)).time_s, m->attention(call(8192, 16, false, false)).time_s);
}

// Megatron's FusedScaleMaskSoftmax kernel takes keys up to 4096; past that it runs the FP32
// torch softmax, whose scores cost more bytes and are kept in FP32 too.
TEST(UnfusedAttention, MegatronFusedSoftmaxUpTo4096KeysThenTorchFp32) {
  EXPECT_EQ(model::unfused_variant(Stack::MegatronTe, call(4096, 32, true, false)),
            model::UnfusedVariant::MegatronFusedSoftmax);
  EXPECT_EQ(model::unfused_variant(Stack::MegatronTe, call(8192, 32, true, false)),
            model::UnfusedVariant::MegatronTorchSoftmax);
  EXPECT_EQ(model::unfused_variant(Stack::TorchEager, call(4096, 32, true, false)),
            model::UnfusedVariant::TorchMathFp32);
  const double fused = model::unfused_saved_bytes(Stack::MegatronTe, call(4096, 32, true, false));
  const double torch = model::unfused_saved_bytes(Stack::MegatronTe, call(8192, 32, true, false));
  // 2 B per score fused, 6 B (FP32 softmax output + its BF16 copy) unfused; scores x4.
  EXPECT_NEAR(torch / fused, 4 * 3.0, 0.01);
}

// PyTorch's math backend upcasts BF16 to FP32: its GEMMs run at the FP32 peak, far slower than
// Megatron's BF16 ones at the same shape.
TEST(UnfusedAttention, MathBackendGemmsRunInFp32) {
  const auto m = unfused(Stack::MegatronTe);
  const auto meg = model::unfused_attention_price(*m, h200(), Stack::MegatronTe, call(4096, 32, false, false));
  const auto math = model::unfused_attention_price(*m, h200(), Stack::TorchEager, call(4096, 32, false, false));
  ASSERT_TRUE(meg.parts.size() > 1 && math.parts.size() > 1);
  double meg_gemm = 0, math_gemm = 0;
  for (const auto& p : meg.parts) meg_gemm += p.gemm ? p.cost.time_s : 0;
  for (const auto& p : math.parts) math_gemm += p.gemm ? p.cost.time_s : 0;
  // Both GEMMs at the FP32 peak x the 795/989 plateau: 67 x 0.80 TFLOP/s.
  EXPECT_NEAR(2 * 2.0 * 4096 * 4096 * 128 * 32 / math_gemm / 1e12, 67 * 795.0 / 989, 0.5);
  EXPECT_GT(math_gemm, 8 * meg_gemm);
  EXPECT_GT(math.total.time_s, 5 * meg.total.time_s);
}

// Memory-bound parts are priced from their bytes at a measured rate, with the source named.
TEST(UnfusedAttention, MemoryPartsPricedFromBytesAtMeasuredRates) {
  const auto m = unfused(Stack::TorchEager);
  const auto p = model::unfused_attention_price(*m, h200(), Stack::TorchEager, call(4096, 32, false, false));
  bool softmax = false;
  for (const auto& part : p.parts) {
    if (part.gemm) {
      EXPECT_NE(part.source.find("tile/wave"), std::string::npos) << part.source;
      continue;
    }
    EXPECT_GT(part.bytes, 0);
    EXPECT_NE(part.source.find("measured"), std::string::npos) << part.source;
    const double gbps = part.bytes / part.cost.time_s / 1e9;
    // Never above the fastest measured class (elementwise add: 4263 GB/s on H200).
    EXPECT_LE(gbps, 4263.0) << part.name;
    if (part.name == "softmax (FP32)") {
      softmax = true;
      EXPECT_DOUBLE_EQ(part.bytes, 8.0 * 32 * 4096 * 4096);
    }
  }
  EXPECT_TRUE(softmax);
  EXPECT_NE(std::string(p.total.origin).find("unfused"), std::string::npos);
}

// Dropout adds its kernels forward and backward; GQA adds the K, V expansion.
TEST(UnfusedAttention, DropoutAndGqaAddKernels) {
  const auto m = unfused(Stack::MegatronTe);
  for (const bool bwd : {false, true}) {
    const auto c = call(4096, 32, true, bwd);
    const double plain = model::unfused_attention_price(*m, h200(), Stack::MegatronTe, c).total.time_s;
    EXPECT_GT(model::unfused_attention_price(*m, h200(), Stack::MegatronTe, c, 0.1).total.time_s, plain);
    EXPECT_GT(model::unfused_attention_price(*m, h200(), Stack::MegatronTe, call(4096, 32, true, bwd, 8)).total.time_s,
              plain);
  }
  EXPECT_THROW(model::unfused_attention_price(*m, h200(), Stack::MegatronTe, call(1024, 8, true, false), 1.0),
               std::invalid_argument);
  // Korthikanti et al.: 5 B per score with dropout, 2 without.
  EXPECT_NEAR(model::unfused_saved_bytes(Stack::MegatronTe, call(4096, 32, true, false), 0.1) /
                  model::unfused_saved_bytes(Stack::MegatronTe, call(4096, 32, true, false)),
              2.5, 1e-9);
}

// The model prices attention as the path, everything else as its inner model; an attention
// profile is refused (it would price a kernel the run never calls).
TEST(UnfusedAttention, CostModelDelegatesAndRefusesAnAttentionProfile) {
  const auto m = unfused(Stack::MegatronTe, "auto");
  const auto plain = model::CostModel::make("auto", h200());
  EXPECT_DOUBLE_EQ(m->gemm(8192, 4096, 4096).time_s, plain->gemm(8192, 4096, 4096).time_s);
  EXPECT_DOUBLE_EQ(m->memory_bound(1e9, model::MemClass::Copy).time_s, plain->memory_bound(1e9, model::MemClass::Copy).time_s);
  EXPECT_NE(m->describe().find("unfused"), std::string::npos);
  EXPECT_THROW(unfused(Stack::MegatronTe, "kernels/profiles/h200-fa2-measured.csv"), std::invalid_argument);
  // Slower than FlashAttention-2 at 8K.
  scenario::CostSpec fa2;
  fa2.attention_kernel = scenario::AttnImpl::Fa2;
  EXPECT_GT(m->attention(call(8192, 32, true, false)).time_s,
            2 * model::CostModel::make(fa2, h200())->attention(call(8192, 32, true, false)).time_s);
}

// The memory term: only with the unfused kernel, s^2 in the sequence, recomputation keeping
// one layer's worth.
TEST(UnfusedAttention, ScoresTermScalesWithTheSquareOfTheSequence) {
  scenario::Scenario sc;
  sc.model.heads_q = sc.model.heads_kv = 32;
  sc.model.head_dim = 128;
  sc.training.seq_len = 4096;
  sc.training.recompute = scenario::Recompute::None;
  sc.cost.stack = Stack::MegatronTe;
  EXPECT_EQ(model::unfused_scores_stage_bytes(sc, 32, 1), 0);  // a fused kernel keeps no scores
  sc.cost.attention_kernel = scenario::AttnImpl::Unfused;
  const double s4 = model::unfused_scores_stage_bytes(sc, 32, 1);
  EXPECT_NEAR(s4, 32 * 2.0 * 32 * 4096.0 * 4096, 1);  // 32 layers x 2 B x heads x s^2
  sc.training.seq_len = 2048;
  EXPECT_NEAR(model::unfused_scores_stage_bytes(sc, 32, 1), s4 / 4, 1);
  sc.training.recompute = scenario::Recompute::Selective;
  EXPECT_NEAR(model::unfused_scores_stage_bytes(sc, 32, 1), s4 / 4 / 32, 1);
}

}  // namespace CPSIM_TEST_TU

namespace CPSIM_TEST_TU {
using namespace cpsim;
using scenario::Stack;

// torch.compile fuses the scale-mask-softmax(-dropout) chain between the two GEMMs into one
// Inductor kernel each way: one BF16 read and one write of the scores forward (4 B per score,
// 5 B with the dropout mask), dP and P in and dS out backward (6 B), with BF16 GEMMs. Eager
// PyTorch (the math backend) runs the chain as several FP32 kernels; the compiled path costs
// far less and keeps 2 B per score for the backward, not 4.
TEST(UnfusedAttention, TorchCompileRunsTheSoftmaxChainAsOneKernel) {
  const auto m = unfused(Stack::TorchCompile);
  EXPECT_EQ(model::unfused_variant(Stack::TorchCompile, call(8192, 32, true, false)),
            model::UnfusedVariant::InductorFusedSoftmax);
  const double n = 32.0 * 8192 * 8192;
  for (const bool bwd : {false, true}) {
    for (const double p : {0.0, 0.1}) {
      const auto c = call(8192, 32, true, bwd);
      const auto compiled = model::unfused_attention_price(*m, h200(), Stack::TorchCompile, c, p);
      const auto eager = model::unfused_attention_price(*m, h200(), Stack::TorchEager, c, p);
      int over_scores = 0;
      double bytes = 0;
      for (const auto& part : compiled.parts) {
        if (part.gemm || part.bytes < n) continue;
        ++over_scores;
        bytes = part.bytes;
        EXPECT_NE(part.name.find("triton"), std::string::npos) << part.name;
      }
      EXPECT_EQ(over_scores, 1) << "one kernel over the scores, bwd " << bwd << " p " << p;
      EXPECT_DOUBLE_EQ(bytes, n * (bwd ? (p > 0 ? 7 : 6) : (p > 0 ? 5 : 4)));
      EXPECT_EQ(gemms(compiled), bwd ? 4 : 2);
      EXPECT_LT(compiled.total.time_s, 0.5 * eager.total.time_s);
      EXPECT_NE(std::string(compiled.total.origin).find("Inductor"), std::string::npos);
    }
  }
  EXPECT_DOUBLE_EQ(model::unfused_saved_bytes(Stack::TorchCompile, call(8192, 32, true, false)), 2 * n);
  // The cost model the scenario builds prices the same.
  EXPECT_DOUBLE_EQ(m->attention(call(8192, 32, true, false)).time_s,
                   model::unfused_attention_price(*m, h200(), Stack::TorchCompile, call(8192, 32, true, false))
                       .total.time_s);
}
}  // namespace CPSIM_TEST_TU
