#!/usr/bin/env python3
"""Splits kernels/measure.sh's attention output into the profile files the cost model looks up
(sim/scenario/profile_csv.cpp find_bundled_profile): one file per attention implementation, and
one without an implementation holding the vendor kernels a framework would pick.

  tools/profiles_from_measure.py OUT_DIR GPU_KEY [--dest kernels/profiles]

reads OUT_DIR/vendor.csv and OUT_DIR/flash2.csv (kernels/profiles CSV format) and writes
  GPU_KEY-measured.csv               the vendor rows (PyTorch SDPA flash = FlashAttention-2,
                                     cuDNN, FlexAttention): what `cost.profile: auto` prices
                                     with, the fastest kernel per shape
  GPU_KEY-fa2-measured.csv           SDPA's flash backend (FlashAttention-2), cost.attention_kernel: fa2
  GPU_KEY-cudnn-measured.csv         cuDNN's fused attention, cost.attention_kernel: cudnn
  GPU_KEY-flex-measured.csv          FlexAttention, cost.attention_kernel: flex
  GPU_KEY-cpsim-flash2-measured.csv  this repository's FlashAttention-2-style kernel: kept apart,
                                     since no framework runs it and the auto profile must not
                                     price a mask from it where a vendor kernel has no row
Files with no rows are not written. Exit 1 when neither input exists.
"""
import argparse
import csv
import os
import sys

IMPL_OF_KERNEL = {"torch-sdpa-flash": "fa2", "torch-sdpa-cudnn": "cudnn", "torch-flex": "flex",
                  "cpsim-flash2": "cpsim-flash2"}
VENDOR = ("fa2", "cudnn", "flex")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("gpu_key")
    ap.add_argument("--dest", default=None, help="where to write (default: OUT_DIR)")
    args = ap.parse_args()
    dest = args.dest or args.out_dir
    header, by_impl = None, {}
    found = False
    for name in ("vendor.csv", "flash2.csv"):
        path = os.path.join(args.out_dir, name)
        if not os.path.exists(path):
            continue
        found = True
        with open(path, newline="") as f:
            reader = csv.reader(f)
            h = next(reader, None)
            if h is None:
                continue
            if header is None:
                header = h
            elif h != header:
                print(f"profiles_from_measure: {path}: header differs from the other file's",
                      file=sys.stderr)
                return 1
            k = h.index("kernel")
            for row in reader:
                impl = IMPL_OF_KERNEL.get(row[k])
                if impl is None:
                    print(f"profiles_from_measure: {path}: unknown kernel '{row[k]}'",
                          file=sys.stderr)
                    return 1
                by_impl.setdefault(impl, []).append(row)
    if not found:
        print(f"profiles_from_measure: no vendor.csv or flash2.csv in {args.out_dir}",
              file=sys.stderr)
        return 1
    os.makedirs(dest, exist_ok=True)
    outputs = {f"{args.gpu_key}-measured.csv": [r for i in VENDOR for r in by_impl.get(i, [])]}
    for impl, rows in by_impl.items():
        outputs[f"{args.gpu_key}-{impl}-measured.csv"] = rows
    for fname, rows in sorted(outputs.items()):
        if not rows:
            continue
        tmp = os.path.join(dest, fname + ".tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
        os.replace(tmp, os.path.join(dest, fname))
        print(f"profiles_from_measure: {fname}: {len(rows)} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
