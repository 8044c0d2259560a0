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

The sections live in bench_gemm.py and bench_membound.py (memory-bound and attention), the
timer and budget they share in bench_timing.py.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import traceback

from bench_gemm import run_gemm
from bench_membound import run_attention_extra, run_membound
from bench_timing import Timer, git_commit, log


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
