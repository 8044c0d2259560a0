#pragma once
/// FlashAttention-2 style forward body. One CTA computes a kBr-row query tile of one head:
/// Q stays in shared memory, K and V tiles of kBc keys stream through it (cp.async, K of the
/// next tile loading while P V of this one runs), S = Q K^T and O += P V run on m16n8k16 BF16
/// tensor cores with FP32 accumulators, and the online softmax lives in registers: P is fed
/// back to the second GEMM straight from the S accumulators (the m16n8 accumulator layout of
/// two adjacent n-tiles is the m16k16 A-operand layout). Each warp owns 16 x kMT query rows.
#include "simt.hpp"

namespace cpsim::kernels::flash2 {

template <int kD_, int kBr_, int kBc_, int kWarps_>
struct FwdTraits {
  static constexpr int kD = kD_, kBr = kBr_, kBc = kBc_, kWarps = kWarps_;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMT = kBr / (16 * kWarps);  ///< m16 tiles per warp
  static_assert(kMT >= 1 && kBr == 16 * kWarps * kMT, "query tile must split into warps");
  static_assert(kBc % 16 == 0 && kD % 16 == 0, "tiles must be multiples of 16");
  static constexpr int kSmemBytes = 2 * (kBr * kD + 2 * kBc * kD);
};

/// Tile sizes per head dimension (FlashAttention-2's choices for sm80/sm90).
template <int D>
struct FwdConfig;
template <>
struct FwdConfig<64> {
  using Traits = FwdTraits<64, 128, 64, 4>;
};
template <>
struct FwdConfig<128> {
  using Traits = FwdTraits<128, 128, 64, 4>;
};
template <>
struct FwdConfig<256> {
  using Traits = FwdTraits<256, 128, 64, 8>;
};

template <class T, class Dev>
CPK_DEVICE void fwd_body(const FwdParams& p, Dev& dev) {
  constexpr int D = T::kD, Br = T::kBr, Bc = T::kBc, MT = T::kMT;
  constexpr int NT = Bc / 8, DT = D / 8;
  const int tid = dev.thread(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  // Last query tile first: under a causal mask it has the most keys, and long CTAs launched
  // first leave a shorter tail.
  const int m_block = ceil_div(p.q_len, Br) - 1 - dev.block_x();
  const int h = dev.block_y(), b = dev.block_z();
  const int hk = h / p.group;
  const int i0 = m_block * Br;
  const int i1 = imin(i0 + Br, p.q_len);

  uint16_t* sQ = reinterpret_cast<uint16_t*>(dev.smem());
  uint16_t* sK = sQ + Br * D;
  uint16_t* sV = sK + Bc * D;
  const uint16_t* gQ = p.q + b * p.q_str.batch + h * p.q_str.head;
  const uint16_t* gK = p.k + b * p.k_str.batch + hk * p.k_str.head;
  const uint16_t* gV = p.v + b * p.v_str.batch + hk * p.v_str.head;
  const int32_t* qdoc = p.mask.q_doc ? p.mask.q_doc + static_cast<int64_t>(b) * p.q_len : nullptr;
  const int32_t* kdoc = p.mask.k_doc ? p.mask.k_doc + static_cast<int64_t>(b) * p.kv_len : nullptr;

  // Key tiles [0, n_end) can hold unmasked pairs; inside that range the mask may skip more.
  const int n_tiles = ceil_div(p.kv_len, Bc);
  int n_end = n_tiles;
  if (p.mask.causal) {
    const int64_t last_key = p.mask.q_offset + (i1 - 1) - p.mask.k_offset;  // largest visible j
    n_end = last_key < 0
                ? 0
                : static_cast<int>(last_key / Bc + 1 < n_tiles ? last_key / Bc + 1 : n_tiles);
  }
  const bool rows_ragged = i1 - i0 < Br;
  auto tile_class = [&](int n) {
    const int j0 = n * Bc, j1 = imin(j0 + Bc, p.kv_len);
    return classify_tile(dev, p.mask, qdoc, kdoc, i0, i1, j0, j1, rows_ragged || j1 - j0 < Bc);
  };
  auto next_tile = [&](int n) {
    for (++n; n < n_end; ++n) {
      if (tile_class(n) != kTileSkip) break;
    }
    return n;
  };

  const int wrow0 = warp * 16 * MT;  // this warp's first row inside the tile
  float acc_o[MT][DT][4];
  zero(acc_o);
  float row_max[2 * MT], row_sum[2 * MT];
  CPK_UNROLL
  for (int r = 0; r < 2 * MT; ++r) {
    row_max[r] = kNegInf;
    row_sum[r] = 0.f;
  }

  int n = next_tile(-1);
  if (n < n_end) {
    load_tile<Br, D, T::kThreads>(dev, sQ, gQ, p.q_str.row, i0, p.q_len);
    load_tile<Bc, D, T::kThreads>(dev, sK, gK, p.k_str.row, n * Bc, p.kv_len);
    dev.cp_async_commit();
  }
  while (n < n_end) {
    const int cls = tile_class(n);
    const int j0 = n * Bc;
    dev.template cp_async_wait<0>();
    dev.sync();  // K (and Q) landed; every warp is done with the previous V
    load_tile<Bc, D, T::kThreads>(dev, sV, gV, p.v_str.row, j0, p.kv_len);
    dev.cp_async_commit();

    float s[MT][NT][4];
    zero(s);
    warp_gemm<MT, NT, D / 16, false, false, D, D>(dev, s, sQ, wrow0, 0, sK, 0, 0);

    if (cls == kTilePartial) {
      // Document ids of this thread's rows (rows past q_len never read theirs).
      int32_t row_doc[2 * MT];
      CPK_UNROLL
      for (int r = 0; r < 2 * MT; ++r) {
        const int i = i0 + wrow0 + (r >> 1) * 16 + g + (r & 1) * 8;
        row_doc[r] = (qdoc && i < p.q_len) ? dev.load_i32(qdoc + i) : 0;
      }
      CPK_UNROLL
      for (int nt = 0; nt < NT; ++nt) {
        CPK_UNROLL
        for (int c = 0; c < 2; ++c) {
          const int j = j0 + nt * 8 + 2 * t4 + c;
          const bool j_ok = j < p.kv_len;
          const int32_t col_doc = (kdoc && j_ok) ? dev.load_i32(kdoc + j) : 0;
          CPK_UNROLL
          for (int mt = 0; mt < MT; ++mt) {
            CPK_UNROLL
            for (int hr = 0; hr < 2; ++hr) {
              const int i = i0 + wrow0 + mt * 16 + g + hr * 8;
              bool ok = j_ok;
              if (i < p.q_len) {
                if (p.mask.causal && p.mask.k_offset + j > p.mask.q_offset + i) ok = false;
                if (kdoc && col_doc != row_doc[mt * 2 + hr]) ok = false;
              }
              if (!ok) s[mt][nt][hr * 2 + c] = kNegInf;
            }
          }
        }
      }
    }

    // Online softmax: new running max, rescale the running sum and output, P = exp2(...).
    CPK_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
      CPK_UNROLL
      for (int hr = 0; hr < 2; ++hr) {
        const int r = mt * 2 + hr;
        float mx = row_max[r];
        CPK_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          mx = s[mt][nt][hr * 2] > mx ? s[mt][nt][hr * 2] : mx;
          mx = s[mt][nt][hr * 2 + 1] > mx ? s[mt][nt][hr * 2 + 1] : mx;
        }
        float other = dev.shfl_xor(mx, 1);
        mx = other > mx ? other : mx;
        other = dev.shfl_xor(mx, 2);
        mx = other > mx ? other : mx;
        // A row with no unmasked key so far keeps max -inf; use 0 so exp2 gives 0, not NaN.
        const float m_scaled = mx == kNegInf ? 0.f : mx * p.scale_log2;
        const float alpha = dev.exp2(row_max[r] * p.scale_log2 - m_scaled);
        row_max[r] = mx;
        float sum = 0.f;
        CPK_UNROLL
        for (int nt = 0; nt < NT; ++nt) {
          CPK_UNROLL
          for (int c = 0; c < 2; ++c) {
            const float e = dev.exp2(s[mt][nt][hr * 2 + c] * p.scale_log2 - m_scaled);
            s[mt][nt][hr * 2 + c] = e;
            sum += e;
          }
        }
        row_sum[r] = row_sum[r] * alpha + sum;
        CPK_UNROLL
        for (int dt = 0; dt < DT; ++dt) {
          acc_o[mt][dt][hr * 2] *= alpha;
          acc_o[mt][dt][hr * 2 + 1] *= alpha;
        }
      }
    }

    // P in BF16, already in the A-operand layout of the P V GEMM.
    uint32_t pa[MT][Bc / 16][4];
    CPK_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
      CPK_UNROLL
      for (int kk = 0; kk < Bc / 16; ++kk) {
        pa[mt][kk][0] = dev.pack_bf16x2(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][kk][1] = dev.pack_bf16x2(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][kk][2] = dev.pack_bf16x2(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][kk][3] = dev.pack_bf16x2(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
    }

    dev.template cp_async_wait<0>();
    dev.sync();  // V landed; every warp is done with K
    const int next = next_tile(n);
    if (next < n_end) load_tile<Bc, D, T::kThreads>(dev, sK, gK, p.k_str.row, next * Bc, p.kv_len);
    dev.cp_async_commit();

    // O += P V: P as register A fragments, V fragments by ldmatrix.trans.
    CPK_UNROLL
    for (int kk = 0; kk < Bc / 16; ++kk) {
      CPK_UNROLL
      for (int np = 0; np < DT / 2; ++np) {
        uint32_t bv[4];
        dev.ldsm_x4_t(
            sV + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, np * 16 + (lane >> 4) * 8),
            bv);
        CPK_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
          dev.mma(acc_o[mt][2 * np], pa[mt][kk], bv[0], bv[1]);
          dev.mma(acc_o[mt][2 * np + 1], pa[mt][kk], bv[2], bv[3]);
        }
      }
    }
    n = next;
  }
  dev.template cp_async_wait<0>();

  // Epilogue: O / l in BF16, LSE = max * scale + ln(l) (natural log), -inf for empty rows.
  uint16_t* gO = p.o + b * p.o_str.batch + h * p.o_str.head;
  float* gL = p.lse + (static_cast<int64_t>(b) * p.heads_q + h) * p.q_len;
  CPK_UNROLL
  for (int mt = 0; mt < MT; ++mt) {
    CPK_UNROLL
    for (int hr = 0; hr < 2; ++hr) {
      const int r = mt * 2 + hr;
      float l = row_sum[r];
      l += dev.shfl_xor(l, 1);
      l += dev.shfl_xor(l, 2);
      const float inv = l > 0.f ? 1.f / l : 0.f;
      const int i = i0 + wrow0 + mt * 16 + g + hr * 8;
      if (i < p.q_len) {
        uint16_t* orow = gO + static_cast<int64_t>(i) * p.o_str.row;
        CPK_UNROLL
        for (int dt = 0; dt < DT; ++dt) {
          dev.store_u32(
              reinterpret_cast<uint32_t*>(orow + dt * 8 + 2 * t4),
              dev.pack_bf16x2(acc_o[mt][dt][hr * 2] * inv, acc_o[mt][dt][hr * 2 + 1] * inv));
        }
        if (t4 == 0) {
          dev.store_f32(gL + i, l > 0.f ? row_max[r] * p.scale + dev.log(l) : kNegInf);
        }
      }
    }
  }
}

}  // namespace cpsim::kernels::flash2
