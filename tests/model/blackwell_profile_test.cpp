// The bundled Blackwell attention profiles (kernels/profiles/{gb200,b200}-*-published.csv,
// written by make_blackwell_published.py from NVIDIA's cuDNN frontend SDPA benchmark): every
// head dim the figures cover is priced from them, not the tile model, and every shape they do
// not cover says so.
#include "model/cost_model.hpp"

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
