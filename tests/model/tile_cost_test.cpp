// Tile-level attention cost: tile counts per mask, masked tiles dearer than dense per FLOP,
// wave quantization over the SMs, implementations on their architectures, profiles from the
// published figures exact at their rows and monotone between.
#include "model/tile_cost.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "model/cost_model.hpp"
#include "scenario/load.hpp"
#include "scenario/profile_csv.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using model::AttentionCall;
using scenario::AttnImpl;
using scenario::Mask;

namespace {

scenario::GpuSpec a100() {
  return {"A100-SXM4-80GB", 312e12, 271e12, 1.65e12, 80.0 * (1 << 30), 108, scenario::GpuArch::Ampere};
}
scenario::GpuSpec h100() {
  return {"H100-SXM", 989e12, 795e12, 2.95e12, 80.0 * (1 << 30), 132, scenario::GpuArch::Hopper};
}

AttentionCall call(int64_t q, int64_t kv, Mask mask, double frac, int heads = 32, bool bwd = false) {
  AttentionCall c;
  c.q_len = q;
  c.kv_len = kv;
  c.mask = mask;
  c.unmasked_fraction = frac;
  c.heads_q = heads;
  c.heads_kv = 8;
  c.head_dim = 128;
  c.backward = bwd;
  return c;
}

double causal_frac(int64_t s) { return static_cast<double>(s + 1) / (2.0 * s); }

std::unique_ptr<model::CostModel> roofline(const scenario::GpuSpec& g, AttnImpl impl) {
  scenario::CostSpec spec;
  spec.profile = "none";
  spec.attention_kernel = impl;
  return model::CostModel::make(spec, g);
}

}  // namespace

TEST(Tiles, FullCausalAndOffsetCounts) {
  const model::TileShape t{128, 64};
  const auto full = model::count_tiles(call(8192, 4096, Mask::Full, 1), t);
  EXPECT_DOUBLE_EQ(full.full, 64.0 * 64.0);
  EXPECT_DOUBLE_EQ(full.partial, 0);
  EXPECT_DOUBLE_EQ(full.ctas, 64);
  // Causal 8K x 8K with 128 x 64 tiles: row block a has 2a full tiles and 2 on the diagonal.
  const auto causal = model::count_tiles(call(8192, 8192, Mask::Causal, causal_frac(8192)), t);
  EXPECT_DOUBLE_EQ(causal.full, 2.0 * 63 * 64 / 2);
  EXPECT_DOUBLE_EQ(causal.partial, 128);
  EXPECT_DOUBLE_EQ(causal.max_cta, 128);
  // Causal with the keys wholly before the queries except one diagonal: fewer skipped tiles.
  const auto offset = model::count_tiles(call(4096, 8192, Mask::CausalOffset, 0.75), t);
  EXPECT_GT(offset.full, 0.70 * 32 * 128);
  EXPECT_LE(offset.full + offset.partial, 32.0 * 128);
}

// count_tiles keeps recent answers (tile_cost.cpp): whatever came before, a call gets the tiles
// it got first, through more distinct shapes than the cache holds, in another order.
TEST(Tiles, RecentCountsAreTheSameCounts) {
  struct Case {
    AttentionCall c;
    model::TileShape t;
  };
  std::vector<Case> cases;
  const Mask masks[] = {Mask::Full, Mask::Causal, Mask::CausalOffset, Mask::Document, Mask::SlidingWindow};
  for (int64_t q = 128; q <= 32768; q += 128)
    for (int k = 0; k < 5; ++k)
      for (bool bwd : {false, true})
        cases.push_back({call(q, q * (1 + k % 2), masks[k], k == 0 ? 1.0 : 0.3 + 0.1 * k, 32, bwd),
                         model::TileShape{128, 128 - 64 * (k % 2)}});
  ASSERT_GT(cases.size(), 2048u);
  std::vector<model::TileWork> first;
  for (const Case& x : cases) first.push_back(model::count_tiles(x.c, x.t));
  for (size_t i = cases.size(); i-- > 0;) {
    const model::TileWork w = model::count_tiles(cases[i].c, cases[i].t);
    ASSERT_EQ(w.full, first[i].full) << i;
    ASSERT_EQ(w.partial, first[i].partial) << i;
    ASSERT_EQ(w.ctas, first[i].ctas) << i;
    ASSERT_EQ(w.max_cta, first[i].max_cta) << i;
  }
  // The same call twice in a row is the cache's answer; it equals the worked count above.
  const model::TileShape t{128, 64};
  for (int twice = 0; twice < 2; ++twice)
    EXPECT_DOUBLE_EQ(model::count_tiles(call(8192, 8192, Mask::Causal, causal_frac(8192)), t).full,
                     2.0 * 63 * 64 / 2);
}

TEST(Tiles, MaskedTilesCostMorePerFlopThanDense) {
  // Striped ring step (8K x 8K causal) vs zig-zag's (8K x 4K unmasked): the same FLOPs.
  for (const auto& g : {a100(), h100()}) {
    for (const AttnImpl impl : {AttnImpl::Fa2, AttnImpl::Auto}) {
      const auto m = roofline(g, impl);
      for (const bool bwd : {false, true}) {
        const auto striped = m->attention(call(8192, 8192, Mask::Causal, 0.5, 32, bwd));
        const auto zigzag = m->attention(call(8192, 4096, Mask::Full, 1, 32, bwd));
        EXPECT_NEAR(striped.flops, zigzag.flops, 1e-9 * zigzag.flops);
        EXPECT_GT(striped.time_s, 1.01 * zigzag.time_s) << g.name << " bwd " << bwd;
        EXPECT_LT(striped.time_s, 1.25 * zigzag.time_s) << g.name << " bwd " << bwd;
      }
    }
  }
}

TEST(Tiles, WaveQuantizationStep) {
  // One CTA more than fills the SMs costs a whole extra wave: 108 CTAs (one wave on an A100)
  // vs 109 (two waves) of the same per-CTA work.
  const model::TileShape t{128, 64};
  AttentionCall one = call(128, 8192, Mask::Full, 1, 108);
  AttentionCall more = one;
  more.heads_q = 109;
  const double t1 = model::tile_time(one, t, 1e-6, 108);
  const double t2 = model::tile_time(more, t, 1e-6, 108);
  EXPECT_NEAR(t2 / t1, 2.0, 1e-9);
  more.heads_q = 216;
  EXPECT_NEAR(model::tile_time(more, t, 1e-6, 108), t2, 1e-15);
}

TEST(Tiles, Fa2IsSlowerOnHopperThanFa3AndFa3RejectedOffHopper) {
  const auto c = call(8192, 8192, Mask::Full, 1);
  const double fa2 = roofline(h100(), AttnImpl::Fa2)->attention(c).time_s;
  const double fa3 = roofline(h100(), AttnImpl::Fa3)->attention(c).time_s;
  EXPECT_GT(fa2 / fa3, 1.5);
  EXPECT_LT(fa2 / fa3, 2.0);
  scenario::CostSpec spec;
  spec.attention_kernel = AttnImpl::Fa3;
  EXPECT_THROW(model::CostModel::make(spec, a100()), std::invalid_argument);
}

TEST(Tiles, RooflineNearThePublishedFa2Figures) {
  // FA2 README figures (A100, fwd+bwd, d128, batch x seqlen = 16K, 16 heads): causal 8K 182,
  // non-causal 8K 201 TFLOP/s. The tile roofline gets within 15 %.
  const auto m = roofline(a100(), AttnImpl::Fa2);
  for (const auto& [mask, frac, published] :
       {std::tuple{Mask::Causal, causal_frac(8192), 182.0}, std::tuple{Mask::Full, 1.0, 201.0}}) {
    AttentionCall c = call(8192, 8192, mask, frac, 32);
    const auto f = m->attention(c);
    c.backward = true;
    const auto b = m->attention(c);
    const double tflops = 3.5 * f.flops / (f.time_s + b.time_s) / 1e12;
    EXPECT_NEAR(tflops / published, 1.0, 0.15) << scenario::mask_name(mask);
  }
}

TEST(Profiles, BundledFa2A100ExactAtRowsAndMonotoneBetween) {
  const std::string path = std::string(CPSIM_SOURCE_DIR) + "/kernels/profiles/a100-fa2-published.csv";
  const auto table = scenario::read_profile_csv(path);
  scenario::CostSpec spec;
  spec.profile = path;
  spec.attention_kernel = AttnImpl::Fa2;
  const auto m = model::CostModel::make(spec, a100());
  int rows = 0;
  for (const auto& r : table.rows) {
    if (r.fwdbwd) continue;
    AttentionCall c;
    c.q_len = r.q_len;
    c.kv_len = r.kv_len;
    c.mask = r.mask;
    c.unmasked_fraction = r.unmasked_fraction;
    c.heads_q = r.heads_q;
    c.heads_kv = r.heads_kv;
    c.head_dim = r.head_dim;
    c.backward = r.backward;
    const auto cost = m->attention(c);
    EXPECT_NEAR(cost.time_s, r.time_s, 1e-12) << r.line;
    EXPECT_EQ(cost.source, model::CostSource::Derived) << r.line;
    ++rows;
  }
  EXPECT_GT(rows, 30);
  // Monotone in the sequence length between rows (d128 causal forward, 16 heads).
  double last = 0;
  for (int64_t s = 1024; s <= 16384; s += 512) {
    const double t = m->attention(call(s, s, Mask::Causal, causal_frac(s), 16)).time_s;
    EXPECT_GE(t, last) << s;
    last = t;
  }
}

TEST(Profiles, CsvErrorsNameLineAndColumn) {
  const std::string path = ::testing::TempDir() + "/bad-profile.csv";
  std::ofstream(path) << "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,"
                         "head_dim,dtype,time_us,tflops,source,commit\n"
                         "H100,fa2,fwd,1024,1024,full,1,16,16,128,bf16,12.5,100,guessed,x\n";
  try {
    scenario::read_profile_csv(path);
    FAIL() << "accepted a bad source";
  } catch (const scenario::InputError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.col(), 55);
    EXPECT_NE(std::string(e.what()).find(":2:55: error: cost.profile: column 'source': expected "
                                         "measured, published or derived, got 'guessed'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("\n  H100,fa2"), std::string::npos) << e.what();
  }
}

}  // namespace CPSIM_TEST_TU
