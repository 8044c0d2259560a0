#!/usr/bin/env python3
"""Times the vendor attention kernels on the same shape list as flash2_bench and writes the same
profile CSV (kernels/profiles format), so the simulator's cost model can use the fastest kernel
a framework would pick.

Backends (each skipped where it cannot express a shape's mask):
  torch-sdpa-flash  F.scaled_dot_product_attention under SDPBackend.FLASH_ATTENTION
  torch-sdpa-cudnn  the same under SDPBackend.CUDNN_ATTENTION
  torch-flex        torch.compile(flex_attention) with a block mask (causal, causal-offset,
                    document); FlexAttention is the only one of the three with arbitrary masks
SDPA takes full masks, causal squares, and causal-offset blocks whose diagonal ends in the last
key (the lower-right causal bias). GQA: enable_gqa=True where the installed PyTorch has it,
else K and V are repeated to the query heads before timing (the kernel then runs MHA).

Timing: per shape and direction `--warmup` untimed calls, then `--repeats` calls timed one by
one with CUDA events; the median is written. Backward times torch.autograd.grad of the output
(retain_graph), i.e. the backward kernels alone. Clocks are not pinned.

Exit status: 0 after writing the CSV, 1 on a usage or I/O error, 3 when PyTorch with CUDA is
not available (nothing timed, no CSV written).

    tools/bench_vendor.py --out vendor.csv [--shapes kernels/attention/shapes.csv]
                          [--backends torch-sdpa-flash,torch-sdpa-cudnn,torch-flex]
                          [--warmup 3] [--repeats 10] [--max-seconds 240] [--commit SHA]
"""
import argparse
import csv
import os
import statistics
import sys
import time

from bench_timing import git_commit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SHAPES = os.path.join(ROOT, "kernels", "attention", "shapes.csv")
COLUMNS = ["q_len", "kv_len", "mask", "heads_q", "heads_kv", "head_dim", "q_offset", "k_offset",
           "doc_len", "note"]
HEADER = ("gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,"
          "dtype,time_us,tflops,source,commit")
BACKENDS = ["torch-sdpa-flash", "torch-sdpa-cudnn", "torch-flex"]


def load_shapes(path):
    """The shape list, as kernels/attention/common/attention.cpp parses it."""
    shapes = []
    with open(path) as f:
        lines = [(n, l) for n, l in enumerate(f, 1) if l.strip() and not l.lstrip().startswith("#")]
    if not lines or [c.strip() for c in lines[0][1].rstrip("\n").split(",")] != COLUMNS:
        raise ValueError(f"{path}:{lines[0][0] if lines else 0}: error: expected the header "
                         f"'{','.join(COLUMNS)}'")
    for n, line in lines[1:]:
        cells = [c.strip() for c in line.rstrip("\n").split(",")]
        if len(cells) != len(COLUMNS):
            raise ValueError(f"{path}:{n}: error: expected {len(COLUMNS)} columns")
        s = dict(zip(COLUMNS, cells))
        for k in COLUMNS:
            if k not in ("mask", "note"):
                s[k] = int(s[k])
        if s["mask"] not in ("full", "causal", "document", "causal-offset"):
            raise ValueError(f"{path}:{n}: error: unknown mask '{s['mask']}'")
        shapes.append(s)
    return shapes


def offsets(s):
    return (0, 0) if s["mask"] in ("full", "causal") else (s["q_offset"], s["k_offset"])


def count_pairs(s):
    """Unmasked (i, j) pairs (batch 1), the definition of common/attention.hpp."""
    q, kv, mask = s["q_len"], s["kv_len"], s["mask"]
    if mask == "full":
        return q * kv
    qo, ko = offsets(s)
    total = 0
    for i in range(q):
        p = qo + i
        hi = min(kv, p - ko + 1)
        lo = 0
        if mask == "document":
            doc_start = (p // s["doc_len"]) * s["doc_len"]
            lo = max(0, doc_start - ko)
        total += max(0, hi - lo)
    return total


def sdpa_can(s):
    """SDPA masks: full, the causal square, and lower-right aligned causal blocks."""
    if s["mask"] == "full":
        return True
    if s["mask"] == "causal":
        return s["q_len"] == s["kv_len"]
    if s["mask"] == "causal-offset":
        qo, ko = offsets(s)
        return qo - ko == s["kv_len"] - s["q_len"]
    return False


def median_us(torch, fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


class Runner:
    """Builds the attention callable of one backend for one shape."""

    def __init__(self, torch):
        self.torch = torch
        import torch.nn.functional as F
        self.F = F
        self.flex = None
        self.create_block_mask = None

    def tensors(self, s, repeat_kv):
        torch = self.torch
        hq, hkv, d = s["heads_q"], s["heads_kv"], s["head_dim"]
        dev, dt = "cuda", torch.bfloat16
        q = torch.randn(1, hq, s["q_len"], d, device=dev, dtype=dt, requires_grad=True)
        hk = hq if repeat_kv else hkv
        k = torch.randn(1, hk, s["kv_len"], d, device=dev, dtype=dt, requires_grad=True)
        v = torch.randn(1, hk, s["kv_len"], d, device=dev, dtype=dt, requires_grad=True)
        return q, k, v

    def sdpa(self, s, backend):
        torch, F = self.torch, self.F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        which = SDPBackend.FLASH_ATTENTION if backend == "torch-sdpa-flash" else \
            SDPBackend.CUDNN_ATTENTION
        mask = None
        causal = s["mask"] == "causal"
        if s["mask"] == "causal-offset":
            from torch.nn.attention.bias import causal_lower_right
            mask = causal_lower_right(s["q_len"], s["kv_len"])
        gqa = s["heads_q"] != s["heads_kv"]
        for repeat in ((False, True) if gqa else (False,)):
            q, k, v = self.tensors(s, repeat)
            extra = {"enable_gqa": True} if gqa and not repeat else {}

            def fn(q=q, k=k, v=v, extra=extra):
                with sdpa_kernel(which):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                          is_causal=causal, **extra)
            try:
                fn()
                return fn, (q, k, v), ("" if not repeat else "kv heads repeated")
            except (RuntimeError, TypeError) as e:
                last = e
        raise RuntimeError(str(last).splitlines()[0] if str(last) else type(last).__name__)

    def flex_fn(self, s):
        torch = self.torch
        if self.flex is None:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            self.flex = torch.compile(flex_attention, dynamic=False)
            self.create_block_mask = create_block_mask
        qo, ko = offsets(s)
        if s["mask"] == "document":
            L = s["doc_len"]

            def mask_mod(b, h, i, j):
                return (ko + j <= qo + i) & ((ko + j) // L == (qo + i) // L)
        elif s["mask"] in ("causal", "causal-offset"):
            def mask_mod(b, h, i, j):
                return ko + j <= qo + i
        else:
            raise RuntimeError("flex is timed for masked shapes only")
        block = self.create_block_mask(mask_mod, None, None, s["q_len"], s["kv_len"],
                                       device="cuda")
        q, k, v = self.tensors(s, False)
        extra = {"enable_gqa": True} if s["heads_q"] != s["heads_kv"] else {}

        def fn():
            return self.flex(q, k, v, block_mask=block, **extra)
        fn()
        return fn, (q, k, v), ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--out", default="-", help="CSV file (default: stdout)")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--max-seconds", type=float, default=240,
                    help="stop starting new measurements after this long (0: no limit)")
    ap.add_argument("--commit", default=os.environ.get("CPSIM_COMMIT") or None)
    ap.add_argument("--gpu", default=None, help="the gpu column (default: the device name)")
    args = ap.parse_args()
    try:
        shapes = load_shapes(args.shapes)
    except (OSError, ValueError) as e:
        print(f"bench_vendor: {e}", file=sys.stderr)
        return 1
    backends = [b for b in args.backends.split(",") if b]
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        print(f"bench_vendor: unknown backend(s) {unknown}; known: {BACKENDS}", file=sys.stderr)
        return 1
    try:
        import torch
    except ImportError:
        print("bench_vendor: PyTorch is not installed: no vendor kernels timed", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("bench_vendor: PyTorch sees no CUDA device: no vendor kernels timed", file=sys.stderr)
        return 3
    gpu = args.gpu or torch.cuda.get_device_name()
    commit = args.commit or git_commit()
    print(f"bench_vendor: torch {torch.__version__} on {torch.cuda.get_device_name()}, "
          f"{len(shapes)} shapes, backends {backends}", file=sys.stderr)
    runner = Runner(torch)
    out = sys.stdout if args.out == "-" else open(args.out, "w", newline="")
    print(HEADER, file=out, flush=True)
    t0 = time.monotonic()
    stopped = False
    # Backend-major, so a time budget spent on FlexAttention's compiles leaves SDPA complete.
    for backend in backends:
        for s in shapes:
            if args.max_seconds and time.monotonic() - t0 > args.max_seconds:
                if not stopped:
                    print(f"bench_vendor: {args.max_seconds:.0f} s budget spent; skipping the rest",
                          file=sys.stderr)
                stopped = True
                break
            label = (f"{backend} {s['q_len']}x{s['kv_len']} {s['mask']} "
                     f"h{s['heads_q']}/{s['heads_kv']} d{s['head_dim']}")
            if backend == "torch-flex" and s["mask"] == "full":
                continue
            if backend != "torch-flex" and not sdpa_can(s):
                print(f"  skip {label}: mask not expressible in SDPA", file=sys.stderr)
                continue
            try:
                fn, (q, k, v), note = runner.flex_fn(s) if backend == "torch-flex" else \
                    runner.sdpa(s, backend)
            except Exception as e:  # backends refuse shapes in many ways; record and go on
                print(f"  skip {label}: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                      file=sys.stderr)
                torch.cuda.empty_cache()
                continue
            pairs = count_pairs(s)
            fwd_flops = 4.0 * pairs * s["heads_q"] * s["head_dim"]
            for direction in ("fwd", "bwd"):
                try:
                    if direction == "fwd":
                        with torch.no_grad():
                            us = median_us(torch, fn, args.warmup, args.repeats)
                    else:
                        o = fn()
                        do = torch.randn_like(o)
                        us = median_us(torch, lambda: torch.autograd.grad(
                            o, (q, k, v), do, retain_graph=True), args.warmup, args.repeats)
                        del o, do
                except Exception as e:
                    print(f"  skip {label} {direction}: {str(e).splitlines()[0]}", file=sys.stderr)
                    continue
                flops = fwd_flops * (2.5 if direction == "bwd" else 1.0)
                frac = pairs / (s["q_len"] * s["kv_len"])
                tf = flops / (us * 1e-6) / 1e12
                print(f"{gpu},{backend},{direction},{s['q_len']},{s['kv_len']},{s['mask']},"
                      f"{frac:.6f},{s['heads_q']},{s['heads_kv']},{s['head_dim']},bf16,{us:.3f},"
                      f"{tf:.2f},measured,{commit}", file=out, flush=True)
                print(f"  {label} {direction}: {us:10.1f} us {tf:6.1f} TFLOP/s"
                      f"{' (' + note + ')' if note else ''}", file=sys.stderr)
            del fn, q, k, v
            torch.cuda.empty_cache()
        if stopped:
            break
    if out is not sys.stdout:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
