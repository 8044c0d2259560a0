#!/usr/bin/env python3
"""Writes h100-published.csv: the H100 attention profile derived from the published figures in
calibration.md (FlashAttention-3 forward TFLOP/s, FlashAttention-2's backward/forward ratio).
Every row says in its `kernel` column whether it is a published figure (fa3) or derived from
one (fa3-derived); kernels/README.md states each derivation. Rerun after editing the figures:

    python3 kernels/profiles/make_h100_published.py > kernels/profiles/h100-published.csv
"""

GPU = "H100-SXM"
D128 = 128
# FA3, H100, head dim 128, forward, non-causal. Series A: "4 x 48 heads" (batch 4 x 48 heads,
# folded into 192 heads: the kernel's grid treats batch and heads alike).
SERIES_A = {1024: 541, 2048: 618, 4096: 628, 8192: 639}
HEADS_A = 192
# Series B: 16 heads at batch x seqlen = 16K (batch folded into heads: 16 x 16384 / s).
SERIES_B = {512: 430, 1024: 517, 2048: 566, 4096: 590, 8192: 614, 16384: 621}
# FA3 paper: up to 740 TFLOP/s BF16 (75 % of peak): head dim 256 at 16K (its benchmark uses
# 2048 / head_dim = 8 heads at batch 16K / s = 1).
D256 = {16384: 740}
HEADS_D256 = 8
# FlashAttention-2 on A100: 63 % of peak backward vs 73 % forward.
BWD_OVER_FWD = 0.63 / 0.73

HEADER = ("gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,"
          "dtype,time_us,tflops,source,commit")


def row(kernel, direction, s, mask, heads, d, tflops):
    pairs = s * s if mask == "full" else s * (s + 1) // 2
    flops = 4.0 * pairs * heads * d * (2.5 if direction == "bwd" else 1.0)
    time_us = flops / (tflops * 1e12) * 1e6
    frac = pairs / (s * s)
    return (f"{GPU},{kernel},{direction},{s},{s},{mask},{frac:.6f},{heads},{heads},{d},bf16,"
            f"{time_us:.3f},{tflops:.2f},published,calibration.md")


def main():
    out = [HEADER]
    fwd = []  # (kernel, s, mask, heads, d, tflops)
    for s, t in SERIES_A.items():
        fwd.append(("fa3", s, "full", HEADS_A, D128, t))
    for s, t in SERIES_B.items():
        fwd.append(("fa3", s, "full", 16 * 16384 // s, D128, t))
    for s, t in D256.items():
        fwd.append(("fa3", s, "full", HEADS_D256, 256, t))
    # Causal at s: FLOPs of the triangle, at the throughput the same series reaches at s / 2
    # (a causal row sees s / 2 keys on average, which sets the efficiency), same heads.
    for series, heads_of in ((SERIES_A, lambda s: HEADS_A), (SERIES_B, lambda s: 16 * 16384 // s)):
        for s in series:
            if s // 2 in series:
                fwd.append(("fa3-derived", s, "causal", heads_of(s), D128, series[s // 2]))
    for k, s, mask, heads, d, t in fwd:
        out.append(row(k, "fwd", s, mask, heads, d, t))
    # Backward: 2.5 x the forward FLOPs at 0.63 / 0.73 of the forward throughput.
    for k, s, mask, heads, d, t in fwd:
        out.append(row("fa3-derived", "bwd", s, mask, heads, d, t * BWD_OVER_FWD))
    print("\n".join(out))


if __name__ == "__main__":
    main()
