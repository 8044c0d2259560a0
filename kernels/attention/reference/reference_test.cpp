// The CPU reference against first principles: closed forms, the ring decomposition (split keys
// and merge), document masks as separate sequences, GQA as replicated heads, finite-difference
// gradients; and the shared helpers (pair counting, shape lists).
#include "attention/reference/reference.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "attention/common/attention.hpp"
#include "attention/common/testing.hpp"

using namespace cpsim::kernels;
namespace ref = cpsim::kernels::reference;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> random_vec(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0, 1);
  std::vector<double> x(n);
  for (auto& e : x) e = dist(rng);
  return x;
}

struct Tensors {
  AttnShape s;
  std::vector<double> q, k, v;
  Tensors(AttnShape shape, uint64_t seed) : s(shape) {
    q = random_vec(static_cast<size_t>(s.batch) * s.q_len * s.heads_q * s.head_dim, seed);
    k = random_vec(static_cast<size_t>(s.batch) * s.kv_len * s.heads_kv * s.head_dim, seed + 1);
    v = random_vec(static_cast<size_t>(s.batch) * s.kv_len * s.heads_kv * s.head_dim, seed + 2);
  }
  size_t q_elems() const { return q.size(); }
  size_t lse_elems() const { return static_cast<size_t>(s.batch) * s.heads_q * s.q_len; }
};

void fwd(const AttnShape& s, const MaskSpec& m, const double* q, const double* k, const double* v,
         std::vector<double>& o, std::vector<double>& lse) {
  o.assign(static_cast<size_t>(s.batch) * s.q_len * s.heads_q * s.head_dim, 0);
  lse.assign(static_cast<size_t>(s.batch) * s.heads_q * s.q_len, 0);
  ref::forward<double>(s, m, 0.125, q, k, v, o.data(), lse.data());
}

/// Rows [k0, k0 + n) of a [batch=1, len, heads, dim] tensor.
std::vector<double> rows(const std::vector<double>& x, int heads, int dim, int k0, int n) {
  return {x.begin() + static_cast<long>(k0) * heads * dim,
          x.begin() + static_cast<long>(k0 + n) * heads * dim};
}

TEST(Reference, RoundBf16IsNearestEven) {
  EXPECT_EQ(ref::round_bf16(1.0f), 1.0f);
  EXPECT_EQ(ref::round_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);  // tie: to even
  EXPECT_EQ(ref::round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(ref::round_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -12)),
            1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(ref::round_bf16(-2.5f), -2.5f);
  EXPECT_TRUE(std::isnan(ref::round_bf16(NAN)));
  EXPECT_EQ(ref::round_bf16(INFINITY), INFINITY);
  EXPECT_EQ(ref::from_bf16_bits(ref::to_bf16_bits(3.140625f)), 3.140625f);
}

TEST(Reference, EqualKeysAverageValuesAndLseIsLogCount) {
  AttnShape s{1, 3, 5, 1, 1, 4};
  Tensors t(s, 1);
  for (int j = 0; j < s.kv_len; ++j)
    for (int d = 0; d < 4; ++d) t.k[j * 4 + d] = 0.5;  // every score equal
  std::vector<double> o, lse;
  fwd(s, MaskSpec{}, t.q.data(), t.k.data(), t.v.data(), o, lse);
  for (int i = 0; i < s.q_len; ++i) {
    double qk = 0;
    for (int d = 0; d < 4; ++d) qk += t.q[i * 4 + d] * 0.5;
    EXPECT_NEAR(lse[i], 0.125 * qk + std::log(5.0), 1e-12);
    for (int d = 0; d < 4; ++d) {
      double mean = 0;
      for (int j = 0; j < 5; ++j) mean += t.v[j * 4 + d] / 5;
      EXPECT_NEAR(o[i * 4 + d], mean, 1e-12);
    }
  }
}

TEST(Reference, CausalDiagonalFirstRowCopiesFirstValue) {
  AttnShape s{1, 4, 4, 2, 2, 8};
  Tensors t(s, 2);
  MaskSpec m;
  m.causal = true;
  std::vector<double> o, lse;
  fwd(s, m, t.q.data(), t.k.data(), t.v.data(), o, lse);
  for (int h = 0; h < 2; ++h)
    for (int d = 0; d < 8; ++d) EXPECT_NEAR(o[h * 8 + d], t.v[h * 8 + d], 1e-12);
}

TEST(Reference, SplitKeysAndMergeEqualsWhole) {
  AttnShape s{1, 6, 11, 2, 1, 8};
  Tensors t(s, 3);
  std::vector<double> o, lse;
  fwd(s, MaskSpec{}, t.q.data(), t.k.data(), t.v.data(), o, lse);
  AttnShape a = s, b = s;
  a.kv_len = 4;
  b.kv_len = 7;
  const auto ka = rows(t.k, 1, 8, 0, 4), va = rows(t.v, 1, 8, 0, 4);
  const auto kb = rows(t.k, 1, 8, 4, 7), vb = rows(t.v, 1, 8, 4, 7);
  std::vector<double> oa, la, ob, lb;
  fwd(a, MaskSpec{}, t.q.data(), ka.data(), va.data(), oa, la);
  fwd(b, MaskSpec{}, t.q.data(), kb.data(), vb.data(), ob, lb);
  ref::merge<double>(s, oa.data(), la.data(), ob.data(), lb.data(), oa.data(), la.data());
  for (size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(oa[i], o[i], 1e-12);
  for (size_t i = 0; i < lse.size(); ++i) EXPECT_NEAR(la[i], lse[i], 1e-12);
}

// A causal sequence split into N blocks, as ring attention computes it: rank r merges its
// diagonal block (causal) with every earlier block (causal offset: fully visible). Zig-zag
// pairs use the same kernels with other offsets; the decomposition must not care.
TEST(Reference, RingStepsReproduceCausalAttention) {
  const int n = 4, a = 5, len = n * a, heads = 2, dim = 8;
  AttnShape whole{1, len, len, heads, heads, dim};
  Tensors t(whole, 4);
  MaskSpec causal;
  causal.causal = true;
  std::vector<double> o, lse;
  fwd(whole, causal, t.q.data(), t.k.data(), t.v.data(), o, lse);
  for (int r = 0; r < n; ++r) {
    AttnShape blk{1, a, a, heads, heads, dim};
    const auto qr = rows(t.q, heads, dim, r * a, a);
    std::vector<double> acc_o(qr.size(), 0), acc_lse(static_cast<size_t>(heads) * a, -kInf);
    for (int step = 0; step < n; ++step) {
      const int src = (r - step + n) % n;  // the block visiting rank r at this step
      MaskSpec m;
      m.causal = true;
      m.q_offset = static_cast<int64_t>(r) * a;
      m.k_offset = static_cast<int64_t>(src) * a;
      const auto ks = rows(t.k, heads, dim, src * a, a), vs = rows(t.v, heads, dim, src * a, a);
      std::vector<double> ob, lb;
      fwd(blk, m, qr.data(), ks.data(), vs.data(), ob, lb);
      ref::merge<double>(blk, acc_o.data(), acc_lse.data(), ob.data(), lb.data(), acc_o.data(),
                         acc_lse.data());
    }
    for (int i = 0; i < a; ++i)
      for (int h = 0; h < heads; ++h) {
        EXPECT_NEAR(acc_lse[h * a + i], lse[h * len + r * a + i], 1e-12);
        for (int d = 0; d < dim; ++d) {
          EXPECT_NEAR(acc_o[(i * heads + h) * dim + d], o[((r * a + i) * heads + h) * dim + d],
                      1e-12);
        }
      }
  }
}

TEST(Reference, DocumentMaskEqualsSeparateDocuments) {
  const int len = 12, dim = 4;
  AttnShape s{1, len, len, 1, 1, dim};
  Tensors t(s, 5);
  const std::vector<int32_t> docs = {0, 0, 0, 0, 0, 1, 1, 1, 3, 3, 3, 3};
  MaskSpec m;
  m.causal = true;
  m.q_doc = docs.data();
  m.k_doc = docs.data();
  std::vector<double> o, lse;
  fwd(s, m, t.q.data(), t.k.data(), t.v.data(), o, lse);
  const int starts[] = {0, 5, 8, 12};
  for (int d = 0; d < 3; ++d) {
    const int b = starts[d], n = starts[d + 1] - b;
    AttnShape ds{1, n, n, 1, 1, dim};
    MaskSpec c;
    c.causal = true;
    const auto q = rows(t.q, 1, dim, b, n), k = rows(t.k, 1, dim, b, n),
               v = rows(t.v, 1, dim, b, n);
    std::vector<double> od, ld;
    fwd(ds, c, q.data(), k.data(), v.data(), od, ld);
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(ld[i], lse[b + i], 1e-12);
      for (int e = 0; e < dim; ++e) EXPECT_NEAR(od[i * dim + e], o[(b + i) * dim + e], 1e-12);
    }
  }
}

TEST(Reference, RowsWithoutKeysGiveZeroAndMinusInfinity) {
  AttnShape s{1, 3, 4, 1, 1, 4};
  Tensors t(s, 6);
  MaskSpec m;
  m.causal = true;
  m.q_offset = 0;
  m.k_offset = 2;  // query 0 and 1 see no key, query 2 sees key 0
  std::vector<double> o, lse;
  fwd(s, m, t.q.data(), t.k.data(), t.v.data(), o, lse);
  EXPECT_EQ(lse[0], -kInf);
  EXPECT_EQ(lse[1], -kInf);
  EXPECT_TRUE(std::isfinite(lse[2]));
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(o[d], 0.0);
    EXPECT_NEAR(o[8 + d], t.v[d], 1e-12);
  }
  // Merging with an empty partial result is the identity.
  std::vector<double> o2 = o, l2 = lse;
  ref::merge<double>(s, o.data(), lse.data(), o2.data(), l2.data(), o2.data(), l2.data());
  EXPECT_EQ(l2[0], -kInf);
  EXPECT_NEAR(l2[2], lse[2] + std::log(2.0), 1e-12);
  for (int d = 0; d < 4; ++d) EXPECT_NEAR(o2[8 + d], o[8 + d], 1e-12);
}

TEST(Reference, GqaEqualsReplicatedKeyValueHeads) {
  AttnShape g{1, 5, 7, 4, 2, 8}, r = g;
  r.heads_kv = 4;
  Tensors t(g, 7);
  // Replicate: query head h reads kv head h / 2.
  std::vector<double> kr(static_cast<size_t>(7) * 4 * 8), vr(kr.size());
  for (int j = 0; j < 7; ++j)
    for (int h = 0; h < 4; ++h)
      for (int d = 0; d < 8; ++d) {
        kr[(j * 4 + h) * 8 + d] = t.k[(j * 2 + h / 2) * 8 + d];
        vr[(j * 4 + h) * 8 + d] = t.v[(j * 2 + h / 2) * 8 + d];
      }
  MaskSpec m;
  m.causal = true;
  m.q_offset = 2;
  std::vector<double> og, lg, orr, lr;
  fwd(g, m, t.q.data(), t.k.data(), t.v.data(), og, lg);
  fwd(r, m, t.q.data(), kr.data(), vr.data(), orr, lr);
  for (size_t i = 0; i < og.size(); ++i) EXPECT_NEAR(og[i], orr[i], 1e-12);
  // Backward: GQA dK is the sum of the replicated heads' dK.
  const auto dout = random_vec(og.size(), 70);
  std::vector<double> dq(og.size()), dk(t.k.size()), dv(t.v.size());
  std::vector<double> dqr(og.size()), dkr(kr.size()), dvr(vr.size());
  ref::backward<double>(g, m, 0.125, t.q.data(), t.k.data(), t.v.data(), og.data(), lg.data(),
                        dout.data(), dq.data(), dk.data(), dv.data());
  ref::backward<double>(r, m, 0.125, t.q.data(), kr.data(), vr.data(), orr.data(), lr.data(),
                        dout.data(), dqr.data(), dkr.data(), dvr.data());
  for (size_t i = 0; i < dq.size(); ++i) EXPECT_NEAR(dq[i], dqr[i], 1e-12);
  for (int j = 0; j < 7; ++j)
    for (int hk = 0; hk < 2; ++hk)
      for (int d = 0; d < 8; ++d) {
        const double sum_k = dkr[(j * 4 + 2 * hk) * 8 + d] + dkr[(j * 4 + 2 * hk + 1) * 8 + d];
        const double sum_v = dvr[(j * 4 + 2 * hk) * 8 + d] + dvr[(j * 4 + 2 * hk + 1) * 8 + d];
        EXPECT_NEAR(dk[(j * 2 + hk) * 8 + d], sum_k, 1e-12);
        EXPECT_NEAR(dv[(j * 2 + hk) * 8 + d], sum_v, 1e-12);
      }
}

// d/dx sum(o * dout) by central differences, for x in q, k, v, under a document + causal mask.
TEST(Reference, BackwardMatchesFiniteDifferences) {
  AttnShape s{1, 6, 8, 2, 1, 4};
  Tensors t(s, 8);
  const std::vector<int32_t> qd = {0, 0, 1, 1, 1, 1}, kd = {0, 0, 0, 1, 1, 1, 1, 1};
  MaskSpec m;
  m.causal = true;
  m.q_offset = 2;
  m.q_doc = qd.data();
  m.k_doc = kd.data();
  std::vector<double> o, lse;
  fwd(s, m, t.q.data(), t.k.data(), t.v.data(), o, lse);
  const auto dout = random_vec(o.size(), 80);
  std::vector<double> dq(t.q.size()), dk(t.k.size()), dv(t.v.size());
  ref::backward<double>(s, m, 0.125, t.q.data(), t.k.data(), t.v.data(), o.data(), lse.data(),
                        dout.data(), dq.data(), dk.data(), dv.data());
  auto loss = [&]() {
    std::vector<double> oo, ll;
    fwd(s, m, t.q.data(), t.k.data(), t.v.data(), oo, ll);
    double l = 0;
    for (size_t i = 0; i < oo.size(); ++i) l += oo[i] * dout[i];
    return l;
  };
  const double h = 1e-6;
  for (auto [x, grad] : {std::pair{&t.q, &dq}, {&t.k, &dk}, {&t.v, &dv}}) {
    for (size_t i = 0; i < x->size(); ++i) {
      const double keep = (*x)[i];
      (*x)[i] = keep + h;
      const double up = loss();
      (*x)[i] = keep - h;
      const double down = loss();
      (*x)[i] = keep;
      EXPECT_NEAR((*grad)[i], (up - down) / (2 * h), 1e-7) << i;
    }
  }
}

TEST(Reference, NaiveBf16ErrorIsOfBf16Size) {
  test_support::Problem p =
      test_support::make_problem(AttnShape{1, 40, 60, 2, 1, 64}, MaskKind::Causal, BenchShape{}, 9);
  const test_support::Oracle r = test_support::make_oracle(p, true);
  const double o_err = test_support::max_abs_diff(r.o_naive, r.o);
  EXPECT_GT(o_err, 1e-4);
  EXPECT_LT(o_err, 4 * std::ldexp(test_support::max_abs(r.o), -8));
  for (auto [naive, exact] :
       {std::pair{&r.dq_naive, &r.dq}, {&r.dk_naive, &r.dk}, {&r.dv_naive, &r.dv}}) {
    const double err = test_support::max_abs_diff(*naive, *exact);
    EXPECT_GT(err, 0.0);
    EXPECT_LT(err, 0.05 * test_support::max_abs(*exact));
  }
  // The fp32 reference agrees with the double one far below BF16 resolution.
  std::vector<double> q(p.q.begin(), p.q.end()), k(p.k.begin(), p.k.end()),
      v(p.v.begin(), p.v.end());
  std::vector<double> o(p.q.size()), lse(static_cast<size_t>(p.lse_elems()));
  ref::forward<double>(p.shape, p.mask(), p.scale, q.data(), k.data(), v.data(), o.data(),
                       lse.data());
  for (size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(r.o[i], o[i], 1e-5);
}

TEST(Pairs, CountsMatchTheDefinition) {
  const AttnShape s{2, 37, 53, 1, 1, 8};
  std::vector<int32_t> qd, kd;
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 37; ++i) qd.push_back(static_cast<int32_t>((20 + i) / 9));
    for (int j = 0; j < 53; ++j) kd.push_back(static_cast<int32_t>(j / 9));
  }
  for (int variant = 0; variant < 4; ++variant) {
    MaskSpec m;
    m.causal = variant >= 1;
    m.q_offset = variant >= 2 ? 20 : 0;
    if (variant == 3) {
      m.q_doc = qd.data();
      m.k_doc = kd.data();
    }
    int64_t brute = 0;
    for (int b = 0; b < 2; ++b)
      for (int i = 0; i < 37; ++i)
        for (int j = 0; j < 53; ++j) brute += ref::allowed(s, m, b, i, j);
    EXPECT_EQ(count_pairs(s, m), brute) << "variant " << variant;
  }
  MaskSpec causal;
  causal.causal = true;
  EXPECT_EQ(count_pairs(AttnShape{1, 8192, 8192, 1, 1, 128}, causal), 8192LL * 8193 / 2);
  EXPECT_DOUBLE_EQ(attention_flops(AttnShape{1, 8, 8, 24, 4, 256}, 64, false), 4.0 * 64 * 24 * 256);
  EXPECT_DOUBLE_EQ(attention_flops(AttnShape{1, 8, 8, 24, 4, 256}, 64, true), 10.0 * 64 * 24 * 256);
}

TEST(Pairs, RejectsDecreasingDocumentIds) {
  const std::vector<int32_t> bad = {0, 1, 0};
  MaskSpec m;
  m.q_doc = bad.data();
  m.k_doc = bad.data();
  EXPECT_THROW(count_pairs(AttnShape{1, 3, 3, 1, 1, 8}, m), std::invalid_argument);
}

TEST(ShapeList, BundledListParses) {
  const auto shapes = load_shape_list(std::string(CPSIM_KERNELS_DIR) + "/attention/shapes.csv");
  ASSERT_FALSE(shapes.empty());
  bool anchor = false;
  for (const auto& s : shapes) {
    if (s.q_len == 16384 && s.kv_len == 16384 && s.heads_q == 24 && s.heads_kv == 4 &&
        s.head_dim == 256) {
      anchor = true;
    }
  }
  EXPECT_TRUE(anchor) << "the anchor model's ring step must be in the default shape list";
}

TEST(ShapeList, BadInputNamesFileLineAndColumn) {
  const std::string header =
      "q_len,kv_len,mask,heads_q,heads_kv,head_dim,q_offset,k_offset,doc_len,note\n";
  try {
    parse_shape_list(header + "1024,1024,causal,8,8,128,0,0,0,ok\n1024,x,full,8,8,128,0,0,0,bad\n",
                     "s.csv");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "s.csv:3: error: column 'kv_len': 'x' is not an integer");
  }
  try {
    parse_shape_list(header + "1024,1024,diagonal,8,8,128,0,0,0,\n", "s.csv");
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(),
                 "s.csv:2: error: column 'mask': unknown mask 'diagonal' (expected "
                 "full, causal, document or causal-offset)");
  }
  EXPECT_THROW(parse_shape_list(header + "64,64,full,6,4,128,0,0,0,\n", "s.csv"),
               std::runtime_error);
  EXPECT_THROW(parse_shape_list("q_len,kv_len\n", "s.csv"), std::runtime_error);
}

TEST(ProfileRow, FormatsTheCsvColumns) {
  ProfileRow r;
  r.gpu = "H100-SXM";
  r.kernel = "flash2";
  r.direction = "fwd";
  r.q_len = 8192;
  r.kv_len = 8192;
  r.mask = "causal";
  r.unmasked_fraction = 0.5000610;
  r.heads_q = 32;
  r.heads_kv = 8;
  r.head_dim = 128;
  r.time_us = 1234.5;
  r.tflops = 445.6;
  r.source = "measured";
  r.commit = "abc123";
  EXPECT_EQ(format_profile_row(r),
            "H100-SXM,flash2,fwd,8192,8192,causal,0.500061,32,8,128,bf16,1234.500,445.60,"
            "measured,abc123");
  std::istringstream header(profile_csv_header());
  int columns = 0;
  for (std::string c; std::getline(header, c, ',');) ++columns;
  EXPECT_EQ(columns, 15);
}

}  // namespace
