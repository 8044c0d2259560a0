#!/usr/bin/env python3
"""Bar chart of causal (i, j) pairs per GPU from one or more `cpsim partition --json` files.

Runs of the same sequence (s, N, documents) share one panel with grouped bars per layout; the
dashed line is the perfectly balanced share (all pairs / N). Writes OUT.png and OUT.svg.

Example:
  for l in contiguous zigzag striped; do
    cpsim partition --seq 16 --cp 4 --layout $l --json /tmp/p-$l.json; done
  tools/plot_partition.py /tmp/p-*.json -o partition-s16-n4
"""
import argparse
import json
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

LAYOUT_ORDER = {"contiguous": 0, "zigzag": 1, "striped": 2}
COLORS = {"contiguous": "#d62728", "zigzag": "#2ca02c", "striped": "#1f77b4"}


def load(path):
    with open(path, encoding="utf-8") as f:
        run = json.load(f)
    for key in ("seq_len", "cp", "layout", "per_rank"):
        if key not in run:
            raise ValueError(f"{path}: not a `cpsim partition --json` file (no '{key}')")
    return run


def doc_label(run):
    d = run.get("documents", {})
    n = d.get("count", 1)
    if n == 1:
        return "one document"
    if d.get("source") == "random":
        return f"{n} documents ({d.get('distribution')}, mean {tokens(d.get('mean_tokens', 0))})"
    return f"{n} documents"


def tokens(n):
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def compact(v):
    """Pair counts to three significant digits with an SI prefix: 58, 7.03G."""
    if abs(v) < 1e5:  # the lesson's small examples stay exact
        return f"{v:g}"
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{prefix}"
    return f"{v:g}"


def series_label(run):
    name = run["layout"]
    if name == "striped" and run.get("stripe_width", 1) != 1:
        name += f" (width {run['stripe_width']})"
    ring = run.get("ring_total", max(run["per_rank"]))
    return f"{name}: max/mean {run.get('imbalance', 1.0):.2f}, ring total {compact(ring)}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("json", nargs="+", help="files written by `cpsim partition --json`")
    ap.add_argument("-o", "--out", default="partition",
                    help="output path without extension (writes OUT.png and OUT.svg)")
    ap.add_argument("--no-values", action="store_true", help="do not print counts on the bars")
    args = ap.parse_args(argv)

    try:
        runs = [load(p) for p in args.json]
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"error: {e}", file=sys.stderr)
        return 2

    groups = OrderedDict()
    for run in runs:
        key = (run["seq_len"], run["cp"], doc_label(run))
        groups.setdefault(key, []).append(run)

    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 4.2 * len(groups)), squeeze=False)
    for ax, ((seq, cp, docs), members) in zip(axes[:, 0], groups.items()):
        members.sort(key=lambda r: (LAYOUT_ORDER.get(r["layout"], 9), r.get("stripe_width", 1)))
        k = len(members)
        width = 0.8 / k
        top = max(max(r["per_rank"]) for r in members) or 1
        show_values = not args.no_values and k * cp <= 48
        for i, run in enumerate(members):
            xs = [g - 0.4 + width * (i + 0.5) for g in range(cp)]
            bars = ax.bar(xs, run["per_rank"], width, label=series_label(run),
                          color=COLORS.get(run["layout"]), edgecolor="black", linewidth=0.5)
            if show_values:
                crowded = k * cp > 16
                ax.bar_label(bars, labels=[compact(v) for v in run["per_rank"]],
                             fontsize=7 if crowded else 8, rotation=90 if crowded else 0,
                             padding=2)
        total = members[0].get("total_pairs", sum(members[0]["per_rank"]))
        ax.axhline(total / cp, color="gray", linestyle="--", linewidth=1,
                   label=f"balanced: all pairs / N = {compact(total / cp)}")
        ax.set_xticks(range(cp))
        ax.set_xticklabels([f"GPU {g}" for g in range(cp)], rotation=0 if cp <= 16 else 90)
        ax.set_xlabel("GPU (context-parallel rank)")
        ax.set_ylabel("causal (i, j) pairs computed [pairs]")
        ax.set_ylim(0, top * 1.35)  # room for the legend above the tallest bar
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: compact(v)))
        ax.set_title(f"Attention work per GPU: s = {tokens(seq)} tokens, N = {cp} GPUs, {docs}")
        ax.legend(fontsize=8, loc="upper center", ncol=2)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{args.out}.{ext}", dpi=150)
    print(f"wrote {args.out}.png and {args.out}.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main())
