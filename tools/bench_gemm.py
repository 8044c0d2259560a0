"""tools/bench_compute.py's GEMM section: cuBLAS/cuBLASLt through PyTorch by M, N, K, layout
and dtype (BF16 and the FP8 recipes PyTorch has) over a grid and over the linear layers of the
models the bundled scenarios run. The CSV's columns are described in bench_compute.py."""
from bench_timing import Budget, log

GEMM_HEADER = ("gpu,kernel,dtype,recipe,layout,role,m,n,k,time_us,tflops,source,origin,commit")

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
