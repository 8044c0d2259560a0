#!/usr/bin/python3
"""Plots how cpsim's wall time and peak memory grow, from the CSVs bench/run.sh writes.

  tools/plot_bench.py [RESULTS_DIR] [-o OUT]

RESULTS_DIR (default bench/results) holds scale_gpus.csv (gpus,wall_s,peak_MB,ops) and
scale_seq.csv (seq_len,wall_s,peak_MB,ops); writes OUT.png and OUT.svg (default
docs/gallery/bench-scale). Needs Debian's python3-matplotlib.
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import PALETTE, die, plt, save  # noqa: E402


def read(path, xkey):
    if not os.path.exists(path):
        die(f"{path}: not found (run bench/run.sh first)")
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            try:
                rows.append((r[xkey], float(r["wall_s"]), float(r["peak_MB"]), float(r["ops"])))
            except (KeyError, ValueError) as e:
                die(f"{path}: bad row {r}: {e}")
    if not rows:
        die(f"{path}: no rows")
    return rows


def decade_limits(ax, values):
    """Log axis spanning at least a decade, so that timer noise on a flat series looks flat."""
    lo, hi = min(values) / 1.5, max(values) * 1.5
    if hi / lo < 10:
        mid = (lo * hi) ** 0.5
        lo, hi = mid / 10 ** 0.5, mid * 10 ** 0.5
    ax.set_ylim(lo, hi)


def tokens(label):
    s = label.strip().upper()
    mult = {"K": 1024, "M": 1024 * 1024}.get(s[-1:], 1)
    return float(s[:-1] if mult > 1 else s) * mult


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default="bench/results")
    ap.add_argument("-o", "--out", default="docs/gallery/bench-scale")
    a = ap.parse_args(argv)
    gpus = read(os.path.join(a.results, "scale_gpus.csv"), "gpus")
    seq = read(os.path.join(a.results, "scale_seq.csv"), "seq_len")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, rows, xs, title, xlabel in (
        (axes[0], gpus, [float(r[0]) for r in gpus],
         "Llama-3 70B at 128K, TP 8 x CP <= 16 x DP (SimGrid)", "GPUs"),
        (axes[1], seq, [tokens(r[0]) for r in seq],
         "anchor model, full step, 8 GPUs (SimGrid)", "sequence length (tokens)"),
    ):
        ax.plot(xs, [r[1] for r in rows], "o-", color=PALETTE[0], label="wall time (s)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        decade_limits(ax, [r[1] for r in rows])
        ax.set_xlabel(xlabel)
        ax.set_ylabel("wall time (s)", color=PALETTE[0])
        ax.set_title(title, fontsize=10)
        ax.set_xticks(xs)
        ax.set_xticklabels([r[0] for r in rows])
        ax.grid(True, which="major", alpha=0.3)
        ax2 = ax.twinx()
        ax2.plot(xs, [r[2] for r in rows], "s--", color=PALETTE[1], label="peak memory (MB)")
        ax2.set_yscale("log")
        decade_limits(ax2, [r[2] for r in rows])
        ax2.set_ylabel("peak memory (MB)", color=PALETTE[1])
        for x, r in zip(xs, rows):
            ax.annotate(f"{r[3] / 1e6:.2g} M ops", (x, r[1]), textcoords="offset points",
                        xytext=(0, 7), ha="center", fontsize=7)
    fig.suptitle("cpsim wall time and memory on a 2-core machine (bench/run.sh)")
    fig.tight_layout()
    save(fig, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
