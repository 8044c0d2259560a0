#!/usr/bin/env python3
"""Times the non-attention kernels a training step runs, on the GPU at hand, into profile CSVs
the cost model can read: GEMMs by shape (cuBLAS/cuBLASLt through PyTorch, BF16 and FP8), the
memory-bound kernels (norms, activations, RoPE, residuals, loss, FP8 quantisation, the ring's
LSE merge, the optimizer), and the attention shapes the vendor benchmark's CSV cannot hold
(MLA's 192/128 head dims, the unfused "math" path).

Sections (--only gemm,membound,attention; all by default), each its own CSV in --out-dir:
  <gpu>-gemm-measured.csv       gpu,kernel,dtype,recipe,layout,role,m,n,k,time_us,tflops,
                                source,origin,commit
      m x n output, k the reduction; layout as cuBLAS sees the operands of C = op(A) op(B)
      with A [m,k] and B [k,n] stored row-major by PyTorch: "NT" = B stored as [n,k] (a
      Linear's forward, x @ W^T), "NN" = B stored as [k,n] (dgrad, dY @ W), "TN" = A stored
      as [k,m] (wgrad, dY^T @ X). FP8 GEMMs run "NT" only: cuBLASLt's FP8 kernels on Hopper
      take only that layout, which is why Transformer Engine transposes FP8 operands with its
      cast-transpose kernels. recipe: bf16; tensorwise (one FP32 scale per tensor, TE's
      delayed/current scaling); rowwise (a scale per row of A and per column of B);
      blockwise (DeepSeek-V3's 1x128 activations x 128x128 weights), where PyTorch has it.
      origin: "grid" (the M, N, K grid) or the model/TP/role it came from.
  <gpu>-membound-measured.csv   gpu,op,impl,direction,tokens,width,dtype,bytes,time_us,gbps,
                                source,commit
      bytes = the minimum bytes the op must read and write (each input read once, each output
      written once), so gbps is the achieved bandwidth a cost model prices that op at.
  <gpu>-attention-extra-measured.csv  the profile CSV format of kernels/profiles plus
      head_dim_v: MLA (head_dim 192 for Q,K and 128 for V) and the unfused SDPA math path.

Timing: each call `--warmup` times untimed, then timed in groups of r calls between two CUDA
events (r so that a group lasts >= 2 ms, at most 50), `--repeats` groups, median per call.
Clocks are not pinned. Each section stops starting new shapes when its `--max-seconds` share is
spent, so a budget cut leaves complete rows. Exit 3 without PyTorch + CUDA.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEMM_HEADER = ("gpu,kernel,dtype,recipe,layout,role,m,n,k,time_us,tflops,source,origin,commit")
MEM_HEADER = ("gpu,op,impl,direction,tokens,width,dtype,bytes,time_us,gbps,source,commit")
ATT_HEADER = ("gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,"
              "head_dim,dtype,time_us,tflops,source,commit,head_dim_v")

# Models whose GEMMs the bundled scenarios and the usual comparisons run:
# (name, hidden, ffn, heads_q, heads_kv, head_dim, vocab, gated MLP). Megatron's GPT weak-scaling
# models (1.7B-32B class) are ungated with ffn = 4 x hidden.
MODELS = [
    ("gpt-1.7b", 2304, 9216, 24, 24, 96, 51200, False),
    ("llama2-7b", 4096, 11008, 32, 32, 128, 32000, True),
    ("llama3-8b", 4096, 14336, 32, 8, 128, 128256, True),
    ("gpt-16b", 6144, 24576, 48, 48, 128, 51200, False),
    ("qwen3.8-27b", 5120, 17408, 24, 4, 256, 248320, True),
    ("gpt-32b", 8192, 32768, 64, 64, 128, 51200, False),
    ("llama3-70b", 8192, 28672, 64, 8, 128, 128256, True),
    ("llama3-405b", 16384, 53248, 128, 8, 128, 128256, True),
]
# MoE experts (name, hidden, expert ffn): tokens per expert vary with routing.
EXPERTS = [("deepseek-v3", 7168, 2048), ("qwen3-30b-a3b", 2048, 768), ("mixtral-8x7b", 4096, 14336)]


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Timer:
    def __init__(self, torch, warmup, repeats, device):
        self.torch, self.warmup, self.repeats, self.device = torch, warmup, repeats, device

    def per_call_us(self, fn):
        torch = self.torch
        if self.device != "cuda":  # CPU dry runs: wall clock, one call
            t = time.perf_counter()
            fn()
            return (time.perf_counter() - t) * 1e6
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        one = max(start.elapsed_time(stop) * 1e3, 1.0)
        group = int(min(50, max(1, 2000.0 / one)))
        times = []
        for _ in range(self.repeats):
            start.record()
            for _ in range(group):
                fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3 / group)
        return statistics.median(times)


class Budget:
    def __init__(self, seconds):
        self.t0, self.seconds, self.told = time.monotonic(), seconds, False

    def spent(self, what):
        if self.seconds and time.monotonic() - self.t0 > self.seconds:
            if not self.told:
                log(f"bench_compute: {what}: {self.seconds:.0f} s budget spent; skipping the rest")
                self.told = True
            return True
        return False


def gemm_shapes(quick):
    """(m, n, k, role, origin) rows: the grid, then the models' linear layers by TP degree."""
    rows = []
    sizes = [256, 1024, 4096] if quick else [256, 512, 1024, 2048, 4096, 8192, 16384]
    nsizes = sizes if quick else sizes + [32768]
    for m in sizes:
        for n in nsizes:
            for k in sizes:
                rows.append((m, n, k, "grid", "grid"))
    tps = [1, 8] if quick else [1, 2, 4, 8]
    tokens = [4096] if quick else [2048, 8192]
    for name, h, ffn, hq, hkv, d, vocab, gated in (MODELS[:2] if quick else MODELS):
        for tp in tps:
            if hq % tp or (hkv % tp and hkv >= tp):
                continue
            kvh = max(1, hkv // tp)
            linears = [("qkv", (hq // tp + 2 * kvh) * d, h), ("proj", h, hq // tp * d),
                       ("fc1", (2 if gated else 1) * ffn // tp, h), ("fc2", h, ffn // tp),
                       ("lm_head", vocab // tp, h)]
            for T in tokens:
                for lin, n_out, k_in in linears:
                    origin = f"{name} tp{tp} {lin} T{T}"
                    # A Linear y[T, n_out] = x[T, k_in] W^T: forward (m=T, n=n_out, k=k_in),
                    # dgrad dx = dy W (m=T, n=k_in, k=n_out), wgrad dW = dy^T x (m=n_out,
                    # n=k_in, k=T).
                    rows.append((T, n_out, k_in, "fwd", origin))
                    rows.append((T, k_in, n_out, "dgrad", origin))
                    rows.append((n_out, k_in, T, "wgrad", origin))
    for name, h, effn in EXPERTS:
        for t in ([512] if quick else [128, 512, 2048, 8192]):
            for lin, n_out, k_in in (("fc1", 2 * effn, h), ("fc2", h, effn)):
                origin = f"{name} expert {lin} T{t}"
                rows.append((t, n_out, k_in, "fwd", origin))
                rows.append((t, k_in, n_out, "dgrad", origin))
                rows.append((n_out, k_in, t, "wgrad", origin))
    return rows


def layout_of(role):
    return {"fwd": "NT", "dgrad": "NN", "wgrad": "TN"}.get(role)


class Gemms:
    def __init__(self, torch, device):
        self.torch, self.device = torch, device
        self.fp8 = getattr(torch, "float8_e4m3fn", None)
        self.fp8_bwd = getattr(torch, "float8_e5m2", None)
        self.blockwise_form = None  # which scale layout this PyTorch accepted, once found

    def bf16(self, m, n, k, layout):
        torch, dev = self.torch, self.device
        dt = torch.bfloat16
        if layout == "NT":
            a = torch.randn(m, k, device=dev, dtype=dt)
            b = torch.randn(n, k, device=dev, dtype=dt).t()
        elif layout == "NN":
            a = torch.randn(m, k, device=dev, dtype=dt)
            b = torch.randn(k, n, device=dev, dtype=dt)
        else:  # TN
            a = torch.randn(k, m, device=dev, dtype=dt).t()
            b = torch.randn(k, n, device=dev, dtype=dt)
        out = torch.empty(m, n, device=dev, dtype=dt)
        return lambda: torch.mm(a, b, out=out)

    def scaled(self, m, n, k, recipe, grad_operand):
        """FP8 C[m,n] = A[m,k] B[k,n] through torch._scaled_mm (cuBLASLt), B column-major."""
        torch, dev = self.torch, self.device
        a_dt = self.fp8_bwd if grad_operand and self.fp8_bwd is not None else self.fp8
        a = torch.randn(m, k, device=dev).to(a_dt)
        b = torch.randn(n, k, device=dev).to(self.fp8).t()
        one = torch.ones((), device=dev, dtype=torch.float32)
        if recipe == "tensorwise":
            sa, sb = one, one
        elif recipe == "rowwise":
            sa = torch.ones(m, 1, device=dev, dtype=torch.float32)
            sb = torch.ones(1, n, device=dev, dtype=torch.float32)
        else:
            return self.blockwise(a, b, m, n, k)
        return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    def blockwise(self, a, b, m, n, k):
        """DeepSeek-V3's recipe: activations scaled per 1x128, weights per 128x128 block. The
        scale layouts PyTorch's tests use (outer dimension fastest) are tried in turn."""
        torch, dev = self.torch, self.device
        if k % 128 or n % 128:
            raise RuntimeError("blockwise needs k and n multiples of 128")

        def forms():
            sa = torch.ones(m, k // 128, device=dev, dtype=torch.float32)
            sb = torch.ones(n // 128, k // 128, device=dev, dtype=torch.float32)
            yield "a[m,k/128] outer-major, b[k/128,n/128] from [n/128,k/128].t()", \
                sa.t().contiguous().t(), sb.t()
            yield "a[m,k/128] outer-major, b[k/128,n/128] outer-major", \
                sa.t().contiguous().t(), sb.t().contiguous()
            yield "a[m,k/128], b[n/128,k/128]", sa, sb
        last = None
        for name, sa, sb in forms():
            if self.blockwise_form not in (None, name):
                continue
            fn = (lambda sa=sa, sb=sb: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb,
                                                        out_dtype=torch.bfloat16))
            try:
                fn()
                if self.blockwise_form is None:
                    log(f"  blockwise FP8 scales accepted as: {name}")
                self.blockwise_form = name
                return fn
            except Exception as e:  # each PyTorch release checks scale layouts differently
                last = e
        raise RuntimeError(f"blockwise FP8 refused: {str(last).splitlines()[0] if last else '?'}")


def run_gemm(args, torch, timer, gpu, commit, path):
    shapes = gemm_shapes(args.quick)
    g = Gemms(torch, args.device)
    budget = Budget(args.gemm_seconds)
    refused = {}
    timed = set()  # recipes that ran at least once: a later refusal is that shape's alone
    n_rows = 0
    fn = None
    with open(path, "w") as out:
        print(GEMM_HEADER, file=out, flush=True)
        # Cheap-first passes so a budget cut still leaves every dtype covered: BF16 forward
        # layout over everything, the FP8 tensorwise forward, then the other layouts and recipes.
        passes = [("bf16", "bf16", None), ("fp8_e4m3", "tensorwise", None),
                  ("bf16", "bf16", "other-layouts"), ("fp8_e4m3", "rowwise", None),
                  ("fp8_e4m3", "blockwise", None)]
        for dtype, recipe, which in passes:
            for m, n, k, role, origin in shapes:
                if budget.spent("gemm"):
                    return n_rows
                if dtype == "bf16":
                    layout = "NT" if role == "grid" else layout_of(role)
                    if which is None and layout != "NT":
                        continue
                    if which == "other-layouts":
                        if role != "grid" and layout == "NT":
                            continue
                        if role == "grid":
                            layouts = ["NN", "TN"] if not args.quick else ["NN"]
                        else:
                            layouts = [layout]
                    else:
                        layouts = [layout]
                else:
                    if recipe in refused:
                        continue
                    if recipe != "tensorwise" and role not in ("grid", "fwd"):
                        continue
                    if m % 16 or n % 16 or k % 16:
                        continue
                    layouts = ["NT"]
                for lay in layouts:
                    try:
                        if dtype == "bf16":
                            fn = g.bf16(m, n, k, lay)
                        else:
                            fn = g.scaled(m, n, k, recipe, grad_operand=role in ("dgrad", "wgrad"))
                        us = timer.per_call_us(fn)
                    except Exception as e:
                        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                        log(f"  gemm {dtype} {recipe} {lay} {m}x{n}x{k}: refused: {msg}")
                        if dtype != "bf16" and recipe not in timed:
                            refused[recipe] = msg
                        if args.device == "cuda":
                            torch.cuda.empty_cache()
                        continue
                    dt = dtype
                    if dtype != "bf16" and role in ("dgrad", "wgrad") and g.fp8_bwd is not None:
                        dt = "fp8_e5m2xe4m3"
                    tf = 2.0 * m * n * k / (us * 1e-6) / 1e12
                    print(f"{gpu},cublas,{dt},{recipe},{lay},{role},{m},{n},{k},{us:.3f},{tf:.2f},"
                          f"measured,{origin},{commit}", file=out, flush=True)
                    n_rows += 1
                    timed.add(recipe)
                fn = None
            if args.device == "cuda":
                torch.cuda.empty_cache()
    for r, msg in refused.items():
        log(f"bench_compute: FP8 {r} not timed: {msg}")
    return n_rows


def membound_cases(torch, F, dev, quick):
    """(op, impl, direction, tokens, width, bytes, make) where make() returns the callable."""
    bf = torch.bfloat16
    cases = []
    sizes = [(4096, 4096)] if quick else [(4096, 4096), (16384, 4096), (8192, 8192)]

    def rms_eager(x, w, eps=1e-6):  # Hugging Face / torchtitan eager RMSNorm, op by op
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return w * y.to(x.dtype)

    for T, H in sizes:
        e = T * H
        def mk_copy(T=T, H=H):
            x = torch.randn(T, H, device=dev, dtype=bf)
            y = torch.empty_like(x)
            return lambda: y.copy_(x)
        cases.append(("copy", "torch", "fwd", T, H, 4 * e, mk_copy))

        def mk_add(T=T, H=H):
            x, r = torch.randn(T, H, device=dev, dtype=bf), torch.randn(T, H, device=dev, dtype=bf)
            return lambda: x + r
        cases.append(("residual_add", "eager", "fwd", T, H, 6 * e, mk_add))

        def mk_bda(T=T, H=H):  # bias-dropout-add without a bias (Llama): dropout(x) + residual
            x, r = torch.randn(T, H, device=dev, dtype=bf), torch.randn(T, H, device=dev, dtype=bf)
            return lambda: F.dropout(x, 0.1, training=True) + r
        cases.append(("dropout_add", "eager", "fwd", T, H, 6 * e, mk_bda))

        for impl in ("eager", "F.rms_norm", "F.layer_norm"):
            for direction in ("fwd", "fwdbwd"):
                def mk_norm(T=T, H=H, impl=impl, direction=direction):
                    x = torch.randn(T, H, device=dev, dtype=bf, requires_grad=direction != "fwd")
                    w = torch.ones(H, device=dev, dtype=bf, requires_grad=direction != "fwd")
                    if impl == "eager":
                        f = lambda: rms_eager(x, w)
                    elif impl == "F.rms_norm":
                        f = lambda: F.rms_norm(x, (H,), w, 1e-6)
                    else:
                        f = lambda: F.layer_norm(x, (H,), w, None, 1e-5)
                    if direction == "fwd":
                        return f
                    g = torch.randn(T, H, device=dev, dtype=bf)
                    return lambda: torch.autograd.grad(f(), (x, w), g)
                # fwd: read x, write y; fwd+bwd adds read x, dy, write dx (weights negligible)
                byts = 4 * e if direction == "fwd" else 10 * e
                op = "layernorm" if impl == "F.layer_norm" else "rmsnorm"
                cases.append((op, impl, direction, T, H, byts, mk_norm))

        def mk_fp8(T=T, H=H, kind="cast"):
            x = torch.randn(T, H, device=dev, dtype=bf)
            s = torch.ones((), device=dev, dtype=torch.float32)
            f8 = getattr(torch, "float8_e4m3fn")
            if kind == "amax":
                return lambda: x.abs().amax()
            if kind == "cast":
                return lambda: (x.float() * s).to(f8)
            if kind == "cast_transpose":
                return lambda: (x.float() * s).to(f8).t().contiguous()
            # what TE's fused cast-transpose-amax does, written as the separate eager ops
            return lambda: ((x.float() * s).to(f8), (x.float() * s).to(f8).t().contiguous(),
                            x.abs().amax())
        if hasattr(torch, "float8_e4m3fn"):
            cases.append(("fp8_amax", "eager", "fwd", T, H, 2 * e, lambda T=T, H=H: mk_fp8(T, H, "amax")))
            cases.append(("fp8_cast", "eager", "fwd", T, H, 3 * e, lambda T=T, H=H: mk_fp8(T, H, "cast")))
            cases.append(("fp8_cast_transpose", "eager", "fwd", T, H, 4 * e,
                          lambda T=T, H=H: mk_fp8(T, H, "cast_transpose")))
            cases.append(("fp8_cast_transpose_amax", "eager", "fwd", T, H, 4 * e,
                          lambda T=T, H=H: mk_fp8(T, H, "all")))

    # SwiGLU over the fc1 output [T, 2F]: silu(a) * b.
    for T, Fh in ([(4096, 14336)] if quick else [(4096, 14336), (8192, 28672 // 8), (16384, 14336)]):
        for direction in ("fwd", "fwdbwd"):
            def mk_swiglu(T=T, Fh=Fh, direction=direction):
                x = torch.randn(T, 2 * Fh, device=dev, dtype=bf, requires_grad=direction != "fwd")
                f = lambda: F.silu(x[:, :Fh]) * x[:, Fh:]
                if direction == "fwd":
                    return f
                g = torch.randn(T, Fh, device=dev, dtype=bf)
                return lambda: torch.autograd.grad(f(), x, g)
            byts = 6 * T * Fh if direction == "fwd" else 16 * T * Fh
            cases.append(("swiglu", "eager", direction, T, 2 * Fh, byts, mk_swiglu))

    # RoPE on q [T, heads, 128]: Llama's rotate_half form and torchtitan's complex form.
    for T, heads in ([(4096, 32)] if quick else [(4096, 32), (16384, 32), (8192, 64)]):
        d = 128
        for impl in ("rotate_half", "complex"):
            def mk_rope(T=T, heads=heads, impl=impl):
                q = torch.randn(T, heads, d, device=dev, dtype=bf)
                ang = torch.randn(T, 1, d // 2, device=dev, dtype=torch.float32)
                if impl == "rotate_half":
                    cos = torch.cat([ang.cos(), ang.cos()], -1).to(bf)
                    sin = torch.cat([ang.sin(), ang.sin()], -1).to(bf)

                    def rot(x):
                        return torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
                    return lambda: q * cos + rot(q) * sin
                freqs = torch.polar(torch.ones_like(ang), ang)
                return lambda: torch.view_as_real(
                    torch.view_as_complex(q.float().reshape(T, heads, d // 2, 2)) * freqs
                ).flatten(2).to(bf)
            cases.append(("rope", impl, "fwd", T, heads * d, 4 * T * heads * d, mk_rope))

    # Cross-entropy over the logits [T, V] (bf16 logits, FP32 loss as Megatron and torchtitan).
    for T, V in ([(2048, 128256)] if quick else [(4096, 128256), (8192, 32000), (4096, 151936)]):
        def mk_ce(T=T, V=V):
            z = torch.randn(T, V, device=dev, dtype=bf, requires_grad=True)
            t = torch.randint(0, V, (T,), device=dev)
            return lambda: torch.autograd.grad(F.cross_entropy(z.float(), t), z)
        cases.append(("cross_entropy", "eager", "fwdbwd", T, V, 4 * T * V, mk_ce))

    # Softmax over attention scores [heads, s, s] (the unfused attention path), bf16.
    for heads, s in ([(8, 2048)] if quick else [(8, 4096), (32, 2048), (4, 8192)]):
        for direction in ("fwd", "fwdbwd"):
            def mk_sm(heads=heads, s=s, direction=direction):
                x = torch.randn(heads, s, s, device=dev, dtype=bf, requires_grad=direction != "fwd")
                mask = torch.ones(s, s, device=dev, dtype=torch.bool).triu(1)
                f = lambda: torch.softmax(x.masked_fill(mask, float("-inf")) * 0.088, -1)
                if direction == "fwd":
                    return f
                g = torch.randn(heads, s, s, device=dev, dtype=bf)
                return lambda: torch.autograd.grad(f(), x, g)
            byts = 4 * heads * s * s if direction == "fwd" else 10 * heads * s * s
            cases.append(("scale_mask_softmax", "eager", direction, heads * s, s, byts, mk_sm))

    # The ring's per-step merge of (out, lse) as PyTorch's context parallelism writes it in
    # eager ops (FP32): out -= sigmoid(block_lse - lse) * (out - block_out); lse -= logsigmoid(...).
    for heads, S in ([(32, 4096)] if quick else [(32, 4096), (4, 32768), (8, 16384)]):
        d = 128
        def mk_merge(heads=heads, S=S):
            out = torch.randn(1, heads, S, d, device=dev, dtype=torch.float32)
            blk = torch.randn(1, heads, S, d, device=dev, dtype=bf)
            lse = torch.randn(1, heads, S, 1, device=dev, dtype=torch.float32)
            blse = torch.randn(1, heads, S, 1, device=dev, dtype=torch.float32)

            def f():
                o = out - torch.sigmoid(blse - lse) * (out - blk.float())
                l_ = lse - F.logsigmoid(lse - blse)
                return o, l_
            return f
        # read out (fp32), block (bf16), write out (fp32): 10 bytes per element
        cases.append(("lse_merge", "eager", "fwd", heads * S, d, 10 * heads * S * d, mk_merge))

    # AdamW over a flat parameter (FP32 master weights, grads and two moments).
    for P in ([1 << 24] if quick else [1 << 26, 1 << 28]):
        for impl in ("fused", "foreach"):
            def mk_adam(P=P, impl=impl):
                p = torch.zeros(P, device=dev, dtype=torch.float32, requires_grad=True)
                p.grad = torch.randn(P, device=dev, dtype=torch.float32)
                kw = {"fused": True} if impl == "fused" else {"foreach": True}
                if dev != "cuda":
                    kw = {}
                opt = torch.optim.AdamW([p], lr=1e-4, **kw)
                return opt.step
            # read p, g, m, v; write p, m, v: 28 bytes per parameter
            cases.append(("adamw", impl, "step", P, 1, 28 * P, mk_adam))
    return cases


def run_membound(args, torch, timer, gpu, commit, path):
    import torch.nn.functional as F
    budget = Budget(args.membound_seconds)
    n_rows = 0
    with open(path, "w") as out:
        print(MEM_HEADER, file=out, flush=True)
        for op, impl, direction, tokens, width, byts, make in membound_cases(
                torch, F, args.device, args.quick):
            if budget.spent("membound"):
                break
            try:
                fn = make()
                us = timer.per_call_us(fn)
            except Exception as e:
                log(f"  membound {op} {impl} {direction} {tokens}x{width}: "
                    f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
                continue
            finally:
                fn = None
                if args.device == "cuda":
                    torch.cuda.empty_cache()
            gbps = byts / (us * 1e-6) / 1e9
            print(f"{gpu},{op},{impl},{direction},{tokens},{width},bf16,{byts},{us:.3f},{gbps:.1f},"
                  f"measured,{commit}", file=out, flush=True)
            log(f"  {op:24s} {impl:12s} {direction:6s} {tokens}x{width}: {us:9.1f} us "
                f"{gbps:7.1f} GB/s")
            n_rows += 1
    return n_rows


def run_attention_extra(args, torch, timer, gpu, commit, path):
    """MLA's 192/128 head dims through SDPA's backends, and the unfused math path."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    budget = Budget(args.attention_seconds)
    bf = torch.bfloat16
    dev = args.device
    cases = []
    for s, heads in ([(2048, 16)] if args.quick else [(4096, 128), (8192, 32), (16384, 16)]):
        for mask in ("causal", "full"):
            for be in ("torch-sdpa-flash", "torch-sdpa-cudnn", "torch-sdpa-efficient"):
                cases.append((be, s, heads, 192, 128, mask))
    for s, heads in ([(1024, 8)] if args.quick else [(1024, 32), (2048, 32), (4096, 32), (8192, 16)]):
        for mask in ("causal", "full"):
            cases.append(("torch-sdpa-math", s, heads, 128, 128, mask))
    backend = {"torch-sdpa-flash": SDPBackend.FLASH_ATTENTION,
               "torch-sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
               "torch-sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
               "torch-sdpa-math": SDPBackend.MATH}
    n_rows = 0
    with open(path, "w") as out:
        print(ATT_HEADER, file=out, flush=True)
        for be, s, heads, dqk, dv, mask in cases:
            if budget.spent("attention"):
                break
            causal = mask == "causal"
            try:
                q = torch.randn(1, heads, s, dqk, device=dev, dtype=bf, requires_grad=True)
                k = torch.randn(1, heads, s, dqk, device=dev, dtype=bf, requires_grad=True)
                v = torch.randn(1, heads, s, dv, device=dev, dtype=bf, requires_grad=True)

                def fn():
                    with sdpa_kernel(backend[be]):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                fn()
                pairs = s * (s + 1) // 2 if causal else s * s
                flops_f = 2.0 * pairs * heads * (dqk + dv)
                for direction in ("fwd", "bwd"):
                    if direction == "fwd":
                        with torch.no_grad():
                            us = timer.per_call_us(fn)
                        flops = flops_f
                    else:
                        o = fn()
                        do = torch.randn_like(o)
                        us = timer.per_call_us(lambda: torch.autograd.grad(
                            o, (q, k, v), do, retain_graph=True))
                        flops = 2.5 * flops_f
                        del o, do
                    tf = flops / (us * 1e-6) / 1e12
                    print(f"{gpu},{be},{direction},{s},{s},{mask},{pairs / (s * s):.6f},{heads},"
                          f"{heads},{dqk},bf16,{us:.3f},{tf:.2f},measured,{commit},{dv}",
                          file=out, flush=True)
                    log(f"  {be} s{s} h{heads} d{dqk}/{dv} {mask} {direction}: {us:9.1f} us "
                        f"{tf:6.1f} TFLOP/s")
                    n_rows += 1
            except Exception as e:
                log(f"  attention {be} s{s} h{heads} d{dqk}/{dv} {mask}: "
                    f"{str(e).splitlines()[0] if str(e) else type(e).__name__}")
            finally:
                q = k = v = None
                if dev == "cuda":
                    torch.cuda.empty_cache()
    return n_rows


def provenance(torch, device):
    p = {"torch": torch.__version__, "cuda": getattr(torch.version, "cuda", None),
         "device": device}
    if device == "cuda":
        prop = torch.cuda.get_device_properties(0)
        p.update({"gpu": prop.name, "sms": prop.multi_processor_count,
                  "memory_bytes": prop.total_memory, "capability": f"{prop.major}.{prop.minor}",
                  "cudnn": torch.backends.cudnn.version(),
                  "cublaslt_available": True})
        for key, cmd in (("nvidia_smi", ["nvidia-smi", "--query-gpu=name,driver_version,"
                          "clocks.sm,clocks.max.sm,clocks.mem,power.limit", "--format=csv"]),):
            try:
                p[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
            except (OSError, subprocess.SubprocessError) as e:
                p[key] = str(e)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--only", default="gemm,membound,attention")
    ap.add_argument("--gpu-key", default=None, help="file name prefix (default: from the GPU)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--gemm-seconds", type=float, default=100)
    ap.add_argument("--membound-seconds", type=float, default=45)
    ap.add_argument("--attention-seconds", type=float, default=40)
    ap.add_argument("--commit", default=os.environ.get("CPSIM_COMMIT") or None)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run of the code")
    ap.add_argument("--quick", action="store_true", help="a few shapes per section (dry runs)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        log("bench_compute: PyTorch is not installed: nothing timed")
        return 3
    if args.device == "cuda" and not torch.cuda.is_available():
        log("bench_compute: PyTorch sees no CUDA device: nothing timed")
        return 3
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    key = args.gpu_key or (gpu.lower().replace("nvidia ", "").split() or ["gpu"])[0]
    commit = args.commit or git_commit()
    os.makedirs(args.out_dir, exist_ok=True)
    prov = provenance(torch, args.device)
    with open(os.path.join(args.out_dir, f"{key}-provenance.json"), "w") as f:
        json.dump(prov, f, indent=1, sort_keys=True)
    log(f"bench_compute: torch {torch.__version__} on {gpu} -> {args.out_dir}")
    timer = Timer(torch, args.warmup, args.repeats, args.device)
    status = 0
    sections = [s for s in args.only.split(",") if s]
    for name, fn, fname in (("gemm", run_gemm, f"{key}-gemm-measured.csv"),
                            ("membound", run_membound, f"{key}-membound-measured.csv"),
                            ("attention", run_attention_extra,
                             f"{key}-attention-extra-measured.csv")):
        if name not in sections:
            continue
        t = time.monotonic()
        try:
            n = fn(args, torch, timer, gpu, commit, os.path.join(args.out_dir, fname))
            log(f"bench_compute: {name}: {n} rows in {time.monotonic() - t:.0f} s -> {fname}")
        except Exception:
            log(f"bench_compute: {name} failed:\n{traceback.format_exc()}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
