// CPU reference attention: exact (float / double) and naive-BF16 flavours.
#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace cpsim::kernels::reference {

float round_bf16(float x) { return from_bf16_bits(to_bf16_bits(x)); }

uint16_t to_bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  }
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float from_bf16_bits(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

bool allowed(const AttnShape& shape, const MaskSpec& mask, int b, int i, int j) {
  if (i < 0 || i >= shape.q_len || j < 0 || j >= shape.kv_len) return false;
  if (mask.causal && mask.k_offset + j > mask.q_offset + i) return false;
  if (mask.q_doc && mask.q_doc[static_cast<int64_t>(b) * shape.q_len + i] !=
                        mask.k_doc[static_cast<int64_t>(b) * shape.kv_len + j]) {
    return false;
  }
  return true;
}

namespace {

/// Index helpers for the fixed contiguous layouts.
struct Index {
  const AttnShape& s;
  int64_t q(int b, int i, int h) const {
    return ((static_cast<int64_t>(b) * s.q_len + i) * s.heads_q + h) * s.head_dim;
  }
  int64_t k(int b, int j, int h) const {
    return ((static_cast<int64_t>(b) * s.kv_len + j) * s.heads_kv + h) * s.head_dim;
  }
  int64_t lse(int b, int h, int i) const {
    return (static_cast<int64_t>(b) * s.heads_q + h) * s.q_len + i;
  }
  int group() const { return s.heads_q / s.heads_kv; }
};

template <class T>
T dot(const T* a, const T* b, int n) {
  T acc = 0;
  for (int d = 0; d < n; ++d) acc += a[d] * b[d];
  return acc;
}

float dotf(const float* a, const float* b, int n) { return dot<float>(a, b, n); }

}  // namespace

template <class T>
void forward(const AttnShape& shape, const MaskSpec& mask, double scale, const T* q, const T* k,
             const T* v, T* o, T* lse) {
  const Index ix{shape};
  const int D = shape.head_dim;
  const T sc = static_cast<T>(scale);
  std::vector<T> s(static_cast<size_t>(shape.kv_len));
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads_q; ++h) {
      const int hk = h / ix.group();
      for (int i = 0; i < shape.q_len; ++i) {
        const T* qi = q + ix.q(b, i, h);
        T* oi = o + ix.q(b, i, h);
        T m = -std::numeric_limits<T>::infinity();
        for (int j = 0; j < shape.kv_len; ++j) {
          s[j] = allowed(shape, mask, b, i, j) ? sc * dot(qi, k + ix.k(b, j, hk), D)
                                               : -std::numeric_limits<T>::infinity();
          m = std::max(m, s[j]);
        }
        std::fill(oi, oi + D, T(0));
        if (m == -std::numeric_limits<T>::infinity()) {
          lse[ix.lse(b, h, i)] = m;
          continue;
        }
        T l = 0;
        for (int j = 0; j < shape.kv_len; ++j) l += std::exp(s[j] - m);
        const T row_lse = m + std::log(l);
        lse[ix.lse(b, h, i)] = row_lse;
        for (int j = 0; j < shape.kv_len; ++j) {
          if (s[j] == -std::numeric_limits<T>::infinity()) continue;
          const T p = std::exp(s[j] - row_lse);
          const T* vj = v + ix.k(b, j, hk);
          for (int d = 0; d < D; ++d) oi[d] += p * vj[d];
        }
      }
    }
  }
}

template <class T>
void backward(const AttnShape& shape, const MaskSpec& mask, double scale, const T* q, const T* k,
              const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk, T* dv) {
  const Index ix{shape};
  const int D = shape.head_dim;
  const T sc = static_cast<T>(scale);
  std::fill(dq, dq + ix.q(shape.batch, 0, 0), T(0));
  std::fill(dk, dk + ix.k(shape.batch, 0, 0), T(0));
  std::fill(dv, dv + ix.k(shape.batch, 0, 0), T(0));
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads_q; ++h) {
      const int hk = h / ix.group();
      for (int i = 0; i < shape.q_len; ++i) {
        const T row_lse = lse[ix.lse(b, h, i)];
        if (row_lse == -std::numeric_limits<T>::infinity()) continue;
        const T* qi = q + ix.q(b, i, h);
        const T* doi = dout + ix.q(b, i, h);
        T* dqi = dq + ix.q(b, i, h);
        const T d_i = dot(doi, o + ix.q(b, i, h), D);
        for (int j = 0; j < shape.kv_len; ++j) {
          if (!allowed(shape, mask, b, i, j)) continue;
          const T* kj = k + ix.k(b, j, hk);
          const T* vj = v + ix.k(b, j, hk);
          const T p = std::exp(sc * dot(qi, kj, D) - row_lse);
          const T ds = p * (dot(doi, vj, D) - d_i);
          T* dkj = dk + ix.k(b, j, hk);
          T* dvj = dv + ix.k(b, j, hk);
          for (int d = 0; d < D; ++d) {
            dqi[d] += sc * ds * kj[d];
            dkj[d] += sc * ds * qi[d];
            dvj[d] += p * doi[d];
          }
        }
      }
    }
  }
}

template <class T>
void merge(const AttnShape& shape, const T* o1, const T* lse1, const T* o2, const T* lse2, T* o,
           T* lse) {
  const Index ix{shape};
  const int D = shape.head_dim;
  const T ninf = -std::numeric_limits<T>::infinity();
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads_q; ++h) {
      for (int i = 0; i < shape.q_len; ++i) {
        const int64_t li = ix.lse(b, h, i), oi = ix.q(b, i, h);
        const T l1 = lse1[li], l2 = lse2[li];
        const T m = std::max(l1, l2);
        if (m == ninf) {
          std::fill(o + oi, o + oi + D, T(0));
          lse[li] = ninf;
          continue;
        }
        const T w1 = std::exp(l1 - m), w2 = std::exp(l2 - m);
        const T total = w1 + w2;
        for (int d = 0; d < D; ++d) o[oi + d] = (o1[oi + d] * w1 + o2[oi + d] * w2) / total;
        lse[li] = m + std::log(total);
      }
    }
  }
}

template void forward<float>(const AttnShape&, const MaskSpec&, double, const float*, const float*,
                             const float*, float*, float*);
template void forward<double>(const AttnShape&, const MaskSpec&, double, const double*,
                              const double*, const double*, double*, double*);
template void backward<float>(const AttnShape&, const MaskSpec&, double, const float*, const float*,
                              const float*, const float*, const float*, const float*, float*,
                              float*, float*);
template void backward<double>(const AttnShape&, const MaskSpec&, double, const double*,
                               const double*, const double*, const double*, const double*,
                               const double*, double*, double*, double*);
template void merge<float>(const AttnShape&, const float*, const float*, const float*, const float*,
                           float*, float*);
template void merge<double>(const AttnShape&, const double*, const double*, const double*,
                            const double*, double*, double*);

namespace {

/// Naive BF16 probabilities of one query row: p[j] = bf16(softmax(bf16 scores))[j].
struct NaiveRow {
  std::vector<float> p;
  float lse = -std::numeric_limits<float>::infinity();
};

void naive_row(const AttnShape& shape, const MaskSpec& mask, int b, int i, const float* qs,
               const float* k, int hk, NaiveRow& row) {
  const Index ix{shape};
  const int D = shape.head_dim;
  row.p.assign(static_cast<size_t>(shape.kv_len), 0.f);
  std::vector<float> s(static_cast<size_t>(shape.kv_len));
  float m = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < shape.kv_len; ++j) {
    s[j] = allowed(shape, mask, b, i, j) ? round_bf16(dotf(qs, k + ix.k(b, j, hk), D))
                                         : -std::numeric_limits<float>::infinity();
    m = std::max(m, s[j]);
  }
  row.lse = m;
  if (m == -std::numeric_limits<float>::infinity()) return;
  float l = 0;
  for (int j = 0; j < shape.kv_len; ++j) l += std::exp(s[j] - m);
  row.lse = m + std::log(l);
  for (int j = 0; j < shape.kv_len; ++j) row.p[j] = round_bf16(std::exp(s[j] - m) / l);
}

}  // namespace

void forward_bf16_naive(const AttnShape& shape, const MaskSpec& mask, double scale, const float* q,
                        const float* k, const float* v, float* o, float* lse) {
  const Index ix{shape};
  const int D = shape.head_dim;
  std::vector<float> qs(static_cast<size_t>(D)), acc(static_cast<size_t>(D));
  NaiveRow row;
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads_q; ++h) {
      const int hk = h / ix.group();
      for (int i = 0; i < shape.q_len; ++i) {
        const float* qi = q + ix.q(b, i, h);
        for (int d = 0; d < D; ++d) qs[d] = round_bf16(qi[d] * static_cast<float>(scale));
        naive_row(shape, mask, b, i, qs.data(), k, hk, row);
        lse[ix.lse(b, h, i)] = row.lse;
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int j = 0; j < shape.kv_len; ++j) {
          if (row.p[j] == 0.f) continue;
          const float* vj = v + ix.k(b, j, hk);
          for (int d = 0; d < D; ++d) acc[d] += row.p[j] * vj[d];
        }
        float* oi = o + ix.q(b, i, h);
        for (int d = 0; d < D; ++d) oi[d] = round_bf16(acc[d]);
      }
    }
  }
}

void backward_bf16_naive(const AttnShape& shape, const MaskSpec& mask, double scale, const float* q,
                         const float* k, const float* v, const float* dout, float* dq, float* dk,
                         float* dv) {
  const Index ix{shape};
  const int D = shape.head_dim;
  const int64_t kv_elems = ix.k(shape.batch, 0, 0);
  // Per query head gradients of the repeated K, V (rounded), summed over the group at the end.
  std::vector<float> dk_h(static_cast<size_t>(kv_elems) * ix.group(), 0.f);
  std::vector<float> dv_h(static_cast<size_t>(kv_elems) * ix.group(), 0.f);
  std::vector<float> qs(static_cast<size_t>(ix.q(shape.batch, 0, 0)));
  for (int64_t e = 0; e < static_cast<int64_t>(qs.size()); ++e) {
    qs[e] = round_bf16(q[e] * static_cast<float>(scale));
  }
  std::vector<float> ds(static_cast<size_t>(shape.kv_len)), acc(static_cast<size_t>(D));
  NaiveRow row;
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads_q; ++h) {
      const int hk = h / ix.group(), member = h % ix.group();
      std::vector<float> dk_acc(static_cast<size_t>(shape.kv_len) * D, 0.f);
      std::vector<float> dv_acc(static_cast<size_t>(shape.kv_len) * D, 0.f);
      for (int i = 0; i < shape.q_len; ++i) {
        const float* qsi = qs.data() + ix.q(b, i, h);
        const float* doi = dout + ix.q(b, i, h);
        naive_row(shape, mask, b, i, qsi, k, hk, row);
        float pdp = 0;  // sum_j p_j dp_j, softmax backward in fp32 from BF16 inputs
        for (int j = 0; j < shape.kv_len; ++j) {
          ds[j] = row.p[j] == 0.f ? 0.f : round_bf16(dotf(doi, v + ix.k(b, j, hk), D));
          pdp += row.p[j] * ds[j];
        }
        for (int j = 0; j < shape.kv_len; ++j) ds[j] = round_bf16(row.p[j] * (ds[j] - pdp));
        std::fill(acc.begin(), acc.end(), 0.f);
        for (int j = 0; j < shape.kv_len; ++j) {
          if (row.p[j] == 0.f && ds[j] == 0.f) continue;
          const float* kj = k + ix.k(b, j, hk);
          for (int d = 0; d < D; ++d) {
            acc[d] += ds[j] * kj[d];
            dk_acc[static_cast<size_t>(j) * D + d] += ds[j] * qsi[d];
            dv_acc[static_cast<size_t>(j) * D + d] += row.p[j] * doi[d];
          }
        }
        float* dqi = dq + ix.q(b, i, h);
        for (int d = 0; d < D; ++d) {
          dqi[d] = round_bf16(round_bf16(acc[d]) * static_cast<float>(scale));
        }
      }
      for (int j = 0; j < shape.kv_len; ++j) {
        for (int d = 0; d < D; ++d) {
          const int64_t e = member * kv_elems + ix.k(b, j, hk) + d;
          dk_h[e] = round_bf16(dk_acc[static_cast<size_t>(j) * D + d]);
          dv_h[e] = round_bf16(dv_acc[static_cast<size_t>(j) * D + d]);
        }
      }
    }
  }
  for (int64_t e = 0; e < kv_elems; ++e) {
    float sk = 0, sv = 0;
    for (int g = 0; g < ix.group(); ++g) {
      sk += dk_h[g * kv_elems + e];
      sv += dv_h[g * kv_elems + e];
    }
    dk[e] = round_bf16(sk);
    dv[e] = round_bf16(sv);
  }
}

}  // namespace cpsim::kernels::reference
