#!/usr/bin/env python3
"""Times one Llama decoder block forward and forward+backward on the GPU at hand, written as
torchtitan's model writes it (torchtitan/models/llama3/model.py: nn.RMSNorm, complex RoPE,
F.scaled_dot_product_attention with is_causal, SwiGLU with three bias-free Linears), run eager
and under torch.compile. A component check for the cost model's stack key: the same block
priced by `cpsim kernels price` / a one-layer scenario under `training.stack: torch-eager` and
`torch-compile` should land near these times. Never a fitting target.

  tools/bench_block.py --out block.csv [--models llama3-8b] [--seq 4096,8192] [--modes eager,compile]

CSV: gpu,model,mode,attention,tokens,direction,time_us,tflops,source,commit
(tflops: the block's matmul FLOPs, 2 x params x tokens forward, x3 forward+backward, plus
causal attention's 4 x s^2/2 x heads x head_dim forward, x3.5 forward+backward.)
Exit 3 without PyTorch + CUDA.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

MODELS = {  # hidden, heads, kv heads, ffn
    "llama3-8b": (4096, 32, 8, 14336),
    "llama3-70b-tp8": (8192, 8, 1, 3584),  # one TP-8 rank's shard of a 70B block
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="llama3-8b,llama3-70b-tp8")
    ap.add_argument("--seq", default="4096,8192")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--max-seconds", type=float, default=150)
    ap.add_argument("--commit", default=os.environ.get("CPSIM_COMMIT") or "unknown")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError:
        print("bench_block: PyTorch is not installed", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("bench_block: no CUDA device", file=sys.stderr)
        return 3

    class Block(nn.Module):
        def __init__(self, h, heads, kv, ffn):
            super().__init__()
            self.h, self.heads, self.kv, self.d = h, heads, kv, 128
            self.attn_norm = nn.RMSNorm(h, eps=1e-5)
            self.ffn_norm = nn.RMSNorm(h, eps=1e-5)
            self.wq = nn.Linear(h, heads * 128, bias=False)
            self.wk = nn.Linear(h, kv * 128, bias=False)
            self.wv = nn.Linear(h, kv * 128, bias=False)
            self.wo = nn.Linear(heads * 128, h, bias=False)
            self.w1 = nn.Linear(h, ffn, bias=False)
            self.w2 = nn.Linear(ffn, h, bias=False)
            self.w3 = nn.Linear(h, ffn, bias=False)

        def forward(self, x, freqs):
            b, s, _ = x.shape
            y = self.attn_norm(x)
            q = self.wq(y).view(b, s, self.heads, self.d)
            k = self.wk(y).view(b, s, self.kv, self.d)
            v = self.wv(y).view(b, s, self.kv, self.d)

            def rope(t):
                tc = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
                return torch.view_as_real(tc * freqs).flatten(3).type_as(t)
            q, k = rope(q), rope(k)
            rep = self.heads // self.kv
            k = k.repeat_interleave(rep, dim=2)  # torchtitan's repeat_kv
            v = v.repeat_interleave(rep, dim=2)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            x = x + self.wo(o.transpose(1, 2).reshape(b, s, -1))
            y = self.ffn_norm(x)
            return x + self.w2(F.silu(self.w1(y)) * self.w3(y))

    gpu = torch.cuda.get_device_name()
    t0 = time.monotonic()
    with open(args.out, "w") as out:
        print("gpu,model,mode,attention,tokens,direction,time_us,tflops,source,commit", file=out,
              flush=True)
        # The host cost of one eager op: PyTorch's dispatch of a tiny elementwise op, the GPU idle
        # (what a launch-bound eager step pays per op), and a bare launch through a CUDA graph.
        tiny = torch.zeros(16, device="cuda")
        for _ in range(100):
            tiny.add_(1)
        torch.cuda.synchronize()
        n = 20000
        w = time.perf_counter()
        for _ in range(n):
            tiny.add_(1)
        torch.cuda.synchronize()
        us = (time.perf_counter() - w) / n * 1e6
        print(f"{gpu},tiny-op,eager,none,16,host,{us:.3f},0,measured,{args.commit}", file=out, flush=True)
        print(f"  eager op dispatch+launch: {us:.2f} us per op", file=sys.stderr, flush=True)
        for name in [m for m in args.models.split(",") if m]:
            h, heads, kv, ffn = MODELS[name]
            block = Block(h, heads, kv, ffn).cuda().to(torch.bfloat16)
            params = sum(p.numel() for p in block.parameters()) - 2 * h
            for mode in [m for m in args.modes.split(",") if m]:
                fn = torch.compile(block) if mode == "compile" else block
                for s in [int(x) for x in args.seq.split(",") if x]:
                    if time.monotonic() - t0 > args.max_seconds:
                        print("bench_block: budget spent", file=sys.stderr)
                        return 0
                    x = torch.randn(1, s, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                    ang = torch.outer(torch.arange(s, device="cuda", dtype=torch.float32),
                                      1.0 / (500000 ** (torch.arange(0, 128, 2, device="cuda") / 128)))
                    freqs = torch.polar(torch.ones_like(ang), ang).view(1, s, 1, 64)
                    g = torch.randn(1, s, h, device="cuda", dtype=torch.bfloat16)
                    attn_f = 4.0 * s * (s + 1) / 2 * heads * 128
                    for direction in ("fwd", "fwdbwd"):
                        def step():
                            if direction == "fwd":
                                with torch.no_grad():
                                    return fn(x, freqs)
                            y = fn(x, freqs)
                            y.backward(g)
                        try:
                            for _ in range(3):
                                step()
                            torch.cuda.synchronize()
                            times = []
                            for _ in range(args.repeats):
                                a = torch.cuda.Event(enable_timing=True)
                                b = torch.cuda.Event(enable_timing=True)
                                a.record()
                                step()
                                b.record()
                                b.synchronize()
                                times.append(a.elapsed_time(b) * 1e3)
                            us = statistics.median(times)
                        except Exception as e:
                            print(f"bench_block: {name} {mode} {s} {direction}: "
                                  f"{str(e).splitlines()[0] if str(e) else type(e).__name__}",
                                  file=sys.stderr)
                            continue
                        flops = 2.0 * params * s + attn_f
                        if direction == "fwdbwd":
                            flops = 3 * 2.0 * params * s + 3.5 * attn_f
                        tf = flops / (us * 1e-6) / 1e12
                        print(f"{gpu},{name},{mode},sdpa-default,{s},{direction},{us:.1f},{tf:.1f},"
                              f"measured,{args.commit}", file=out, flush=True)
                        print(f"  {name} {mode:8s} s{s} {direction:7s} {us:10.1f} us {tf:6.1f} TFLOP/s",
                              file=sys.stderr, flush=True)
                    block.zero_grad(set_to_none=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
