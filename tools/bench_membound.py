"""tools/bench_compute.py's memory-bound and attention sections: the memory-bound kernels a step
runs beside its GEMMs (norms, activations, RoPE, residuals, loss, FP8 quantisation, the ring's
LSE merge, the optimizer) at their achieved bandwidth, and the attention shapes the vendor
benchmark's CSV cannot hold (MLA's 192/128 head dims, the unfused "math" path). The CSVs'
columns are described in bench_compute.py."""
from bench_timing import Budget, log

MEM_HEADER = ("gpu,op,impl,direction,tokens,width,dtype,bytes,time_us,gbps,source,commit")
ATT_HEADER = ("gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,"
              "head_dim,dtype,time_us,tflops,source,commit,head_dim_v")


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
