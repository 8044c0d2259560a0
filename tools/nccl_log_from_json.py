#!/usr/bin/env python3
"""Writes `cpsim collective --json` results as the log nccl-tests prints for the same run, in
nccl-tests' own format (src/common.cu: writeDeviceReport's header, the table header, each row's
"%12li  %12li  %8s  %6s  %6i" then "  %7s  %6.2f  %6.2f  %5s" out-of-place and in-place, the
"# Avg bus bandwidth" trailer), so `cpsim calibrate nccl` can be tested on logs whose truth is
known: simulate a modified platform, write its log, calibrate the preset back to it.

  tools/nccl_log_from_json.py RESULT.json [-o LOG] [--hosts node{:03d}] [--gpus-per-host 8]
      [--device "NVIDIA H100 80GB HBM3"] [--nccl 22105] [--srun-label] [--info-lines]

--srun-label prefixes every line with srun --label's "  0: "; --info-lines interleaves NCCL INFO
lines of the other ranks between rows, as an mpirun log has them.
"""
import argparse
import json
import sys

PROGRAM = {"allreduce": "all_reduce_perf", "allgather": "all_gather_perf",
           "reducescatter": "reduce_scatter_perf", "alltoall": "alltoall_perf",
           "sendrecv": "sendrecv_perf", "broadcast": "broadcast_perf", "reduce": "reduce_perf"}


def time_str(us):
    # nccl-tests prints the time with 2, 1 or 0 decimals so that it fits 7 characters
    if us < 1e4:
        return f"{us:7.2f}"
    if us < 1e5:
        return f"{us:7.1f}"
    return f"{us:7.0f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json")
    ap.add_argument("-o", "--out", default="-")
    ap.add_argument("--hosts", default="node{:03d}")
    ap.add_argument("--gpus-per-host", type=int, default=8)
    ap.add_argument("--device", default="NVIDIA H100 80GB HBM3")
    ap.add_argument("--nccl", type=int, default=22105, help="NCCL_VERSION_CODE")
    ap.add_argument("--srun-label", action="store_true")
    ap.add_argument("--info-lines", action="store_true")
    args = ap.parse_args()
    with open(args.json) as f:
        doc = json.load(f)
    op, ranks, rows = doc["op"], int(doc["ranks"]), doc["results"]
    prog = PROGRAM[op]
    lines = []
    out = lines.append
    v = args.nccl
    out(f"# nccl-tests version 2.17.6 nccl-headers={v} nccl-library={v}")
    out(f"# Collective test starting: {prog}")
    lo, hi = int(rows[0]["size_bytes"]), int(rows[-1]["size_bytes"])
    out(f"# nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: 2(factor) warmup iters: 5 "
        f"iters: 20 agg iters: 1 validation: 1 graph: 0")
    out("#")
    out("# Using devices")
    for r in range(ranks):
        host = args.hosts.format(r // args.gpus_per_host)
        dev = r % args.gpus_per_host
        out(f"#  Rank {r:2d} Group  0 Pid {40000 + r:6d} on {host:>8s} device {dev:2d} "
            f"[0000:{0x18 + 16 * dev:02x}:00] {args.device}")
    out("#")
    out("#                                                              out-of-place"
        "                       in-place          ")
    out("#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong")
    out("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       ")
    bus = []
    for i, r in enumerate(rows):
        t = time_str(r["time_us"])
        row = (f"{int(r['size_bytes']):12d}  {int(r['count']):12d}  {r['type']:>8s}  "
               f"{r['redop']:>6s}  {int(r['root']):6d}")
        for _ in range(2):
            row += f"  {t}  {r['algbw_GBps']:6.2f}  {r['busbw_GBps']:6.2f}  {'0':>5s}"
        out(row)
        bus.append(r["busbw_GBps"])
        if args.info_lines and i % 5 == 2:
            host = args.hosts.format((ranks - 1) // args.gpus_per_host)
            out(f"{host}:{40000 + ranks - 1}:{40100 + i} [{(ranks - 1) % args.gpus_per_host}] "
                f"NCCL INFO comm 0x55d0c0ffee00 rank {ranks - 1} nranks {ranks} cudaDev "
                f"{(ranks - 1) % args.gpus_per_host} busId 18000 - Init COMPLETE")
    out("# Out of bounds values : 0 OK")
    out(f"# Avg bus bandwidth    : {sum(bus) / len(bus):g} ")
    out("#")
    out(f"# Collective test concluded: {prog}")
    if args.srun_label:
        lines = ["  0: " + l for l in lines]
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
