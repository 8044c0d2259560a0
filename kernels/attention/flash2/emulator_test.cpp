// The flash2 kernel bodies on the CPU emulator, against the CPU reference with
// FlashAttention's error rule: tensor-core fragment layouts, swizzles, masks, GQA, ragged
// tiles, the online softmax and the cp.async pipeline, tested without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention/common/testing.hpp"
#include "attention/flash2/emulate.hpp"
#include "attention/flash2/simt.hpp"

using namespace cpsim::kernels;
using flash2::emu::CopyTiming;
using flash2::emu::Span;

namespace {

template <class T>
Span ro(const std::vector<T>& v) {
  return Span{v.data(), v.size() * sizeof(T), false};
}
template <class T>
Span rw(std::vector<T>& v) {
  return Span{v.data(), v.size() * sizeof(T), true};
}

// ---------------------------------------------------------------------------------------------
// warp_gemm: one warp multiplies swizzled shared tiles in each operand layout.

template <bool A_T, bool B_T>
void check_warp_gemm() {
  constexpr int M = 32, N = 32, K = 64, MT = 2, NT = 4;  // A row length K or M; B N or K
  constexpr int AROW = A_T ? 64 : K, BROW = B_T ? 64 : K;
  std::mt19937_64 rng(7);
  const std::vector<float> a = test_support::random_bf16(M * K, rng),
                           b = test_support::random_bf16(K * N, rng);
  const std::vector<uint16_t> a_bits = test_support::to_bits(a), b_bits = test_support::to_bits(b);
  std::vector<float> c(static_cast<size_t>(M) * N, 0.f);
  flash2::emu::LaunchConfig cfg;
  cfg.threads = 32;
  constexpr int kARows = A_T ? K : M, kBRows = B_T ? K : N;
  cfg.smem_bytes = 2 * (kARows * AROW + kBRows * BROW);
  flash2::emu::run(cfg, {ro(a_bits), ro(b_bits), rw(c)}, [&](flash2::emu::Lane& dev) {
    auto* sA = reinterpret_cast<uint16_t*>(dev.smem());
    uint16_t* sB = sA + kARows * AROW;
    if (dev.thread() == 0) {
      for (int m = 0; m < M; ++m)
        for (int k = 0; k < K; ++k) {
          const uint16_t x = a_bits[m * K + k];
          if (A_T)
            sA[flash2::swz<AROW>(k, m)] = x;
          else
            sA[flash2::swz<AROW>(m, k)] = x;
        }
      for (int k = 0; k < K; ++k)
        for (int n = 0; n < N; ++n) {
          const uint16_t x = b_bits[k * N + n];
          if (B_T)
            sB[flash2::swz<BROW>(k, n)] = x;
          else
            sB[flash2::swz<BROW>(n, k)] = x;
        }
    }
    dev.sync();
    float acc[MT][NT][4];
    flash2::zero(acc);
    // Two column halves, to exercise n0 and the k offsets too.
    for (int half = 0; half < N / (8 * NT); ++half) {
      flash2::zero(acc);
      flash2::warp_gemm<MT, NT, K / 32, A_T, B_T, AROW, BROW>(dev, acc, sA, 0, 0, sB, half * 8 * NT,
                                                              0);
      flash2::warp_gemm<MT, NT, K / 32, A_T, B_T, AROW, BROW>(dev, acc, sA, 0, K / 2, sB,
                                                              half * 8 * NT, K / 2);
      const int l = dev.thread(), g = l / 4, t = l % 4;
      for (int mt = 0; mt < MT; ++mt)
        for (int nt = 0; nt < NT; ++nt)
          for (int e = 0; e < 4; ++e) {
            const int r = mt * 16 + g + (e / 2) * 8, col = half * 8 * NT + nt * 8 + 2 * t + e % 2;
            dev.store_f32(&c[r * N + col], acc[mt][nt][e]);
          }
    }
  });
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double want = 0;
      for (int k = 0; k < K; ++k) want += static_cast<double>(a[m * K + k]) * b[k * N + n];
      ASSERT_NEAR(c[m * N + n], want, 1e-4 * (1 + std::fabs(want))) << "m " << m << " n " << n;
    }
}

TEST(Flash2Emulator, WarpGemmRowCol) { check_warp_gemm<false, false>(); }
TEST(Flash2Emulator, WarpGemmTransposedA) { check_warp_gemm<true, false>(); }
TEST(Flash2Emulator, WarpGemmTransposedB) { check_warp_gemm<false, true>(); }
TEST(Flash2Emulator, WarpGemmBothTransposed) { check_warp_gemm<true, true>(); }

// ---------------------------------------------------------------------------------------------
// Forward and backward against the reference.

struct Case {
  const char* name;
  AttnShape shape;
  MaskKind mask;
  int64_t q_offset, k_offset;
  int doc_len;
  CopyTiming timing;
  int kv_split = 0;  ///< backward: CTAs per key tile of a GQA group (0: the launcher's choice)
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

/// Runs forward (and backward) on the emulator; returns BF16 outputs as floats.
struct Outputs {
  std::vector<float> o, lse, dq, dk, dv;
};

Outputs run_emulated(const test_support::Problem& p, bool backward, CopyTiming timing,
                     int kv_split = 0) {
  const AttnShape& s = p.shape;
  const std::vector<uint16_t> q = test_support::to_bits(p.q), k = test_support::to_bits(p.k),
                              v = test_support::to_bits(p.v), dout = test_support::to_bits(p.dout);
  std::vector<uint16_t> o(p.q_elems());
  std::vector<float> lse(p.lse_elems());
  std::vector<Span> mem = {ro(q), ro(k), ro(v), rw(o), rw(lse), ro(p.q_doc), ro(p.k_doc)};
  flash2::ForwardArgs fa;
  fa.shape = s;
  fa.mask = p.mask();
  fa.scale = static_cast<float>(p.scale);
  fa.q = flash2::contiguous(q.data(), s.q_len, s.heads_q, s.head_dim);
  fa.k = flash2::contiguous(k.data(), s.kv_len, s.heads_kv, s.head_dim);
  fa.v = flash2::contiguous(v.data(), s.kv_len, s.heads_kv, s.head_dim);
  fa.o = flash2::contiguous(o.data(), s.q_len, s.heads_q, s.head_dim);
  fa.lse = lse.data();
  flash2::emulate::forward(fa, mem, timing);
  Outputs r;
  r.o = test_support::from_bits(o);
  r.lse = lse;
  if (!backward) return r;

  std::vector<uint16_t> dq(p.q_elems()), dk(p.kv_elems()), dv(p.kv_elems());
  std::vector<float> ws(flash2::backward_workspace_bytes(s) / sizeof(float) + 1);
  std::vector<Span> bmem = {ro(q),  ro(k),  ro(v),  ro(o),  ro(lse),     ro(dout),
                            rw(dq), rw(dk), rw(dv), rw(ws), ro(p.q_doc), ro(p.k_doc)};
  flash2::BackwardArgs ba;
  ba.shape = s;
  ba.mask = p.mask();
  ba.scale = static_cast<float>(p.scale);
  ba.q = fa.q;
  ba.k = fa.k;
  ba.v = fa.v;
  ba.o = flash2::contiguous(o.data(), s.q_len, s.heads_q, s.head_dim);
  ba.dout = flash2::contiguous(dout.data(), s.q_len, s.heads_q, s.head_dim);
  ba.dq = flash2::contiguous(dq.data(), s.q_len, s.heads_q, s.head_dim);
  ba.dk = flash2::contiguous(dk.data(), s.kv_len, s.heads_kv, s.head_dim);
  ba.dv = flash2::contiguous(dv.data(), s.kv_len, s.heads_kv, s.head_dim);
  ba.lse = lse.data();
  ba.workspace = ws.data();
  ba.kv_split = kv_split;
  flash2::emulate::backward(ba, bmem, timing);
  r.dq = test_support::from_bits(dq);
  r.dk = test_support::from_bits(dk);
  r.dv = test_support::from_bits(dv);
  return r;
}

test_support::Problem problem_of(const Case& c) {
  BenchShape args;
  args.q_offset = c.q_offset;
  args.k_offset = c.k_offset;
  args.doc_len = c.doc_len;
  return test_support::make_problem(c.shape, c.mask, args, 1234);
}

class Flash2EmulatedForward : public ::testing::TestWithParam<Case> {};
class Flash2EmulatedBackward : public ::testing::TestWithParam<Case> {};

TEST_P(Flash2EmulatedForward, MatchesReference) {
  const Case& c = GetParam();
  const test_support::Problem p = problem_of(c);
  const test_support::Oracle ref = test_support::make_oracle(p, false);
  const Outputs r = run_emulated(p, false, c.timing);
  EXPECT_TRUE(test_support::flash_rule("o", r.o, ref.o, ref.o_naive));
  EXPECT_TRUE(test_support::flash_rule("lse", r.lse, ref.lse, ref.lse_naive, 2.0, 1e-4));
}

TEST_P(Flash2EmulatedBackward, MatchesReference) {
  const Case& c = GetParam();
  const test_support::Problem p = problem_of(c);
  const test_support::Oracle ref = test_support::make_oracle(p, true);
  const Outputs r = run_emulated(p, true, c.timing, c.kv_split);
  EXPECT_TRUE(test_support::flash_rule("o", r.o, ref.o, ref.o_naive));
  EXPECT_TRUE(test_support::flash_rule("dq", r.dq, ref.dq, ref.dq_naive));
  EXPECT_TRUE(test_support::flash_rule("dk", r.dk, ref.dk, ref.dk_naive));
  EXPECT_TRUE(test_support::flash_rule("dv", r.dv, ref.dv, ref.dv_naive));
}

// Small shapes (the emulator runs about a million warp operations per second), chosen so that
// every head dim sees several query and key tiles, ragged ends, GQA and each mask kind.
const Case kForwardCases[] = {
    {"d64_full_gqa", {1, 200, 150, 2, 1, 64}, MaskKind::Full, 0, 0, 0, CopyTiming::Deferred},
    {"d64_causal_eager", {1, 140, 140, 1, 1, 64}, MaskKind::Causal, 0, 0, 0, CopyTiming::Eager},
    // Tiles that the causal mask leaves whole but a document boundary cuts (no ragged tiles).
    {"d64_document_aligned",
     {1, 256, 256, 1, 1, 64},
     MaskKind::Document,
     0,
     0,
     100,
     CopyTiming::Deferred},
    {"d128_causal_offset",
     {1, 130, 190, 2, 1, 128},
     MaskKind::CausalOffset,
     100,
     0,
     0,
     CopyTiming::Deferred},
    {"d128_document_batch2",
     {2, 136, 136, 1, 1, 128},
     MaskKind::Document,
     0,
     0,
     40,
     CopyTiming::Deferred},
    {"d128_empty_rows",
     {1, 72, 100, 1, 1, 128},
     MaskKind::CausalOffset,
     0,
     40,
     0,
     CopyTiming::Eager},
    {"d256_full", {1, 40, 130, 1, 1, 256}, MaskKind::Full, 0, 0, 0, CopyTiming::Deferred},
    {"d256_causal_gqa_eager",
     {1, 136, 136, 2, 1, 256},
     MaskKind::Causal,
     0,
     0,
     0,
     CopyTiming::Eager},
};
INSTANTIATE_TEST_SUITE_P(Cases, Flash2EmulatedForward, ::testing::ValuesIn(kForwardCases),
                         [](const auto& info) { return std::string(info.param.name); });

// GQA: kv_split 1 keeps a whole group in one CTA; 0 lets the launcher split these small
// grids across CTAs (dK, dV then meet through FP32 atomics).
const Case kBackwardCases[] = {
    {"d64_causal_gqa_one_cta",
     {1, 136, 150, 2, 1, 64},
     MaskKind::Causal,
     0,
     0,
     0,
     CopyTiming::Deferred,
     1},
    {"d128_gqa4_split2", {1, 72, 140, 4, 1, 128}, MaskKind::Full, 0, 0, 0, CopyTiming::Eager, 2},
    {"d64_document_aligned_eager",
     {1, 256, 256, 1, 1, 64},
     MaskKind::Document,
     0,
     0,
     100,
     CopyTiming::Eager},
    {"d128_full", {1, 70, 140, 1, 1, 128}, MaskKind::Full, 0, 0, 0, CopyTiming::Deferred},
    {"d128_causal_offset_empty_rows",
     {1, 80, 136, 2, 2, 128},
     MaskKind::CausalOffset,
     30,
     60,
     0,
     CopyTiming::Eager},
    {"d256_causal_gqa_auto_split",
     {1, 72, 72, 2, 1, 256},
     MaskKind::Causal,
     0,
     0,
     0,
     CopyTiming::Deferred},
    {"d256_offset_batch2",
     {2, 40, 70, 1, 1, 256},
     MaskKind::CausalOffset,
     40,
     0,
     0,
     CopyTiming::Eager},
};
INSTANTIATE_TEST_SUITE_P(Cases, Flash2EmulatedBackward, ::testing::ValuesIn(kBackwardCases),
                         [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------
// Merge.

TEST(Flash2Emulator, MergeMatchesReferenceInPlace) {
  const AttnShape s{2, 37, 0, 3, 3, 64};
  const int64_t n = static_cast<int64_t>(s.batch) * s.q_len * s.heads_q * s.head_dim;
  const int64_t rows = static_cast<int64_t>(s.batch) * s.heads_q * s.q_len;
  std::mt19937_64 rng(3);
  std::vector<float> o1 = test_support::random_bf16(n, rng), o2 = test_support::random_bf16(n, rng);
  std::vector<float> lse1 = test_support::random_bf16(rows, rng),
                     lse2 = test_support::random_bf16(rows, rng);
  lse1[0] = flash2::kNegInf;                         // only the second side saw keys
  lse2[1] = flash2::kNegInf;                         // only the first
  lse1[2] = lse2[2] = flash2::kNegInf;               // neither: o = 0, lse = -inf
  for (int d = 0; d < s.head_dim; ++d) o1[d] = NAN;  // never-written accumulator with weight 0
  std::vector<float> want_o(n), want_lse(rows);
  std::vector<float> o1_clean = o1;
  for (int d = 0; d < s.head_dim; ++d) o1_clean[d] = 0.f;
  reference::merge<float>(s, o1_clean.data(), lse1.data(), o2.data(), lse2.data(), want_o.data(),
                          want_lse.data());
  const std::vector<uint16_t> o2_bits = test_support::to_bits(o2);
  flash2::MergeArgs a;
  a.batch = s.batch;
  a.q_len = s.q_len;
  a.heads = s.heads_q;
  a.head_dim = s.head_dim;
  a.o1 = o1.data();
  a.lse1 = lse1.data();
  a.o2 = o2_bits.data();
  a.lse2 = lse2.data();
  a.o = o1.data();  // in place, as a ring step updates its accumulator
  a.lse = lse1.data();
  flash2::emulate::merge(a, {rw(o1), rw(lse1), ro(o2_bits), ro(lse2)});
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(o1[i], want_o[i], 1e-5) << i;
  for (int64_t i = 0; i < rows; ++i) {
    if (std::isinf(want_lse[i])) {
      EXPECT_EQ(lse1[i], want_lse[i]) << i;
    } else {
      EXPECT_NEAR(lse1[i], want_lse[i], 1e-5) << i;
    }
  }
}

TEST(Flash2Emulator, RejectsUnsupportedHeadDim) {
  flash2::ForwardArgs a;
  a.shape = AttnShape{1, 16, 16, 1, 1, 96};
  EXPECT_THROW(flash2::emulate::forward(a, {}), std::invalid_argument);
}

}  // namespace
