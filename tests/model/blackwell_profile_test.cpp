// The bundled Blackwell attention profiles (kernels/profiles/{gb200,b200}-*-published.csv,
// written by make_blackwell_published.py from NVIDIA's cuDNN frontend SDPA benchmark): every
// head dim the figures cover is priced from them, not the tile model, and every shape they do
// not cover says so.
#include "model/cost_model.hpp"
#include "model/fp8_attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "log/log.hpp"
#include "scenario/specs.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using model::AttentionCall;
using model::CostModel;
using model::CostSource;

namespace {

// platforms/gpus.yaml's B200 and GB200.
scenario::GpuSpec b200() {
  return {"B200", 2250e12, 1745e12, 7.04e12, 180.0 * (1 << 30), 148, scenario::GpuArch::Blackwell, 4500e12, 3490e12};
}
scenario::GpuSpec gb200() {
  scenario::GpuSpec g = b200();
  g.name = "GB200";
  g.peak_flops = 2500e12;
  g.gemm_flops = 1822e12;
  return g;
}

std::unique_ptr<CostModel> model_for(const scenario::GpuSpec& g, scenario::AttnImpl impl) {
  scenario::CostSpec spec;
  spec.attention_kernel = impl;
  return CostModel::make(spec, g);
}

/// A call as the benchmark ran it, batch folded into heads as the profile rows fold it.
AttentionCall call(int64_t s, int heads_q, int heads_kv, int d, bool causal, bool bwd) {
  AttentionCall c;
  c.q_len = c.kv_len = s;
  c.mask = causal ? scenario::Mask::Causal : scenario::Mask::Full;
  c.unmasked_fraction = causal ? static_cast<double>(s + 1) / (2.0 * s) : 1.0;
  c.heads_q = heads_q;
  c.heads_kv = heads_kv;
  c.head_dim = d;
  c.backward = bwd;
  return c;
}

/// TFLOP/s as the benchmark counts them: causal exactly half.
double bench_tflops(const model::Cost& c, const AttentionCall& a) {
  const double f = 4.0 * a.q_len * a.kv_len * a.heads_q * a.head_dim *
                   (a.mask == scenario::Mask::Causal ? 0.5 : 1.0) * (a.backward ? 2.5 : 1.0);
  return f / c.time_s / 1e12;
}

std::string origin(const model::Cost& c) { return c.origin ? c.origin : ""; }

}  // namespace

// GB200 cuDNN at the published shapes: the figure itself (Llama-3.1 d128, DeepSeek-V3 MLA at
// the mean head dim 160, Qwen3.5 d256 forward), marked published, from the GB200 file (not
// B200's, whose name GB200's contains).
TEST(BlackwellProfiles, Gb200CudnnPricesEveryPublishedHeadDimFromItsFigure) {
  const auto m = model_for(gb200(), scenario::AttnImpl::Auto);  // auto on Blackwell: cuDNN
  struct Figure {
    int heads_q, heads_kv, d;
    bool causal, bwd;
    int64_t s;
    double tflops;
  };
  // cudnn-frontend results/{llama3.1,dsv3,qwen35}/gb200 (batch 2 x 64 / 128 heads; qwen35 batch 1).
  const Figure figures[] = {
      {128, 16, 128, false, false, 8192, 1771}, {128, 16, 128, true, true, 16384, 1328},
      {128, 16, 128, true, false, 2048, 1097},  {256, 256, 160, true, false, 32768, 1743},
      {256, 256, 160, false, true, 8192, 1125}, {32, 2, 256, true, false, 16384, 1804},
  };
  for (const Figure& f : figures) {
    const AttentionCall a = call(f.s, f.heads_q, f.heads_kv, f.d, f.causal, f.bwd);
    const model::Cost c = m->attention(a);
    EXPECT_EQ(c.source, CostSource::Published) << f.d << " " << f.s;
    EXPECT_FALSE(c.extrapolated);
    EXPECT_EQ(origin(c), "gb200-cudnn-published.csv");
    EXPECT_NEAR(bench_tflops(c, a), f.tflops, 0.01 * f.tflops) << f.d << " " << f.s;
  }
  // Between the rows and at other head counts (a scenario's shapes): still the curves, not the
  // tile model.
  for (const int d : {128, 160})
    for (const bool bwd : {false, true}) {
      const model::Cost c = m->attention(call(6144, 32, 8, d, true, bwd));
      EXPECT_NE(c.source, CostSource::Roofline) << d;
      EXPECT_FALSE(c.extrapolated) << d;
    }
}

// B200 cuDNN: its own published figure where there is one (d128 causal, cuDNN 9.13), else the
// GB200 curves at the ratio of the dense BF16 peaks (2250 / 2500), derived.
TEST(BlackwellProfiles, B200CudnnOwnFigureElseGb200ScaledByThePeaks) {
  const auto b = model_for(b200(), scenario::AttnImpl::Cudnn);
  const auto g = model_for(gb200(), scenario::AttnImpl::Cudnn);
  const AttentionCall own = call(16384, 128, 8, 128, true, false);
  const model::Cost c = b->attention(own);
  EXPECT_EQ(c.source, CostSource::Published);
  EXPECT_EQ(origin(c), "b200-cudnn-published.csv");
  EXPECT_NEAR(bench_tflops(c, own), 1332.415, 0.5);
  for (const int d : {128, 160})
    for (const bool bwd : {false, true}) {
      const AttentionCall a = call(16384, 128, 16, d, false, bwd);
      const model::Cost cb = b->attention(a), cg = g->attention(a);
      EXPECT_EQ(cb.source, CostSource::Derived) << d;
      EXPECT_EQ(origin(cb), "b200-cudnn-published.csv");
      EXPECT_NEAR(cb.time_s / cg.time_s, 2500.0 / 2250.0, 1e-3) << d;
    }
}

// FlashAttention-2 on B200: flash_attn 2.7.4's published rates (about 20 % of peak), not the
// tile model's Ampere fraction.
TEST(BlackwellProfiles, B200Fa2PricedFromItsPublishedFigure) {
  const auto m = model_for(b200(), scenario::AttnImpl::Fa2);
  const AttentionCall f = call(8192, 128, 8, 128, true, false);
  const model::Cost c = m->attention(f);
  EXPECT_EQ(c.source, CostSource::Published);
  EXPECT_EQ(origin(c), "b200-fa2-published.csv");
  EXPECT_NEAR(bench_tflops(c, f), 399.925, 0.5);
}

// Outside the FA2 profile (GB200 has none; B200 with `--profile none`) the tile model runs FA2
// at flash_attn 2.7.4's Blackwell share of peak (its sm80 kernels: 443.7 / 348.3 TFLOP/s of
// B200's 2250 at 128K), not its A100 share: within 10 % of the published 16K figures, and
// GB200 at the same share of its own peak.
TEST(BlackwellProfiles, Fa2TileModelRunsAtItsBlackwellShare) {
  scenario::CostSpec none;
  none.attention_kernel = scenario::AttnImpl::Fa2;
  none.profile = "none";
  const auto b = CostModel::make(none, b200());
  const auto g = CostModel::make(none, gb200());
  for (const bool bwd : {false, true}) {
    const AttentionCall a = call(16384, 128, 8, 128, true, bwd);
    const model::Cost c = b->attention(a);
    EXPECT_EQ(c.source, CostSource::Roofline);
    EXPECT_NEAR(bench_tflops(c, a), bwd ? 336.635 : 425.128, 0.10 * (bwd ? 336.635 : 425.128)) << bwd;
    EXPECT_NEAR(bench_tflops(g->attention(a), a) / bench_tflops(c, a), 2500.0 / 2250.0, 0.02) << bwd;
  }
}

// FP8 attention on GB200 runs at the FP8/BF16 ratio of the profile's own FP8 rows (cuDNN 9.22:
// Llama-3.1 d128 causal 16K backward 1632 vs 1328 TFLOP/s, MLA full 8K forward 2582 vs 1759),
// and says so; where no FP8 row covers the shape (d256) and on a GPU without FP8 rows (H100),
// H100's published ratio (1.69 forward, 1.0 backward), and the origin says that instead.
TEST(BlackwellProfiles, Fp8AttentionRatioFromTheGpusOwnFp8Rows) {
  const auto g = model_for(gb200(), scenario::AttnImpl::Cudnn);
  struct Figure {
    int heads_q, heads_kv, d;
    bool causal, bwd;
    double bf16, fp8;
  };
  for (const Figure f : {Figure{128, 16, 128, true, true, 1328, 1632}, Figure{256, 256, 160, false, false, 1759, 2582}}) {
    const AttentionCall a = call(f.causal ? 16384 : 8192, f.heads_q, f.heads_kv, f.d, f.causal, f.bwd);
    const model::Cost c = model::attention_cost(*g, a, true);
    EXPECT_NEAR(bench_tflops(c, a), f.fp8, 0.01 * f.fp8) << f.d;
    EXPECT_NE(origin(c).find("gb200-cudnn-published.csv's FP8 and BF16 rows"), std::string::npos) << origin(c);
    // The BF16 price is the BF16 rows', untouched by the FP8 rows of the same shape.
    EXPECT_NEAR(bench_tflops(g->attention(a), a), f.bf16, 0.01 * f.bf16) << f.d;
  }
  const AttentionCall d256 = call(16384, 32, 2, 256, true, false);
  const model::Cost r = model::attention_cost(*g, d256, true);
  EXPECT_NEAR(g->attention(d256).time_s / r.time_s, 1005.0 / 595.0, 1e-9);
  EXPECT_STREQ(r.origin, model::kFp8RuleOrigin);
}

// Without an MLA profile the tile model runs MLA's backward (192/128, head dim 160) below the
// d128 backward, as cuDNN 9.22 does on GB200 (1088-1147 TFLOP/s at 16K against d128's
// 1328-1374), though its forward runs above d128's: within 10 % of the 16K figures.
TEST(BlackwellProfiles, MlaBackwardTileModelBelowD128Backward) {
  scenario::CostSpec none;
  none.attention_kernel = scenario::AttnImpl::Cudnn;
  none.profile = "none";
  const auto g = CostModel::make(none, gb200());
  for (const bool causal : {false, true}) {
    const AttentionCall mla = call(16384, 256, 256, 160, causal, true), d128 = call(16384, 128, 16, 128, causal, true);
    const double r = bench_tflops(g->attention(mla), mla);
    EXPECT_NEAR(r, causal ? 1134 : 1088, 0.10 * (causal ? 1134 : 1088)) << causal;
    EXPECT_LT(r, bench_tflops(g->attention(d128), d128)) << causal;
    AttentionCall fwd = mla, fwd128 = d128;
    fwd.backward = fwd128.backward = false;
    EXPECT_GT(bench_tflops(g->attention(fwd), fwd), bench_tflops(g->attention(fwd128), fwd128)) << causal;
  }
}

// What no Blackwell figure covers (d64; d256 backward) is the tile model, and the cost says
// there was no row.
TEST(BlackwellProfiles, ShapesWithoutAFigureSaySo) {
  const auto m = model_for(gb200(), scenario::AttnImpl::Cudnn);
  for (const AttentionCall& a : {call(8192, 32, 32, 64, true, false), call(8192, 32, 32, 256, true, true)}) {
    const model::Cost c = m->attention(a);
    EXPECT_TRUE(c.extrapolated) << a.head_dim;
    EXPECT_EQ(c.source, CostSource::Roofline);
    EXPECT_NE(origin(c).find("no measured or published row"), std::string::npos) << origin(c);
  }
  // -v names the shape and where the published figures per GPU and head dim are listed.
  log::set_level(log::Level::Info);
  testing::internal::CaptureStderr();
  m->attention(call(12288, 24, 24, 64, false, false));
  const std::string said = testing::internal::GetCapturedStderr();
  log::set_level(log::Level::Warn);
  EXPECT_NE(said.find("q 12288 kv 12288 full, 24/24 heads d64"), std::string::npos) << said;
  EXPECT_NE(said.find("docs/kernels.md lists the published figures"), std::string::npos) << said;
}

}  // namespace CPSIM_TEST_TU
