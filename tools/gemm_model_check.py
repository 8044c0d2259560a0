#!/usr/bin/env python3
"""Hold cpsim's published-figure GEMM model (the tile/wave model, `--profile none`) against a
measured GEMM table (kernels/profiles/<gpu>-gemm-measured.csv from kernels/measure.sh).

    tools/gemm_model_check.py build/cpsim hgx-h200 kernels/profiles/h200-gemm-measured.csv [--every N]

Prints the median and quartiles of the relative error (model - measured) / measured per
dtype/recipe and row role (grid, fwd, dgrad, wgrad). The measured table's layouts are PyTorch's
row-major names (x @ w.T is NT), cpsim's are cuBLAS's column-major ones (TN): the letters swap.
Python 3 standard library only.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

SWAP = {"NT": "TN", "TN": "NT", "NN": "NN", "TT": "TT"}


def price(cpsim, platform, row, tmp):
    dtype = "bf16" if row["dtype"] == "bf16" else "fp8"
    recipe = {"tensorwise": "delayed", "blockwise": "blockwise"}.get(row["recipe"], "delayed")
    out = os.path.join(tmp, "p.json")
    cmd = [cpsim, "kernels", "price", "--op", "gemm", "--platform", platform, "--profile", "none",
           "--m", row["m"], "--n", row["n"], "--k", row["k"], "--layout", SWAP[row["layout"]],
           "--dtype", dtype, "--recipe", recipe, "--json", out]
    subprocess.run(cmd, check=True, capture_output=True)
    with open(out, encoding="utf-8") as f:
        return json.load(f)["time_s"] * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cpsim")
    ap.add_argument("platform")
    ap.add_argument("table")
    ap.add_argument("--every", type=int, default=1, help="price every Nth grid row (all role rows)")
    args = ap.parse_args()
    groups = {}
    with open(args.table, encoding="utf-8") as f, tempfile.TemporaryDirectory() as tmp:
        for i, row in enumerate(csv.DictReader(f)):
            if row["recipe"] == "rowwise":
                continue  # no TransformerEngine format
            if row["role"] == "grid" and i % args.every:
                continue
            model = price(args.cpsim, args.platform, row, tmp)
            err = (model - float(row["time_us"])) / float(row["time_us"])
            size = "grid" if row["role"] == "grid" else "model-shapes"
            groups.setdefault((row["recipe"], size), []).append(err)
    print(f"{'recipe':12} {'rows':14} {'n':>5} {'median':>8} {'|median|':>9} {'p25':>8} {'p75':>8}")
    for (recipe, size), errs in sorted(groups.items()):
        q = statistics.quantiles(errs, n=4) if len(errs) > 1 else [errs[0]] * 3
        print(f"{recipe:12} {size:14} {len(errs):5} {statistics.median(errs):+8.1%} "
              f"{statistics.median(abs(e) for e in errs):9.1%} {q[0]:+8.1%} {q[2]:+8.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
