// Kernel cost models: the roofline against the published figures it is fitted to, and the
// profile table: exact at measured shapes, monotone between them, fallback reported outside.
#include "model/cost_model.hpp"
#include "model/stack_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "scenario/load.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;
using model::AttentionCall;
using model::CostModel;
using model::CostSource;

namespace {

scenario::GpuSpec h100() { return {"H100-SXM", 989e12, 795e12, 2.95e12, 80.0 * (1 << 30)}; }
scenario::GpuSpec a100() {
  return {"A100-SXM4-80GB", 312e12, 271e12, 1.65e12, 80.0 * (1 << 30), 108, scenario::GpuArch::Ampere};
}

std::string published_h100() {
  return std::string(CPSIM_SOURCE_DIR) + "/kernels/profiles/h100-fa3-published.csv";
}

AttentionCall call(int64_t q, int64_t kv, int heads, int d, int mask = 0, bool bwd = false) {
  AttentionCall c;
  c.q_len = q;
  c.kv_len = kv;
  c.mask = static_cast<cpsim::scenario::Mask>(mask);
  c.unmasked_fraction = mask == 0 ? 1.0 : static_cast<double>(q + 1) / (2.0 * q);
  c.heads_q = heads;
  c.heads_kv = heads;
  c.head_dim = d;
  c.backward = bwd;
  return c;
}

double tflops(const model::Cost& c) { return c.flops / c.time_s / 1e12; }

/// A temporary directory removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("cpsim-cost-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const auto p = path / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

const char* const kHeader =
    "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,dtype,"
    "time_us,tflops,source,commit\n";

// ---- FLOP conventions -----------------------------------------------------------------------

TEST(CostFlops, AttentionFollowsFlashAttentionConvention) {
  AttentionCall c = call(16384, 16384, 24, 256);
  c.heads_kv = 4;
  c.batch = 2;
  EXPECT_DOUBLE_EQ(model::attention_flops(c), 4.0 * 2 * 16384.0 * 16384.0 * 24 * 256);
  c.unmasked_fraction = 0.25;
  c.backward = true;
  EXPECT_DOUBLE_EQ(model::attention_flops(c), 2.5 * 4.0 * 2 * 16384.0 * 16384.0 * 0.25 * 24 * 256);
}

TEST(CostFlops, GatedDeltaNetChunkTermsWrittenOut) {
  // C (6K + 4V) + 6KV + C^2/3 per token and head: 64 * 1280 + 98304 + 4096/3 at C=64, K=V=128.
  const double per_token = 64.0 * 1280 + 6.0 * 128 * 128 + 64.0 * 64 / 3;
  EXPECT_NEAR(model::linear_attention_flops(1000, 48, 128, 128, 64, false), 1000 * 48 * per_token,
              1e-3);
  EXPECT_NEAR(model::linear_attention_flops(1000, 48, 128, 128, 64, true),
              3 * 1000 * 48 * per_token, 1e-3);
}

// ---- Roofline -------------------------------------------------------------------------------

// The attention curve is fitted to calibration.md's FlashAttention-3 H100 figures; it must
// reproduce every one of them within 8 %.
TEST(Roofline, ReproducesPublishedFa3ForwardFigures) {
  const auto m = CostModel::roofline(h100());
  struct Figure {
    int s, heads;
    double tflops;
  };
  const Figure figures[] = {{1024, 192, 541}, {2048, 192, 618}, {4096, 192, 628}, {8192, 192, 639},
                            {512, 512, 430},  {1024, 256, 517}, {2048, 128, 566}, {4096, 64, 590},
                            {8192, 32, 614},  {16384, 16, 621}};
  for (const Figure& f : figures) {
    const model::Cost c = m->attention(call(f.s, f.s, f.heads, 128));
    EXPECT_EQ(c.source, CostSource::Roofline);
    EXPECT_NEAR(tflops(c) / f.tflops, 1.0, 0.10) << "s " << f.s << " heads " << f.heads;
  }
  // FA3's best BF16 figure: 740 TFLOP/s at head dim 256, 16K.
  EXPECT_NEAR(tflops(m->attention(call(16384, 16384, 8, 256))) / 740, 1.0, 0.03);
}

TEST(Roofline, AttentionEfficiencyRisesWithBlockSizeAndSaturates) {
  const auto m = CostModel::roofline(h100());
  double previous = 0;
  for (int s = 512; s <= 65536; s *= 2) {
    const double t = tflops(m->attention(call(s, s, 24, 256)));
    EXPECT_GE(t, previous * 0.97) << s;  // wave quantisation may wobble a little
    previous = std::max(previous, t);
    EXPECT_LT(t, 0.8 * 989);
  }
  const double small = tflops(m->attention(call(1024, 1024, 24, 256)));
  const double ring = tflops(m->attention(call(16384, 16384, 24, 256)));
  EXPECT_LT(small, 0.8 * ring);  // 1K blocks run well below the 8K-16K plateau
  EXPECT_GT(ring, 0.65 * 989);
}

TEST(Roofline, BackwardIsSlowerPerFlopAndCausalCostsAboutHalf) {
  const auto m = CostModel::roofline(h100());
  const model::Cost fwd = m->attention(call(8192, 8192, 32, 128));
  const model::Cost bwd = m->attention(call(8192, 8192, 32, 128, 0, true));
  EXPECT_DOUBLE_EQ(bwd.flops, 2.5 * fwd.flops);
  EXPECT_GT(bwd.time_s, 2.5 * fwd.time_s);
  EXPECT_LT(tflops(bwd) / tflops(fwd), 0.63 / 0.73 + 0.01);
  const model::Cost causal = m->attention(call(8192, 8192, 32, 128, 1));
  EXPECT_GT(causal.time_s, 0.5 * fwd.time_s);
  EXPECT_LT(causal.time_s, 0.6 * fwd.time_s);
}

TEST(Roofline, ScalesWithPeakAndFloorsSmallKernels) {
  scenario::GpuSpec half = h100();
  half.name = "synthetic";  // same default SM count as H100
  half.peak_flops /= 2;
  half.gemm_flops /= 2;
  const auto a = CostModel::roofline(h100());
  const auto b = CostModel::roofline(half);
  const AttentionCall c = call(16384, 16384, 24, 256);
  EXPECT_NEAR(b->attention(c).time_s / a->attention(c).time_s, 2.0, 1e-9);
  EXPECT_NEAR(a->attention(call(16, 16, 1, 64)).time_s, 5e-6, 0.2e-6);  // one CTA: its tile at one SM's rate
  EXPECT_EQ(a->attention(AttentionCall{}).time_s, 0.0);  // nothing unmasked: no kernel
}

TEST(Roofline, GemmNearsItsSustainedRateOnlyWhenLarge) {
  const auto m = CostModel::roofline(h100());
  const model::Cost big = m->gemm(16384, 17408, 5120);
  EXPECT_EQ(big.flops, 2.0 * 16384 * 17408 * 5120);
  // Long and busy: the main loop runs at Hopper's power-limited clock (0.88 of the maximum at
  // full activity, gemm_cost.cpp), as the H200 grid's 8192 x 17408 x 5120 ran at 695.7 TFLOP/s.
  EXPECT_GT(tflops(big), 0.82 * 795);
  EXPECT_LE(tflops(big), 0.90 * 795);
  EXPECT_LT(tflops(m->gemm(1024, 1024, 1024)), 0.6 * tflops(big));
  EXPECT_DOUBLE_EQ(m->gemm(128, 128, 128).time_s, 5e-6);
  // A thin GEMM is memory bound: bytes / HBM bandwidth.
  const model::Cost thin = m->gemm(1 << 20, 8, 8192);
  EXPECT_NEAR(thin.time_s, 2.0 * ((1 << 20) * 8192.0 + 8192.0 * 8 + (1 << 20) * 8.0) / 2.95e12,
              1e-9);
}

// A memory-bound kernel runs at its class's measured achieved bandwidth, never at a class-less
// HBM roofline: the summary names a measured rate for every memory op.
TEST(Roofline, MemoryBoundIsBytesAtItsClassRatePlusLaunch) {
  const auto m = CostModel::roofline(h100());
  for (const model::MemClass cls : {model::MemClass::Copy, model::MemClass::Add, model::MemClass::FusedFwd}) {
    const double bw = model::achieved_bandwidth(cls, h100());
    EXPECT_DOUBLE_EQ(m->memory_bound(bw * 1e-3, cls).time_s, 1e-3 + 5e-6);
    EXPECT_EQ(m->memory_bound(1e9, cls).source, CostSource::Measured);
    EXPECT_STREQ(m->memory_bound(1e9, cls).origin, "h200-membound-measured.csv rates");
  }
  EXPECT_DOUBLE_EQ(m->memory_bound(0, model::MemClass::Copy).time_s, 5e-6);
  EXPECT_EQ(m->memory_bound(1e9, model::MemClass::Copy).flops, 0.0);
  // The fused single-pass kernels reach 3.26 of H200's 4.08 TB/s: slower than a copy.
  EXPECT_GT(m->memory_bound(1e9, model::MemClass::FusedFwd).time_s, m->memory_bound(1e9, model::MemClass::Copy).time_s);
}

TEST(Roofline, LinearAttentionKernelByKernel) {
  const auto m = CostModel::roofline(h100());
  const model::Cost a = m->linear_attention(16384, 48, 128, 128, 64, false);
  const model::Cost b = m->linear_attention(32768, 48, 128, 128, 64, false);
  // 48 heads x 2 value blocks = 96 recurrence CTAs < 132 SMs: the chunk walk is latency-bound,
  // the parallel kernels grow with the tokens; both double with the sequence.
  EXPECT_NEAR(b.time_s / a.time_s, 2.0, 0.05);
  EXPECT_GT(m->linear_attention(16384, 48, 128, 128, 64, true).time_s, 2.5 * a.time_s);
  // One chunk of one head: 4 forward kernels at their fixed 6 us plus the one chunk step.
  EXPECT_NEAR(m->linear_attention(64, 1, 128, 128, 64, false).time_s, 4 * 6e-6 + 1.2e-6, 2e-7);
  // Far below the quadratic attention of the same tokens at 128K context.
  EXPECT_LT(a.time_s, CostModel::roofline(h100())->attention(call(16384, 131072, 24, 256)).time_s);
}

TEST(Roofline, RejectsGpuWithoutPeak) {
  scenario::GpuSpec g = h100();
  g.peak_flops = 0;
  EXPECT_THROW(CostModel::roofline(g), std::invalid_argument);
}

// ---- Profile table --------------------------------------------------------------------------

TEST(Profile, ExactAtEveryMeasuredPoint) {
  const auto m = CostModel::from_profile(published_h100(), h100());
  std::ifstream in(published_h100());
  std::string line;
  std::getline(in, line);
  int rows = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) c.push_back(cell);
    ASSERT_EQ(c.size(), 15u) << line;
    if (c[2] == "fwdbwd") continue;  // validation-only rows
    AttentionCall a;
    a.backward = c[2] == "bwd";
    a.q_len = std::stoll(c[3]);
    a.kv_len = std::stoll(c[4]);
    a.mask = *cpsim::scenario::parse_mask(c[5]);
    a.unmasked_fraction = std::stod(c[6]);
    a.heads_q = std::stoi(c[7]);
    a.heads_kv = std::stoi(c[8]);
    a.head_dim = std::stoi(c[9]);
    const model::Cost cost = m->attention(a);
    // Two series may time one shape: the fastest row wins, so never slower than this row.
    EXPECT_LE(cost.time_s, std::stod(c[11]) * 1e-6 + 1e-12) << line;
    EXPECT_GT(cost.time_s, 0.85 * std::stod(c[11]) * 1e-6) << line;
    EXPECT_NE(cost.source, CostSource::Roofline) << line;
    EXPECT_FALSE(cost.extrapolated) << line;
    ++rows;
  }
  EXPECT_GE(rows, 30);
}

TEST(Profile, MonotoneBetweenMeasuredPoints) {
  const auto m = CostModel::from_profile(published_h100(), h100());
  for (bool bwd : {false, true}) {
    for (uint8_t mask : {uint8_t{0}, uint8_t{1}}) {
      double last = 0;
      int inside = 0;
      // 16 heads: FLOPs from 512-token blocks to 16K-token ones, through the measured ones.
      for (int s = 600; s <= 16000; s += 97) {
        const model::Cost c = m->attention(call(s, s, 16, 128, mask, bwd));
        if (c.extrapolated) continue;
        ++inside;
        EXPECT_NE(c.source, CostSource::Roofline);
        EXPECT_GE(c.time_s, last) << "s " << s << (bwd ? " bwd" : " fwd") << " mask " << int(mask);
        last = c.time_s;
      }
      EXPECT_GT(inside, 100);
    }
  }
}

TEST(Profile, InterpolatesBetweenNeighboursInLogLog) {
  TempDir dir;
  const std::string path =
      dir.write("p.csv", std::string(kHeader) +
                             "G,k,fwd,1024,1024,full,1,16,16,128,bf16,100,0,measured,x\n"
                             "G,k,fwd,4096,4096,full,1,16,16,128,bf16,1000,0,measured,x\n");
  const auto m = CostModel::from_profile(path, h100());
  // 2048: FLOPs the geometric mean of the two points, so log-log gives the geometric mean time.
  const model::Cost c = m->attention(call(2048, 2048, 16, 128));
  EXPECT_NEAR(c.time_s, std::sqrt(100e-6 * 1000e-6), 1e-12);
  EXPECT_EQ(c.source, CostSource::Measured);
  EXPECT_FALSE(c.extrapolated);
  // (1K: 16 x 8 CTAs of 128 query rows, one wave on 132 SMs; 2K: two waves of CTAs a 2K loop
  // long; 4K: four waves of 4K loops, 250 us each. One wave of 2K loops is the geometric mean
  // of 100 and 250 us, and 2K's two waves make 316 us.)
  // Same FLOPs, another shape: 1K queries against 4K keys are one wave of CTAs with the 4K
  // point's loop, 250 us, not the 2K square's FLOPs on the curve.
  EXPECT_NEAR(m->attention(call(1024, 4096, 16, 128)).time_s, 250e-6, 1e-12);
  // More heads: whole waves more. 33 heads of 1K are 264 CTAs, two waves.
  EXPECT_NEAR(m->attention(call(1024, 1024, 33, 128)).time_s, 200e-6, 1e-12);
}

// MLA rows (Q.K over 192, P.V over 128) are keyed by the mean head dim, the one a scenario's MLA
// attention runs at (the same FLOPs): a d160 call meets them, exactly and not extrapolated.
TEST(Profile, MlaRowsPriceTheMeanHeadDim) {
  TempDir dir;
  const std::string path = dir.write(
      "p.csv", "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,dtype,"
               "time_us,tflops,source,commit,head_dim_v\n"
               "G,k,fwd,4096,4096,full,1,16,16,192,bf16,300,0,measured,x,128\n"
               "G,k,fwd,8192,8192,full,1,16,16,192,bf16,1200,0,measured,x,128\n");
  const auto m = CostModel::from_profile(path, h100());
  const model::Cost c = m->attention(call(4096, 4096, 16, 160));
  EXPECT_NEAR(c.time_s, 300e-6, 1e-12);
  EXPECT_FALSE(c.extrapolated);
  // An odd d_qk + d_v has no mean head dim: refused with its column.
  const std::string odd = dir.write(
      "odd.csv", "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,dtype,"
                 "time_us,tflops,source,commit,head_dim_v\n"
                 "G,k,fwd,4096,4096,full,1,16,16,192,bf16,300,0,measured,x,127\n");
  try {
    CostModel::from_profile(odd, h100());
    ADD_FAILURE() << "an odd head_dim + head_dim_v was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim_v"), std::string::npos) << e.what();
  }
}

// DeepSeek-V3's MLA attention on H100 has rows (the cuDNN MLA rows measured on H200, derived),
// not the tile model, at every shape its bundled scenario runs (causal 4K-16K tiles and past).
TEST(Profile, BundledH100CudnnPricesMlaFromRows) {
  const auto m = CostModel::from_profile(std::string(CPSIM_SOURCE_DIR) + "/kernels/profiles/h100-cudnn-published.csv", h100());
  for (bool bwd : {false, true})
    for (int64_t s : {4096, 8192, 16384, 32768}) {
      const model::Cost c = m->attention(call(s, s, 16, 160, 1, bwd));
      EXPECT_FALSE(c.extrapolated) << s << (bwd ? " bwd" : " fwd");
      EXPECT_EQ(c.source, CostSource::Derived) << s;
      ASSERT_NE(c.origin, nullptr);
      EXPECT_STREQ(c.origin, "h100-cudnn-published.csv");
    }
  // Outside every row (d96): the tile model, and the cost says there was no row.
  const model::Cost out = m->attention(call(4096, 4096, 16, 96));
  EXPECT_TRUE(out.extrapolated);
  EXPECT_EQ(out.source, CostSource::Roofline);
  ASSERT_NE(out.origin, nullptr);
  EXPECT_NE(std::string(out.origin).find("no measured or published row"), std::string::npos);
}

// A GPU no bundled attention profile covers (L40S: no published FA/cuDNN figure is bundled) is
// priced by the tile model, and its costs say there was no profile; with a profile they do not.
TEST(Profile, UnprofiledGpuSaysSo) {
  const scenario::GpuSpec l40s{"L40S", 362e12, 290e12, 0.76e12, 48.0 * (1 << 30), 142, scenario::GpuArch::Ada};
  const auto m = CostModel::make("auto", l40s);
  for (bool bwd : {false, true}) {
    const model::Cost c = m->attention(call(8192, 8192, 32, 128, 1, bwd));
    EXPECT_EQ(c.source, CostSource::Roofline);
    ASSERT_NE(c.origin, nullptr);
    EXPECT_NE(std::string(c.origin).find("no measured or published profile"), std::string::npos) << c.origin;
  }
  // (The origin names a string the model owns: the model must outlive the cost that reads it.)
  const auto hm = CostModel::make("auto", h100());
  const model::Cost h = hm->attention(call(8192, 8192, 32, 128, 1));
  ASSERT_NE(h.origin, nullptr);
  EXPECT_EQ(std::string(h.origin).find("no measured or published"), std::string::npos) << h.origin;
}

TEST(Profile, HeadsChangeTheRateOnlyAtAWaveAndBackwardIsNotFaster) {
  // FA3 causal 16K d128 on H100: the published row is 616 TFLOP/s at 16 heads. More heads are
  // more waves of the same CTAs: the rate stays within one wave of it at every head count (it
  // fell to 450 TFLOP/s past 27 heads when the curve was read at the call's total FLOPs), and
  // the backward (derived at 0.63 / 0.73 of the forward) is never the faster one.
  const auto m = CostModel::from_profile(published_h100(), h100());
  auto rate = [&](int heads, bool bwd) {
    AttentionCall c = call(16384, 16384, heads, 128, 1, bwd);
    c.heads_kv = 8;
    const model::Cost k = m->attention(c);
    EXPECT_FALSE(k.extrapolated) << heads;
    return k.flops / k.time_s;
  };
  for (int h = 1; h <= 64; ++h) {
    const double fwd = rate(h, false), bwd = rate(h, true);
    const double waves = std::ceil(h * 128.0 / 132);
    EXPECT_NEAR(fwd / 616e12, 1.0, 1.0 / waves + 0.02) << h << " heads";
    EXPECT_LE(bwd, fwd) << h << " heads";
  }
}

TEST(Profile, OutsideTheMeasuredRangeFallsBackAndSaysSo) {
  const auto m = CostModel::from_profile(published_h100(), h100());
  const auto roof = CostModel::roofline(h100());
  auto expect_fallback = [&](const AttentionCall& a, const char* why) {
    const model::Cost c = m->attention(a);
    EXPECT_TRUE(c.extrapolated) << why;
    EXPECT_EQ(c.source, CostSource::Roofline) << why;
    EXPECT_DOUBLE_EQ(c.time_s, roof->attention(a).time_s) << why;
  };
  // Past the longest measured CTA loop (64K keys, the rows stop at 16K) the loop goes on at
  // the last row's rate: derived from the rows, at the 16K row's rate within one wave.
  const model::Cost longer = m->attention(call(65536, 65536, 16, 128));
  const model::Cost last_row = m->attention(call(16384, 16384, 16, 128));
  EXPECT_FALSE(longer.extrapolated);
  EXPECT_EQ(longer.source, CostSource::Derived);
  EXPECT_NEAR((longer.flops / longer.time_s) / (last_row.flops / last_row.time_s), 1.0, 0.02);
  expect_fallback(call(256, 256, 16, 128), "below the smallest");
  expect_fallback(call(4096, 4096, 16, 96), "no d96 rows");
  // The anchor ring step (24 heads, d256, causal 16K) has three times the FLOPs of the
  // published 16K d256 row (8 heads) but the same CTAs, 24 waves of them: the curve prices it,
  // at the row's rate within one wave.
  AttentionCall ring = call(16384, 16384, 24, 256, 1);
  ring.heads_kv = 4;
  AttentionCall row = ring;
  row.heads_q = row.heads_kv = 8;
  const model::Cost in_range = m->attention(ring), published = m->attention(row);
  EXPECT_FALSE(in_range.extrapolated);
  EXPECT_EQ(in_range.source, CostSource::Published);
  const double rate = in_range.flops / in_range.time_s, row_rate = published.flops / published.time_s;
  EXPECT_NEAR(rate / row_rate, 1.0, 1.0 / 24);
  // GEMMs and memory-bound ops are not in the profile: the roofline prices them, not flagged.
  EXPECT_FALSE(m->gemm(4096, 4096, 4096).extrapolated);
  EXPECT_EQ(m->memory_bound(1e9, model::MemClass::Copy).source, CostSource::Measured);
}

TEST(Profile, DocumentMasksUseTheCausalCurveWhenUnmeasured) {
  const auto m = CostModel::from_profile(published_h100(), h100());
  AttentionCall doc = call(8192, 8192, 32, 128, 2);
  doc.unmasked_fraction = 0.3;
  const model::Cost c = m->attention(doc);
  EXPECT_FALSE(c.extrapolated);
  AttentionCall causal = doc;
  causal.mask = cpsim::scenario::Mask::Causal;
  EXPECT_DOUBLE_EQ(c.time_s, m->attention(causal).time_s);
}

TEST(Profile, FastestKernelWinsAndNonMonotoneDataIsPooled) {
  TempDir dir;
  const std::string path = dir.write(
      "p.csv", std::string(kHeader) +
                   "# two kernels time one shape; the 2K point is slower than the 4K one\n"
                   "G,slow,fwd,1024,1024,full,1,16,16,128,bf16,150,0,measured,x\n"
                   "G,fast,fwd,1024,1024,full,1,16,16,128,bf16,100,0,measured,x\n"
                   "G,fast,fwd,2048,2048,full,1,16,16,128,bf16,900,0,measured,x\n"
                   "G,fast,fwd,4096,4096,full,1,16,16,128,bf16,400,0,measured,x\n"
                   "G,fast,fwd,8192,8192,full,1,16,16,128,bf16,4000,0,measured,x\n");
  const auto m = CostModel::from_profile(path, h100());
  EXPECT_NEAR(m->attention(call(1024, 1024, 16, 128)).time_s, 100e-6, 1e-12);
  // Measured shapes return their own measurement, pooled or not.
  EXPECT_NEAR(m->attention(call(2048, 2048, 16, 128)).time_s, 900e-6, 1e-12);
  // Between them the curve is monotone: one wave of 2K loops (900 us over 2 waves) and of 4K
  // loops (400 us over 4 waves) pooled to their geometric mean.
  const double pooled = std::sqrt(450e-6 * 100e-6);
  EXPECT_NEAR(m->attention(call(1024, 2048, 16, 128)).time_s, pooled, 1e-12);  // one wave, 2K loops
  double last = 0;
  for (int s = 1024; s <= 8192; s += 64) {
    const double t = m->attention(call(1024, s, 16, 128)).time_s;
    EXPECT_GE(t, last - 1e-15) << s;
    last = t;
  }
}

TEST(Profile, BadRowNamesFileLineColumnWithCaret) {
  TempDir dir;
  const std::string path =
      dir.write("bad.csv", std::string(kHeader) +
                               "G,k,fwd,1024,1024,full,1,16,16,128,bf16,abc,0,measured,x\n");
  try {
    CostModel::from_profile(path, h100());
    FAIL() << "no exception";
  } catch (const scenario::InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              path +
                  ":2:41: error: cost.profile: column 'time_us': 'abc' is not a positive number\n"
                  "  G,k,fwd,1024,1024,full,1,16,16,128,bf16,abc,0,measured,x\n"
                  "  " +
                  std::string(40, ' ') + "^");
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.col(), 41);
  }
  const std::string bad_mask =
      dir.write("mask.csv",
                std::string(kHeader) + "G,k,fwd,1024,1024,diag,1,16,16,128,bf16,1,0,measured,x\n");
  EXPECT_THROW(CostModel::from_profile(bad_mask, h100()), scenario::InputError);
  // The dtype decides which profile a row joins (BF16 prices, FP8 ratio): an unknown one is an
  // error naming the column, not a row silently read as BF16.
  const std::string bad_dtype =
      dir.write("dtype.csv", std::string(kHeader) + "G,k,fwd,1024,1024,full,1,16,16,128,int8,1,0,measured,x\n");
  try {
    CostModel::from_profile(bad_dtype, h100());
    FAIL() << "no exception";
  } catch (const scenario::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("column 'dtype': expected bf16, fp16 or fp8 (fp8-<recipe>), got 'int8'"),
              std::string::npos) << e.what();
    EXPECT_EQ(e.line(), 2);
  }
  const std::string no_column = dir.write("col.csv", "gpu,kernel\nG,k\n");
  EXPECT_THROW(CostModel::from_profile(no_column, h100()), scenario::InputError);
  EXPECT_THROW(CostModel::from_profile(dir.path.string() + "/missing.csv", h100()),
               scenario::InputError);
}

TEST(Profile, MakeAutoPicksTheBundledProfileOfTheGpu) {
  for (const char* name : {"H100-SXM", "H800-SXM", "H200-SXM"}) {
    scenario::GpuSpec g = h100();
    g.name = name;
    const auto m = CostModel::make("auto", g);
    EXPECT_NE(m->describe().find("h100-fa3-published.csv"), std::string::npos) << name;
    EXPECT_NE(m->attention(call(8192, 8192, 32, 128)).source, CostSource::Roofline) << name;
  }
  EXPECT_NE(CostModel::make("auto", a100())->describe().find("a100-fa2-published.csv"), std::string::npos);
  EXPECT_EQ(CostModel::make("none", h100())->describe().rfind("roofline", 0), 0u);
  EXPECT_NE(CostModel::make(published_h100(), a100())->describe().find("profile "),
            std::string::npos);
}

TEST(Profile, MakeAutoPrefersAMeasuredProfile) {
  TempDir dir;
  dir.write(
      "kernels/profiles/h100-fa3-published.csv",
      std::string(kHeader) + "H100,k,fwd,1024,1024,full,1,16,16,128,bf16,100,0,published,x\n");
  dir.write("kernels/profiles/h100-fa3-measured.csv",
            std::string(kHeader) + "H100,k,fwd,1024,1024,full,1,16,16,128,bf16,50,0,measured,x\n");
  const char* old = std::getenv("CPSIM_DATA_DIR");
  const std::string saved = old ? old : "";
  setenv("CPSIM_DATA_DIR", dir.path.c_str(), 1);
  const auto h = CostModel::make("auto", h100());
  scenario::GpuSpec h200 = h100();
  h200.name = "H200-SXM";
  const auto g = CostModel::make("auto", h200);  // an H100 measurement is not an H200 one
  if (old) {
    setenv("CPSIM_DATA_DIR", saved.c_str(), 1);
  } else {
    unsetenv("CPSIM_DATA_DIR");
  }
  const model::Cost c = h->attention(call(1024, 1024, 16, 128));
  EXPECT_EQ(c.source, CostSource::Measured);
  EXPECT_NEAR(c.time_s, 50e-6, 1e-12);
  EXPECT_NE(g->attention(call(1024, 1024, 16, 128)).source, CostSource::Roofline);
}

}  // namespace

}  // namespace CPSIM_TEST_TU
