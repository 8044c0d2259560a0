#pragma once
/// flash2 host API, shared by the CUDA launchers (cuda.hpp) and the CPU emulator launchers
/// (emulate.hpp): argument structs, validation, kernel parameters. No CUDA headers.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "../common/attention.hpp"
#include "simt.hpp"

namespace cpsim::kernels::flash2 {

/// A BF16 tensor [batch, len, heads, head_dim], last dimension contiguous; strides in
/// elements, each a multiple of 8 (16-byte rows), data 16-byte aligned.
struct Tensor {
  void* data = nullptr;
  int64_t batch_stride = 0, row_stride = 0, head_stride = 0;
};
inline Tensor contiguous(const void* data, int len, int heads, int head_dim) {
  return Tensor{const_cast<void*>(data), static_cast<int64_t>(len) * heads * head_dim,
                static_cast<int64_t>(heads) * head_dim, head_dim};
}

/// o, lse = attention(q, k, v) under `mask`; scale 0 means 1/sqrt(head_dim).
struct ForwardArgs {
  AttnShape shape;
  MaskSpec mask;
  float scale = 0;
  Tensor q, k, v, o;
  float* lse = nullptr;  ///< [batch, heads_q, q_len] fp32
};

/// dq, dk, dv from q, k, v, the forward's o and lse, and dout. `workspace` holds
/// backward_workspace_bytes(shape) bytes (device memory for CUDA).
struct BackwardArgs {
  AttnShape shape;
  MaskSpec mask;
  float scale = 0;
  Tensor q, k, v, o, dout, dq, dk, dv;
  const float* lse = nullptr;
  void* workspace = nullptr;
  /// CTAs sharing one key tile of a GQA group (a divisor of heads_q / heads_kv); 0: the
  /// launcher picks the smallest that gives every SM two CTAs (choose_kv_split).
  int kv_split = 0;
};

/// (o1, lse1) + (o2, lse2) -> (o, lse) over disjoint key sets; o1, o fp32 and o2 BF16, all
/// contiguous [batch, q_len, heads, head_dim]; lse [batch, heads, q_len]. o and lse may alias
/// o1 and lse1 (a ring step updating its accumulator in place). head_dim even.
struct MergeArgs {
  int batch = 0, q_len = 0, heads = 0, head_dim = 0;
  const float* o1 = nullptr;
  const float* lse1 = nullptr;
  const void* o2 = nullptr;
  const float* lse2 = nullptr;
  float* o = nullptr;
  float* lse = nullptr;
};

inline bool supported_head_dim(int d) { return d == 64 || d == 128 || d == 256; }

namespace detail {
inline size_t round256(size_t n) { return (n + 255) / 256 * 256; }
inline size_t dq_accum_bytes(const AttnShape& s) {
  return static_cast<size_t>(s.batch) * s.q_len * s.heads_q * s.head_dim * 4;
}
inline size_t dsum_bytes(const AttnShape& s) {
  return static_cast<size_t>(s.batch) * s.heads_q * s.q_len * 4;
}
}  // namespace detail

/// Workspace of a backward call: FP32 dQ accumulator, D = rowsum(dO * O), FP32 dK, dV
/// accumulators (used when kv_split > 1).
inline size_t backward_workspace_bytes(const AttnShape& s) {
  const size_t dkv = 2 * static_cast<size_t>(s.batch) * s.kv_len * s.heads_kv * s.head_dim * 4;
  return detail::round256(detail::dq_accum_bytes(s)) + detail::round256(detail::dsum_bytes(s)) +
         dkv;
}

/// Keys per CTA of the backward kernel (BwdConfig<D>::Traits::kBc).
inline int backward_key_tile(int head_dim) { return head_dim == 256 ? 64 : 128; }

/// The smallest divisor of the GQA group that gives the backward kernel at least two CTAs per
/// SM (one CTA fits an SM), or the whole group if none does.
inline int choose_kv_split(const AttnShape& s, int sms) {
  const int group = s.heads_q / s.heads_kv;
  const int64_t tiles =
      static_cast<int64_t>(s.batch) * s.heads_kv *
      ((s.kv_len + backward_key_tile(s.head_dim) - 1) / backward_key_tile(s.head_dim));
  for (int split = 1; split < group; ++split) {
    if (group % split == 0 && tiles * split >= 2LL * sms) return split;
  }
  return group;
}

namespace detail {
inline std::string check_tensor(const char* name, const Tensor& t) {
  if (t.data == nullptr) return std::string(name) + " is null";
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return std::string(name) + " is not 16-byte aligned";
  if (t.batch_stride % 8 || t.row_stride % 8 || t.head_stride % 8) {
    return std::string(name) + " strides must be multiples of 8 elements";
  }
  return {};
}
inline std::string check_shape(const AttnShape& s, const MaskSpec& m) {
  if (!supported_head_dim(s.head_dim)) {
    return "head_dim " + std::to_string(s.head_dim) + " unsupported (64, 128 or 256)";
  }
  if (s.batch <= 0 || s.q_len <= 0 || s.kv_len <= 0) return "empty problem";
  if (s.heads_q <= 0 || s.heads_kv <= 0 || s.heads_q % s.heads_kv != 0) {
    return "heads_q must be a positive multiple of heads_kv";
  }
  if ((m.q_doc == nullptr) != (m.k_doc == nullptr)) return "document mask needs q_doc and k_doc";
  return {};
}
inline float resolve_scale(float scale, int d) {
  return scale != 0 ? scale : 1.f / std::sqrt(static_cast<float>(d));
}
inline Strides strides(const Tensor& t) {
  return Strides{t.batch_stride, t.row_stride, t.head_stride};
}
inline MaskParams mask_params(const MaskSpec& m) {
  return MaskParams{m.causal, m.q_offset, m.k_offset, m.q_doc, m.k_doc};
}
/// What forward and backward parameters share: Q/K/V/O strides, shape, scale and mask.
template <class Params, class Args>
void fill_common(Params& p, const Args& a) {
  p.q_str = strides(a.q);
  p.k_str = strides(a.k);
  p.v_str = strides(a.v);
  p.o_str = strides(a.o);
  p.batch = a.shape.batch;
  p.q_len = a.shape.q_len;
  p.kv_len = a.shape.kv_len;
  p.heads_q = a.shape.heads_q;
  p.heads_kv = a.shape.heads_kv;
  p.group = a.shape.heads_q / a.shape.heads_kv;
  p.scale = resolve_scale(a.scale, a.shape.head_dim);
  p.scale_log2 = p.scale * kLog2e;
  p.mask = mask_params(a.mask);
}
}  // namespace detail

/// Empty if the arguments are supported, else the reason.
inline std::string check(const ForwardArgs& a) {
  std::string e = detail::check_shape(a.shape, a.mask);
  const std::pair<const char*, const Tensor*> tensors[] = {
      {"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"o", &a.o}};
  for (const auto& [name, t] : tensors) {
    if (e.empty()) e = detail::check_tensor(name, *t);
  }
  if (e.empty() && a.lse == nullptr) e = "lse is null";
  return e;
}
inline std::string check(const BackwardArgs& a) {
  std::string e = detail::check_shape(a.shape, a.mask);
  const std::pair<const char*, const Tensor*> tensors[] = {
      {"q", &a.q},       {"k", &a.k},   {"v", &a.v},   {"o", &a.o},
      {"dout", &a.dout}, {"dq", &a.dq}, {"dk", &a.dk}, {"dv", &a.dv}};
  for (const auto& [name, t] : tensors) {
    if (e.empty()) e = detail::check_tensor(name, *t);
  }
  if (e.empty() && (a.lse == nullptr || a.workspace == nullptr)) e = "lse or workspace is null";
  if (e.empty() &&
      (a.kv_split < 0 || (a.kv_split > 0 && (a.shape.heads_q / a.shape.heads_kv) % a.kv_split))) {
    e = "kv_split must divide heads_q / heads_kv";
  }
  return e;
}
inline std::string check(const MergeArgs& a) {
  if (a.batch <= 0 || a.q_len <= 0 || a.heads <= 0 || a.head_dim <= 0 || a.head_dim % 2) {
    return "merge needs a positive shape and an even head_dim";
  }
  if (!a.o1 || !a.lse1 || !a.o2 || !a.lse2 || !a.o || !a.lse) return "merge pointer is null";
  return {};
}

inline FwdParams make_fwd_params(const ForwardArgs& a) {
  FwdParams p;
  p.q = static_cast<const uint16_t*>(a.q.data);
  p.k = static_cast<const uint16_t*>(a.k.data);
  p.v = static_cast<const uint16_t*>(a.v.data);
  p.o = static_cast<uint16_t*>(a.o.data);
  p.lse = a.lse;
  detail::fill_common(p, a);
  return p;
}

/// `sms`: SMs of the device, for kv_split = 0.
inline BwdParams make_bwd_params(const BackwardArgs& a, int sms) {
  BwdParams p;
  p.q = static_cast<const uint16_t*>(a.q.data);
  p.k = static_cast<const uint16_t*>(a.k.data);
  p.v = static_cast<const uint16_t*>(a.v.data);
  p.o = static_cast<const uint16_t*>(a.o.data);
  p.dout = static_cast<const uint16_t*>(a.dout.data);
  p.lse = a.lse;
  p.dq = static_cast<uint16_t*>(a.dq.data);
  p.dk = static_cast<uint16_t*>(a.dk.data);
  p.dv = static_cast<uint16_t*>(a.dv.data);
  char* ws = static_cast<char*>(a.workspace);
  p.dq_accum = reinterpret_cast<float*>(ws);
  p.dsum = reinterpret_cast<float*>(ws + detail::round256(detail::dq_accum_bytes(a.shape)));
  p.dkv_accum = reinterpret_cast<float*>(ws + detail::round256(detail::dq_accum_bytes(a.shape)) +
                                         detail::round256(detail::dsum_bytes(a.shape)));
  p.kv_split = a.kv_split > 0 ? a.kv_split : choose_kv_split(a.shape, sms);
  p.do_str = detail::strides(a.dout);
  p.dq_str = detail::strides(a.dq);
  p.dk_str = detail::strides(a.dk);
  p.dv_str = detail::strides(a.dv);
  p.head_dim = a.shape.head_dim;
  detail::fill_common(p, a);
  return p;
}

inline MergeParams make_merge_params(const MergeArgs& a) {
  MergeParams p;
  p.o1 = a.o1;
  p.lse1 = a.lse1;
  p.o2 = static_cast<const uint16_t*>(a.o2);
  p.lse2 = a.lse2;
  p.o = a.o;
  p.lse = a.lse;
  p.batch = a.batch;
  p.q_len = a.q_len;
  p.heads = a.heads;
  p.head_dim = a.head_dim;
  return p;
}

}  // namespace cpsim::kernels::flash2
