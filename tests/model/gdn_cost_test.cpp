// Gated DeltaNet costs: the bundled profile of flash-linear-attention's published H200 figures
// (exact at its rows, interpolated between them), the kernel-by-kernel roofline against every
// one of those figures, and the parts FLA's context parallelism splits a call into.
#include "model/gdn_cost.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "model/cost_model.hpp"
#include "scenario/load.hpp"
#include "scenario/profile_csv.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using model::CostModel;
using model::CostSource;
using model::GdnCall;
using model::GdnPart;

namespace {

scenario::GpuSpec h200() {
  return {"H200-SXM", 989e12, 795e12, 4.08e12, 141.0 * (1 << 30), 132, scenario::GpuArch::Hopper};
}
scenario::GpuSpec h100() {
  return {"H100-SXM", 989e12, 795e12, 2.95e12, 80.0 * (1 << 30), 132, scenario::GpuArch::Hopper};
}
scenario::GpuSpec a100() {
  return {"A100-SXM4-80GB", 312e12, 271e12, 1.65e12, 80.0 * (1 << 30), 108, scenario::GpuArch::Ampere};
}

std::string bundled() {
  return std::string(CPSIM_SOURCE_DIR) + "/kernels/profiles/h200-gdn-fla-published.csv";
}

GdnCall call(int64_t t, int seqs, int hk, int hv, bool bwd = false, GdnPart part = GdnPart::Whole) {
  GdnCall c;
  c.seq_len = t;
  c.seqs = seqs;
  c.heads_k = hk;
  c.heads_v = hv;
  c.backward = bwd;
  c.part = part;
  return c;
}

}  // namespace

TEST(GdnProfile, ReturnsItsOwnRowsExactly) {
  const model::GdnProfile p(scenario::read_gdn_profile_csv(bundled()));
  // The anchor model's shape (Qwen3.5-27B TP1: 16 key / 48 value heads): 1.311 ms forward at 16K.
  const auto f = p.price(call(16384, 1, 16, 48));
  ASSERT_TRUE(f);
  EXPECT_NEAR(f->time_s, 1311e-6, 1e-9);
  EXPECT_EQ(f->source, CostSource::Published);
  // Backward, 16 / 32 heads, 32K tokens in one sequence: 5.697 ms; in 8 sequences of 4K: 5.781.
  EXPECT_NEAR(p.price(call(32768, 1, 16, 32, true))->time_s, 5697e-6, 1e-9);
  EXPECT_NEAR(p.price(call(4096, 8, 16, 32, true))->time_s, 5781e-6, 1e-9);
  // Same tokens and value heads x sequences, another split: the nearest sequence count's row
  // (8 heads x 4 sequences of 8K: 0.467 ms, not 32 heads x 1 sequence's 0.466-0.500).
  EXPECT_NEAR(p.price(call(8192, 4, 2, 8))->time_s, 467e-6, 1e-9);
}

TEST(GdnProfile, InterpolatesInTokensAndHeadsAndRefusesOutside) {
  const model::GdnProfile p(scenario::read_gdn_profile_csv(bundled()));
  // 24K tokens, 48 heads: between the 16K (1.311 ms) and 32K (2.711 ms) rows, power law.
  const double t24 = p.price(call(24576, 1, 16, 48))->time_s;
  EXPECT_NEAR(t24, std::exp(std::log(1311e-6) + std::log(1.5) * std::log(2711.0 / 1311.0) / std::log(2.0)), 1e-9);
  // 40 value heads at 16K: between the 32-head (0.930 / 0.914 / 0.972 ms) and 48-head rows.
  const double h40 = p.price(call(16384, 1, 16, 40))->time_s;
  EXPECT_GT(h40, 930e-6);
  EXPECT_LT(h40, 1311e-6);
  // Beyond the published 32K, above 512 heads x sequences, another head dim: no price.
  EXPECT_FALSE(p.price(call(65536, 1, 16, 48)));
  EXPECT_FALSE(p.price(call(8192, 1, 16, 1024)));
  GdnCall d64 = call(8192, 1, 16, 48);
  d64.key_dim = d64.value_dim = 64;
  EXPECT_FALSE(p.price(d64));
  EXPECT_FALSE(p.price(call(8192, 1, 16, 48, false, GdnPart::Local)));
}

// The roofline's constants are fitted to these figures; this pins how well: every forward
// figure within 15 %, the backward ones at an rms of 20 % (kernels/profiles/make_gdn_published.py
// writes the same figures as validation cases).
TEST(GdnRoofline, ReproducesThePublishedFlaFigures) {
  const scenario::GdnProfileTable t = scenario::read_gdn_profile_csv(bundled());
  ASSERT_EQ(t.rows.size(), 113u);
  double sq_bwd = 0, worst_fwd = 0;
  int n_bwd = 0;
  for (const auto& r : t.rows) {
    GdnCall c = call(r.seq_len, r.seqs, r.heads_k, r.heads_v, r.backward);
    const double err = std::log(model::gdn_roofline(c, h200(), 132).time_s / r.time_s);
    if (r.backward) {
      sq_bwd += err * err;
      ++n_bwd;
    } else {
      worst_fwd = std::max(worst_fwd, std::fabs(err));
    }
  }
  EXPECT_LT(worst_fwd, std::log(1.15));
  EXPECT_LT(std::sqrt(sq_bwd / n_bwd), std::log(1.20));
}

TEST(GdnRoofline, TheStateRecurrenceIsSequentialInChunks) {
  // 4 heads: 8 recurrence CTAs on 132 SMs, so the chunk walk dominates: 8 sequences of 4K run
  // their walks side by side and cost far less than one sequence of 32K with the same FLOPs.
  const double one = model::gdn_roofline(call(32768, 1, 2, 4), h200(), 132).time_s;
  const double eight = model::gdn_roofline(call(4096, 8, 2, 4), h200(), 132).time_s;
  EXPECT_GT(one, 3 * eight);
  EXPECT_NEAR(model::gdn_roofline(call(32768, 1, 2, 4), h200(), 132).flops,
              model::gdn_roofline(call(4096, 8, 2, 4), h200(), 132).flops, 1.0);
  // 512 chunks x 1.2 us is a floor of the forward.
  EXPECT_GT(one, 512 * 1.2e-6);
}

TEST(GdnCost, ContextParallelPartsAndSources) {
  const auto m = CostModel::make("auto", h100());  // the H200 figures serve every Hopper part
  const model::Cost whole = m->gdn(call(16384, 1, 16, 48));
  EXPECT_EQ(whole.source, CostSource::Published);
  EXPECT_NEAR(whole.time_s, 1311e-6, 1e-9);
  const model::Cost local = m->gdn(call(16384, 1, 16, 48, false, GdnPart::Local));
  const model::Cost rec = m->gdn(call(16384, 1, 16, 48, false, GdnPart::Recurrence));
  const model::Cost pre = m->gdn(call(16384, 1, 16, 48, false, GdnPart::CpPreprocess));
  EXPECT_EQ(local.source, CostSource::Derived);
  EXPECT_EQ(rec.source, CostSource::Derived);
  EXPECT_EQ(pre.source, CostSource::Derived);  // FLA's chunk kernels at their published-fit rates
  // The published whole call split in the roofline's proportions.
  EXPECT_NEAR(local.time_s + rec.time_s, whole.time_s, 1e-9);
  EXPECT_GT(rec.time_s, local.time_s);  // the chunk walk and the output kernel
  // The pre-process walks the same 256 chunks again (plus the K x K transition): at least the
  // latency floor, and the CP overhead is a sizeable fraction of the call.
  EXPECT_GT(pre.time_s, 256 * 1.2e-6);
  EXPECT_GT(pre.time_s, 0.2 * whole.time_s);
  // Backward: the pre-process walks dh.
  const model::Cost pre_b = m->gdn(call(16384, 1, 16, 48, true, GdnPart::CpPreprocess));
  EXPECT_GT(pre_b.time_s, 256 * 2.1e-6);
  // Outside the figures: the roofline, marked extrapolated.
  const model::Cost far = m->gdn(call(262144, 1, 16, 48));
  EXPECT_EQ(far.source, CostSource::Roofline);
  EXPECT_TRUE(far.extrapolated);
  // `none`: the roofline everywhere; off Hopper: no profile.
  EXPECT_EQ(CostModel::make("none", h100())->gdn(call(16384, 1, 16, 48)).source, CostSource::Roofline);
  const model::Cost a = CostModel::make("auto", a100())->gdn(call(16384, 1, 16, 48));
  EXPECT_EQ(a.source, CostSource::Roofline);
  EXPECT_FALSE(a.extrapolated);
  EXPECT_GT(a.time_s, whole.time_s);  // a third of H100's peak
}

TEST(GdnProfileCsv, BadCellsNameTheLine) {
  const std::string path = ::testing::TempDir() + "gdn_bad.csv";
  {
    std::ofstream f(path);
    f << "gpu,kernel,direction,seq_len,seqs,heads_k,heads_v,key_dim,value_dim,chunk,dtype,time_us,source,reference\n"
      << "H200,fla,fwd,8192,1,16,32,128,128,64,bf16,472,published,x\n"
      << "H200,fla,sideways,8192,1,16,32,128,128,64,bf16,472,published,x\n";
  }
  try {
    scenario::read_gdn_profile_csv(path);
    FAIL() << "accepted a bad direction";
  } catch (const scenario::InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(":3:"), std::string::npos) << what;
    EXPECT_NE(what.find("expected fwd or bwd"), std::string::npos) << what;
  }
  std::remove(path.c_str());
}

}  // namespace CPSIM_TEST_TU
