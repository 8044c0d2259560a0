#pragma once
/// Test support shared by the reference, emulator and GPU tests: random BF16 problems, the
/// exact and naive-BF16 oracles, and FlashAttention's error rule. Header-only; needs GoogleTest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../reference/reference.hpp"
#include "attention.hpp"

namespace cpsim::kernels::test_support {

/// A random attention problem with BF16-representable inputs (normal(0, 1), rounded).
struct Problem {
  AttnShape shape;
  MaskKind kind = MaskKind::Full;
  BenchShape bench;  ///< mask parameters (offsets, document length)
  double scale = 0;
  std::vector<int32_t> q_doc, k_doc;
  std::vector<float> q, k, v, dout;

  /// Host mask spec pointing into this problem's document ids (rebuild after a copy).
  MaskSpec mask() const {
    MaskSpec m;
    m.causal = kind != MaskKind::Full;
    if (kind == MaskKind::CausalOffset || kind == MaskKind::Document) {
      m.q_offset = bench.q_offset;
      m.k_offset = bench.k_offset;
    }
    if (kind == MaskKind::Document) {
      m.q_doc = q_doc.data();
      m.k_doc = k_doc.data();
    }
    return m;
  }
  int64_t q_elems() const {
    return static_cast<int64_t>(shape.batch) * shape.q_len * shape.heads_q * shape.head_dim;
  }
  int64_t kv_elems() const {
    return static_cast<int64_t>(shape.batch) * shape.kv_len * shape.heads_kv * shape.head_dim;
  }
  int64_t lse_elems() const {
    return static_cast<int64_t>(shape.batch) * shape.heads_q * shape.q_len;
  }
};

inline std::vector<float> random_bf16(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& e : x) e = reference::round_bf16(dist(rng));
  return x;
}

/// `kind` with offsets / document length from `mask_args` (its q_len etc. are ignored).
inline Problem make_problem(const AttnShape& shape, MaskKind kind, const BenchShape& mask_args,
                            uint64_t seed) {
  Problem p;
  p.shape = shape;
  p.kind = kind;
  p.bench = mask_args;
  p.bench.q_len = shape.q_len;
  p.bench.kv_len = shape.kv_len;
  p.bench.heads_q = shape.heads_q;
  p.bench.heads_kv = shape.heads_kv;
  p.bench.head_dim = shape.head_dim;
  p.bench.mask = kind;
  p.scale = 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  if (kind == MaskKind::Document) {
    HostMask hm;
    make_mask(p.bench, shape.batch, hm);
    p.q_doc = hm.q_doc;
    p.k_doc = hm.k_doc;
  }
  std::mt19937_64 rng(seed);
  p.q = random_bf16(p.q_elems(), rng);
  p.k = random_bf16(p.kv_elems(), rng);
  p.v = random_bf16(p.kv_elems(), rng);
  p.dout = random_bf16(p.q_elems(), rng);
  return p;
}

inline std::vector<uint16_t> to_bits(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = reference::to_bf16_bits(x[i]);
  return out;
}
inline std::vector<float> from_bits(const std::vector<uint16_t>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = reference::from_bf16_bits(x[i]);
  return out;
}

/// max |a - b|; equal infinities count as 0, NaN or an unequal infinity as +inf.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!std::isfinite(d)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, d);
  }
  return worst;
}
inline double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float x : a) {
    if (std::isfinite(x)) m = std::max(m, static_cast<double>(std::fabs(x)));
  }
  return m;
}

/// Exact (fp32) and naive-BF16 results of a problem.
struct Oracle {
  std::vector<float> o, lse, dq, dk, dv;  // exact
  std::vector<float> o_naive, lse_naive, dq_naive, dk_naive, dv_naive;
};

inline Oracle make_oracle(const Problem& p, bool backward) {
  Oracle r;
  const MaskSpec m = p.mask();
  r.o.resize(p.q_elems());
  r.lse.resize(p.lse_elems());
  r.o_naive.resize(p.q_elems());
  r.lse_naive.resize(p.lse_elems());
  reference::forward<float>(p.shape, m, p.scale, p.q.data(), p.k.data(), p.v.data(), r.o.data(),
                            r.lse.data());
  reference::forward_bf16_naive(p.shape, m, p.scale, p.q.data(), p.k.data(), p.v.data(),
                                r.o_naive.data(), r.lse_naive.data());
  if (backward) {
    r.dq.resize(p.q_elems());
    r.dk.resize(p.kv_elems());
    r.dv.resize(p.kv_elems());
    r.dq_naive.resize(p.q_elems());
    r.dk_naive.resize(p.kv_elems());
    r.dv_naive.resize(p.kv_elems());
    reference::backward<float>(p.shape, m, p.scale, p.q.data(), p.k.data(), p.v.data(), r.o.data(),
                               r.lse.data(), p.dout.data(), r.dq.data(), r.dk.data(), r.dv.data());
    reference::backward_bf16_naive(p.shape, m, p.scale, p.q.data(), p.k.data(), p.v.data(),
                                   p.dout.data(), r.dq_naive.data(), r.dk_naive.data(),
                                   r.dv_naive.data());
  }
  return r;
}

/// FlashAttention's rule: max|got - exact| <= rtol x max|naive - exact| + atol, with atol half
/// a BF16 ulp of the largest exact magnitude (2^-9 relative) unless given. With the environment
/// variable CPSIM_KERNELS_VERBOSE set, passing checks print their figures too.
inline ::testing::AssertionResult flash_rule(const std::string& what, const std::vector<float>& got,
                                             const std::vector<float>& exact,
                                             const std::vector<float>& naive, double rtol = 2.0,
                                             double atol = -1) {
  if (got.size() != exact.size()) {
    return ::testing::AssertionFailure()
           << what << ": size " << got.size() << " vs " << exact.size();
  }
  if (atol < 0) atol = std::ldexp(max_abs(exact), -9);
  const double err = max_abs_diff(got, exact);
  const double base = max_abs_diff(naive, exact);
  std::ostringstream msg;
  msg << what << ": kernel error " << err << ", naive BF16 error " << base << ", bound "
      << rtol * base + atol << " (rtol " << rtol << ", atol " << atol << ")";
  if (err <= rtol * base + atol) {
    if (std::getenv("CPSIM_KERNELS_VERBOSE")) std::printf("  %s\n", msg.str().c_str());
    return ::testing::AssertionSuccess() << msg.str();
  }
  size_t worst = 0;
  double wd = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = got[i] == exact[i] ? 0 : std::fabs(static_cast<double>(got[i]) - exact[i]);
    if (!(d <= wd)) {
      wd = d;
      worst = i;
    }
  }
  msg << "; worst at flat index " << worst << ": got " << got[worst] << ", exact " << exact[worst];
  return ::testing::AssertionFailure() << msg.str();
}

}  // namespace cpsim::kernels::test_support
