#pragma once
/// FlashAttention-2 style backward bodies.
///   1. dsum_body: D = rowsum(dO * O) per query row and head (a warp per row).
///   2. bwd_body: one CTA per (key tile of kBc keys, key/value head, batch) keeps K, V in shared
///      memory and dK, dV in registers, and loops over the query heads of its GQA group and
///      their query tiles: S^T = K Q^T and dP^T = V dO^T, P^T = exp(S^T scale - LSE),
///      dS^T = P^T (dP^T - D) (both staged in shared memory as BF16), dV += P^T dO,
///      dK += dS^T Q, and dQ = dS K added to an FP32 buffer with atomics. When a GQA group
///      would leave SMs idle, kv_split CTAs share a key tile, each taking part of the group,
///      and add their dK, dV into an FP32 buffer with atomics.
///   3. dq_convert_body: dQ = BF16(scale x dQ_accum); dkv_convert_body likewise for dK, dV
///      when kv_split > 1.
/// The next Q, dO tiles load (cp.async) while the dQ GEMM and its atomics run.
#include "simt.hpp"

namespace cpsim::kernels::flash2 {

/// kSdpWM, kKvWM, kDqWM: warps along M of the S/dP ([kBc x kBr]), dK/dV ([kBc x kD]) and dQ
/// ([kBr x kD]) GEMMs; the remaining warps split N.
template <int kD_, int kBr_, int kBc_, int kWarps_, int kSdpWM_, int kKvWM_, int kDqWM_>
struct BwdTraits {
  static constexpr int kD = kD_, kBr = kBr_, kBc = kBc_, kWarps = kWarps_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSdpWM = kSdpWM_, kSdpWN = kWarps / kSdpWM;
  static constexpr int kSdpMT = kBc / (16 * kSdpWM), kSdpNT = kBr / (8 * kSdpWN);
  static constexpr int kKvWM = kKvWM_, kKvWN = kWarps / kKvWM;
  static constexpr int kKvMT = kBc / (16 * kKvWM), kKvNT = kD / (8 * kKvWN);
  static constexpr int kDqWM = kDqWM_, kDqWN = kWarps / kDqWM;
  static constexpr int kDqMT = kBr / (16 * kDqWM), kDqNT = kD / (8 * kDqWN);
  static_assert(kSdpMT * 16 * kSdpWM == kBc && kSdpNT * 8 * kSdpWN == kBr, "S/dP warp tiling");
  static_assert(kKvMT * 16 * kKvWM == kBc && kKvNT * 8 * kKvWN == kD, "dK/dV warp tiling");
  static_assert(kDqMT * 16 * kDqWM == kBr && kDqNT * 8 * kDqWN == kD, "dQ warp tiling");
  // Shared memory, in BF16 elements: K, V [kBc x kD]; Q, dO [kBr x kD]; P^T, dS^T [kBc x kBr];
  // then two float vectors of kBr (LSE in log2 units, D).
  static constexpr int kOffK = 0, kOffV = kBc * kD, kOffQ = 2 * kBc * kD;
  static constexpr int kOffDo = kOffQ + kBr * kD, kOffPt = kOffDo + kBr * kD;
  static constexpr int kOffDst = kOffPt + kBc * kBr, kOffEnd = kOffDst + kBc * kBr;
  static constexpr int kSmemBytes = 2 * kOffEnd + 2 * 4 * kBr;
};

template <int D>
struct BwdConfig;
template <>
struct BwdConfig<64> {
  using Traits = BwdTraits<64, 64, 128, 8, 8, 4, 4>;
};
template <>
struct BwdConfig<128> {
  using Traits = BwdTraits<128, 64, 128, 8, 8, 4, 4>;
};
template <>
struct BwdConfig<256> {
  using Traits = BwdTraits<256, 64, 64, 8, 4, 2, 2>;
};

constexpr int kDsumWarps = 4;  ///< rows per CTA of dsum_body

/// grid (ceil(q_len * heads_q / kDsumWarps), batch), kDsumWarps * 32 threads.
template <int D, class Dev>
CPK_DEVICE void dsum_body(const BwdParams& p, Dev& dev) {
  const int lane = dev.thread() & 31;
  const int row = dev.block_x() * kDsumWarps + (dev.thread() >> 5);
  const int b = dev.block_y();
  const bool valid = row < p.q_len * p.heads_q;
  const int i = valid ? row / p.heads_q : 0, h = valid ? row % p.heads_q : 0;
  float acc = 0.f;
  if (valid) {
    const uint16_t* o = p.o + b * p.o_str.batch + i * p.o_str.row + h * p.o_str.head;
    const uint16_t* d = p.dout + b * p.do_str.batch + i * p.do_str.row + h * p.do_str.head;
    for (int c = lane; c < D / 2; c += 32) {
      const uint32_t ov = dev.load_u32(reinterpret_cast<const uint32_t*>(o) + c);
      const uint32_t dv = dev.load_u32(reinterpret_cast<const uint32_t*>(d) + c);
      acc += dev.bf16_lo(ov) * dev.bf16_lo(dv) + dev.bf16_hi(ov) * dev.bf16_hi(dv);
    }
  }
  CPK_UNROLL
  for (int m = 16; m >= 1; m >>= 1) acc += dev.shfl_xor(acc, m);
  if (valid && lane == 0) {
    dev.store_f32(p.dsum + (static_cast<int64_t>(b) * p.heads_q + h) * p.q_len + i, acc);
  }
}

template <class T, class Dev>
CPK_DEVICE void bwd_body(const BwdParams& p, Dev& dev) {
  constexpr int D = T::kD, Br = T::kBr, Bc = T::kBc;
  const int tid = dev.thread(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int n_block = dev.block_x(), b = dev.block_z();
  const int hk = dev.block_y() / p.kv_split, part = dev.block_y() % p.kv_split;
  const int heads_here = p.group / p.kv_split;  // query heads this CTA covers
  const int h_first = hk * p.group + part * heads_here;
  const int j0 = n_block * Bc;
  const int j1 = imin(j0 + Bc, p.kv_len);

  uint16_t* smem = reinterpret_cast<uint16_t*>(dev.smem());
  uint16_t* sK = smem + T::kOffK;
  uint16_t* sV = smem + T::kOffV;
  uint16_t* sQ = smem + T::kOffQ;
  uint16_t* sDo = smem + T::kOffDo;
  uint16_t* sPt = smem + T::kOffPt;
  uint16_t* sDst = smem + T::kOffDst;
  float* sLse = reinterpret_cast<float*>(smem + T::kOffEnd);
  float* sDsum = sLse + Br;

  const int32_t* qdoc = p.mask.q_doc ? p.mask.q_doc + static_cast<int64_t>(b) * p.q_len : nullptr;
  const int32_t* kdoc = p.mask.k_doc ? p.mask.k_doc + static_cast<int64_t>(b) * p.kv_len : nullptr;
  const int m_tiles = ceil_div(p.q_len, Br);
  // Query tiles before m_begin see none of these keys under a causal mask.
  int m_begin = 0;
  if (p.mask.causal) {
    const int64_t first_row = p.mask.k_offset + j0 - p.mask.q_offset;  // smallest i seeing key j0
    m_begin =
        first_row <= 0 ? 0 : static_cast<int>(first_row / Br < m_tiles ? first_row / Br : m_tiles);
  }
  const bool cols_ragged = j1 - j0 < Bc;
  auto tile_class = [&](int m) {
    const int i0 = m * Br, i1 = imin(i0 + Br, p.q_len);
    return classify_tile(dev, p.mask, qdoc, kdoc, i0, i1, j0, j1, cols_ragged || i1 - i0 < Br);
  };
  // Work items: (query head, query tile), in order; the mask is head-independent.
  const int items = heads_here * m_tiles;
  auto next_item = [&](int it) {
    for (++it; it < items; ++it) {
      const int m = it % m_tiles;
      if (m < m_begin) continue;
      if (tile_class(m) != kTileSkip) break;
    }
    return it;
  };
  const uint16_t* gK = p.k + b * p.k_str.batch + hk * p.k_str.head;
  const uint16_t* gV = p.v + b * p.v_str.batch + hk * p.v_str.head;
  auto load_q_do = [&](int it) {
    const int h = h_first + it / m_tiles, i0 = (it % m_tiles) * Br;
    load_tile<Br, D, T::kThreads>(dev, sQ, p.q + b * p.q_str.batch + h * p.q_str.head, p.q_str.row,
                                  i0, p.q_len);
    load_tile<Br, D, T::kThreads>(dev, sDo, p.dout + b * p.do_str.batch + h * p.do_str.head,
                                  p.do_str.row, i0, p.q_len);
  };

  float acc_dk[T::kKvMT][T::kKvNT][4], acc_dv[T::kKvMT][T::kKvNT][4];
  zero(acc_dk);
  zero(acc_dv);
  const int kv_m0 = (warp / T::kKvWN) * 16 * T::kKvMT, kv_n0 = (warp % T::kKvWN) * 8 * T::kKvNT;
  const int sdp_m0 = (warp / T::kSdpWN) * 16 * T::kSdpMT;
  const int sdp_n0 = (warp % T::kSdpWN) * 8 * T::kSdpNT;
  const int dq_m0 = (warp / T::kDqWN) * 16 * T::kDqMT, dq_n0 = (warp % T::kDqWN) * 8 * T::kDqNT;

  int it = next_item(-1);
  if (it < items) {
    load_tile<Bc, D, T::kThreads>(dev, sK, gK, p.k_str.row, j0, p.kv_len);
    load_tile<Bc, D, T::kThreads>(dev, sV, gV, p.v_str.row, j0, p.kv_len);
    load_q_do(it);
    dev.cp_async_commit();
  }
  while (it < items) {
    const int h = h_first + it / m_tiles, m = it % m_tiles, i0 = m * Br;
    const int cls = tile_class(m);
    for (int r = tid; r < Br; r += T::kThreads) {
      const int i = i0 + r;
      float l = kPosInf, d = 0.f;  // rows past q_len (and empty rows) give P = 0
      if (i < p.q_len) {
        const int64_t at = (static_cast<int64_t>(b) * p.heads_q + h) * p.q_len + i;
        const float lse = dev.load_f32(p.lse + at);
        l = lse == kNegInf ? kPosInf : lse * kLog2e;
        d = dev.load_f32(p.dsum + at);
      }
      sLse[r] = l;
      sDsum[r] = d;
    }
    dev.template cp_async_wait<0>();
    dev.sync();  // Q, dO (and K, V) landed; LSE and D visible

    {
      float st[T::kSdpMT][T::kSdpNT][4], dpt[T::kSdpMT][T::kSdpNT][4];
      zero(st);
      zero(dpt);
      warp_gemm<T::kSdpMT, T::kSdpNT, D / 16, false, false, D, D>(dev, st, sK, sdp_m0, 0, sQ,
                                                                  sdp_n0, 0);
      warp_gemm<T::kSdpMT, T::kSdpNT, D / 16, false, false, D, D>(dev, dpt, sV, sdp_m0, 0, sDo,
                                                                  sdp_n0, 0);
      CPK_UNROLL
      for (int mt = 0; mt < T::kSdpMT; ++mt) {
        CPK_UNROLL
        for (int hr = 0; hr < 2; ++hr) {
          const int r = sdp_m0 + mt * 16 + g + hr * 8;  // key row in the tile
          const int j = j0 + r;
          const int32_t kd = (kdoc && j < p.kv_len) ? dev.load_i32(kdoc + j) : 0;
          CPK_UNROLL
          for (int nt = 0; nt < T::kSdpNT; ++nt) {
            const int c = sdp_n0 + nt * 8 + 2 * t4;  // query column in the tile
            float pv[2], dsv[2];
            CPK_UNROLL
            for (int e = 0; e < 2; ++e) {
              const int i = i0 + c + e;
              bool ok = true;
              if (cls == kTilePartial) {
                ok = j < p.kv_len;
                if (i < p.q_len) {
                  if (p.mask.causal && p.mask.k_offset + j > p.mask.q_offset + i) ok = false;
                  if (kdoc && dev.load_i32(qdoc + i) != kd) ok = false;
                }
              }
              const float pe =
                  ok ? dev.exp2(st[mt][nt][hr * 2 + e] * p.scale_log2 - sLse[c + e]) : 0.f;
              pv[e] = pe;
              dsv[e] = pe * (dpt[mt][nt][hr * 2 + e] - sDsum[c + e]);
            }
            *reinterpret_cast<uint32_t*>(sPt + swz<Br>(r, c)) = dev.pack_bf16x2(pv[0], pv[1]);
            *reinterpret_cast<uint32_t*>(sDst + swz<Br>(r, c)) = dev.pack_bf16x2(dsv[0], dsv[1]);
          }
        }
      }
    }
    dev.sync();  // P^T, dS^T complete

    warp_gemm<T::kKvMT, T::kKvNT, Br / 16, false, true, Br, D>(dev, acc_dv, sPt, kv_m0, 0, sDo,
                                                               kv_n0, 0);
    warp_gemm<T::kKvMT, T::kKvNT, Br / 16, false, true, Br, D>(dev, acc_dk, sDst, kv_m0, 0, sQ,
                                                               kv_n0, 0);
    dev.sync();  // every warp is done with Q, dO: prefetch the next item's
    const int next = next_item(it);
    if (next < items) load_q_do(next);
    dev.cp_async_commit();

    {
      float dq[T::kDqMT][T::kDqNT][4];
      zero(dq);
      warp_gemm<T::kDqMT, T::kDqNT, Bc / 16, true, true, Br, D>(dev, dq, sDst, dq_m0, 0, sK, dq_n0,
                                                                0);
      float* gdq = p.dq_accum + ((static_cast<int64_t>(b) * p.q_len) * p.heads_q + h) * D;
      CPK_UNROLL
      for (int mt = 0; mt < T::kDqMT; ++mt) {
        CPK_UNROLL
        for (int hr = 0; hr < 2; ++hr) {
          const int i = i0 + dq_m0 + mt * 16 + g + hr * 8;
          if (i >= p.q_len) continue;
          float* row = gdq + static_cast<int64_t>(i) * p.heads_q * D;
          CPK_UNROLL
          for (int nt = 0; nt < T::kDqNT; ++nt) {
            const int col = dq_n0 + nt * 8 + 2 * t4;
            dev.atomic_add(row + col, dq[mt][nt][hr * 2]);
            dev.atomic_add(row + col + 1, dq[mt][nt][hr * 2 + 1]);
          }
        }
      }
    }
    it = next;
  }
  dev.template cp_async_wait<0>();

  uint16_t* gdK = p.dk + b * p.dk_str.batch + hk * p.dk_str.head;
  uint16_t* gdV = p.dv + b * p.dv_str.batch + hk * p.dv_str.head;
  const int64_t dkv_elems = static_cast<int64_t>(p.batch) * p.kv_len * p.heads_kv * D;
  CPK_UNROLL
  for (int mt = 0; mt < T::kKvMT; ++mt) {
    CPK_UNROLL
    for (int hr = 0; hr < 2; ++hr) {
      const int j = j0 + kv_m0 + mt * 16 + g + hr * 8;
      if (j >= p.kv_len) continue;
      if (p.kv_split > 1) {
        float* ak = p.dkv_accum + ((static_cast<int64_t>(b) * p.kv_len + j) * p.heads_kv + hk) * D;
        float* av = ak + dkv_elems;
        CPK_UNROLL
        for (int nt = 0; nt < T::kKvNT; ++nt) {
          const int col = kv_n0 + nt * 8 + 2 * t4;
          dev.atomic_add(ak + col, acc_dk[mt][nt][hr * 2] * p.scale);
          dev.atomic_add(ak + col + 1, acc_dk[mt][nt][hr * 2 + 1] * p.scale);
          dev.atomic_add(av + col, acc_dv[mt][nt][hr * 2]);
          dev.atomic_add(av + col + 1, acc_dv[mt][nt][hr * 2 + 1]);
        }
        continue;
      }
      CPK_UNROLL
      for (int nt = 0; nt < T::kKvNT; ++nt) {
        const int col = kv_n0 + nt * 8 + 2 * t4;
        dev.store_u32(
            reinterpret_cast<uint32_t*>(gdK + static_cast<int64_t>(j) * p.dk_str.row + col),
            dev.pack_bf16x2(acc_dk[mt][nt][hr * 2] * p.scale,
                            acc_dk[mt][nt][hr * 2 + 1] * p.scale));
        dev.store_u32(
            reinterpret_cast<uint32_t*>(gdV + static_cast<int64_t>(j) * p.dv_str.row + col),
            dev.pack_bf16x2(acc_dv[mt][nt][hr * 2], acc_dv[mt][nt][hr * 2 + 1]));
      }
    }
  }
}

constexpr int kConvertThreads = 256;

/// grid ceil(batch * q_len * heads_q * D / 2 / kConvertThreads): one BF16 pair per thread.
template <int D, class Dev>
CPK_DEVICE void dq_convert_body(const BwdParams& p, Dev& dev) {
  const int64_t pair = static_cast<int64_t>(dev.block_x()) * kConvertThreads + dev.thread();
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.q_len * p.heads_q * (D / 2);
  if (pair >= pairs) return;
  const int c = static_cast<int>(pair % (D / 2)) * 2;
  const int64_t row = pair / (D / 2);  // (b * q_len + i) * heads_q + h
  const int h = static_cast<int>(row % p.heads_q);
  const int64_t bi = row / p.heads_q;
  const int i = static_cast<int>(bi % p.q_len), b = static_cast<int>(bi / p.q_len);
  const float* src = p.dq_accum + row * D + c;
  uint16_t* dst = p.dq + b * p.dq_str.batch + i * p.dq_str.row + h * p.dq_str.head + c;
  dev.store_u32(reinterpret_cast<uint32_t*>(dst),
                dev.pack_bf16x2(dev.load_f32(src) * p.scale, dev.load_f32(src + 1) * p.scale));
}

/// grid ceil(batch * kv_len * heads_kv * D / 2 / kConvertThreads): dK, dV = BF16(dkv_accum).
template <int D, class Dev>
CPK_DEVICE void dkv_convert_body(const BwdParams& p, Dev& dev) {
  const int64_t pair = static_cast<int64_t>(dev.block_x()) * kConvertThreads + dev.thread();
  const int64_t elems = static_cast<int64_t>(p.batch) * p.kv_len * p.heads_kv * D;
  if (pair >= elems / 2) return;
  const int c = static_cast<int>(pair % (D / 2)) * 2;
  const int64_t row = pair / (D / 2);  // (b * kv_len + j) * heads_kv + hk
  const int hk = static_cast<int>(row % p.heads_kv);
  const int64_t bj = row / p.heads_kv;
  const int j = static_cast<int>(bj % p.kv_len), b = static_cast<int>(bj / p.kv_len);
  const float* k = p.dkv_accum + row * D + c;
  const float* v = k + elems;
  uint16_t* dk = p.dk + b * p.dk_str.batch + j * p.dk_str.row + hk * p.dk_str.head + c;
  uint16_t* dv = p.dv + b * p.dv_str.batch + j * p.dv_str.row + hk * p.dv_str.head + c;
  dev.store_u32(reinterpret_cast<uint32_t*>(dk),
                dev.pack_bf16x2(dev.load_f32(k), dev.load_f32(k + 1)));
  dev.store_u32(reinterpret_cast<uint32_t*>(dv),
                dev.pack_bf16x2(dev.load_f32(v), dev.load_f32(v + 1)));
}

constexpr int kMergeWarps = 4;

/// grid (ceil(q_len * heads / kMergeWarps), batch): a warp per (query row, head). The LSE pair
/// is read by lane 0 and broadcast, so o and lse may alias o1 and lse1.
template <class Dev>
CPK_DEVICE void merge_body(const MergeParams& p, Dev& dev) {
  const int lane = dev.thread() & 31;
  const int row = dev.block_x() * kMergeWarps + (dev.thread() >> 5);
  const int b = dev.block_y();
  const bool valid = row < p.q_len * p.heads;
  const int i = valid ? row / p.heads : 0, h = valid ? row % p.heads : 0;
  const int64_t at = (static_cast<int64_t>(b) * p.heads + h) * p.q_len + i;
  float l1 = kNegInf, l2 = kNegInf;
  if (valid && lane == 0) {
    l1 = dev.load_f32(p.lse1 + at);
    l2 = dev.load_f32(p.lse2 + at);
  }
  l1 = dev.shfl_idx(l1, 0);
  l2 = dev.shfl_idx(l2, 0);
  if (!valid) return;
  const float mx = l1 > l2 ? l1 : l2;
  float w1 = 0.f, w2 = 0.f, lse = kNegInf;
  if (mx != kNegInf) {
    w1 = dev.exp2((l1 - mx) * kLog2e);
    w2 = dev.exp2((l2 - mx) * kLog2e);
    const float total = w1 + w2;
    lse = mx + dev.log(total);
    w1 /= total;
    w2 /= total;
  }
  const int64_t base = ((static_cast<int64_t>(b) * p.q_len + i) * p.heads + h) * p.head_dim;
  for (int c = lane * 2; c < p.head_dim; c += 64) {
    const uint32_t o2 = dev.load_u32(reinterpret_cast<const uint32_t*>(p.o2 + base + c));
    const float a0 = dev.load_f32(p.o1 + base + c), a1 = dev.load_f32(p.o1 + base + c + 1);
    // A side with weight 0 contributes nothing, even if its (never written) output is not finite.
    const float b0 = dev.bf16_lo(o2), b1 = dev.bf16_hi(o2);
    dev.store_f32(p.o + base + c, (w1 != 0.f ? a0 * w1 : 0.f) + (w2 != 0.f ? b0 * w2 : 0.f));
    dev.store_f32(p.o + base + c + 1, (w1 != 0.f ? a1 * w1 : 0.f) + (w2 != 0.f ? b1 * w2 : 0.f));
  }
  if (lane == 0) dev.store_f32(p.lse + at, lse);
}

}  // namespace cpsim::kernels::flash2
