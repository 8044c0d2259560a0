"""memory: where each GPU's memory goes, one stacked bar per configuration.

Inputs are `cpsim memory --json` files, or one scenario YAML that this command evaluates with
`cpsim memory` for each value of --vary (and each --config). Each bar is the rank class with the
largest peak; the dashed line is the GPU's capacity; configurations that do not fit are hatched
and labelled OOM.

The lesson's 128K figures, one command each (build/cpsim):
  # no sharding, one GPU to eight: model states 444.5 GB, full-recompute activations 85.9 GB -> 10.7 GB
  cpsim_plot.py memory scenarios/anchor-128k-ring-zigzag.yaml --set parallel.zero_stage=0 \\
      --vary parallel.cp=1,2,4,8 -o mem-cp
  # CP 8 at 128K: each ZeRO stage
  cpsim_plot.py memory scenarios/anchor-128k-ring-zigzag.yaml --vary parallel.zero_stage=0,1,2,3 -o mem-zero
"""
import argparse
import json
import os
import subprocess
import tempfile

from plot_common import COLORS, PALETTE, die, load_json, plt, save

# Colour groups for the term names cpsim memory prints (substring match, first wins).
GROUPS = [
    ("weights", "weights", "#1f77b4"),
    ("gradients", "gradients", "#6baed6"),
    ("optimizer", "optimizer states", "#9ecae1"),
    ("activations: full-attention", "activations, full-attention layers", "#d62728"),
    ("activations: linear-attention", "activations, linear-attention layers", "#ff9896"),
    ("activations", "activations", "#e377c2"),
    ("logits", "logits and loss", "#2ca02c"),
    ("loss", "logits and loss", "#2ca02c"),
    ("context-parallel", "CP buffers", "#ff7f0e"),
    ("kv cache", "KV cache", "#8c564b"),
    ("CUDA context", "workspace (CUDA, NCCL, allocator)", "#c7c7c7"),
    ("NCCL buffers", "workspace (CUDA, NCCL, allocator)", "#c7c7c7"),
    ("cuBLAS", "workspace (CUDA, NCCL, allocator)", "#c7c7c7"),
    ("allocator", "workspace (CUDA, NCCL, allocator)", "#c7c7c7"),
]


def group_of(term):
    low = term.lower()
    for key, label, color in GROUPS:
        if key.lower() in low:
            return label, color
    return term, PALETTE[len(term) % len(PALETTE)]  # stable across runs (no str hash)


def run_memory(cpsim, scenario, sets, out):
    cmd = [cpsim, "memory", scenario, "--no-simulate", "--top", "0", "--json", out]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        die(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stderr.strip()}")
    return load_json(out)


def peak_class(j):
    classes = j.get("classes")
    if not classes:
        die(f"{j.get('scenario', '?')}: not a `cpsim memory --json` file (no 'classes')")
    return max(classes, key=lambda c: c["peak_bytes"])


def collect(args):
    """[(label, memory json)] in the order asked."""
    if all(p.endswith(".json") for p in args.inputs):
        if args.vary or args.config:
            die("--vary and --config apply to a scenario YAML input")
        return [(os.path.basename(p)[:-5], load_json(p)) for p in args.inputs]
    if len(args.inputs) != 1:
        die("give one scenario YAML, or `cpsim memory --json` files")
    configs = []
    if args.vary:
        key, _, values = args.vary.partition("=")
        if not values:
            die("--vary expects KEY=v1,v2,...")
        short = key.split(".")[-1]
        configs += [(f"{short} {v}", [f"{key}={v}"]) for v in values.split(",")]
    for c in args.config:
        label, _, sets = c.partition(":")
        configs.append((label, [s for s in sets.split(";") if s]))
    if not configs:
        configs = [("as given", [])]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, sets) in enumerate(configs):
            out.append((label, run_memory(args.cpsim, args.inputs[0], args.set + sets,
                                          os.path.join(tmp, f"{i}.json"))))
    return out


def bars(configs):
    """Per configuration: (label, class name, [(group, color, GB)], total GB, capacity GB, fits)."""
    rows = []
    for label, j in configs:
        c = peak_class(j)
        parts = {}
        colors = {}
        for t in c["terms"]:
            g, col = group_of(t["name"])
            # The bar is the reserved peak (the caching allocator's view); older files have bytes only.
            parts[g] = parts.get(g, 0.0) + t.get("reserved_bytes", t["bytes"]) / 1e9
            colors[g] = col
        rows.append({"label": label, "class": c["name"], "parts": parts, "colors": colors,
                     "total": c["peak_bytes"] / 1e9, "capacity": c["capacity_bytes"] / 1e9,
                     "fits": bool(c["fits"])})
    return rows


def tick_label(r, width=14):
    """A bar's label wrapped to its bar's width (long --config labels ran into their neighbours)."""
    import textwrap
    label = "\n".join(textwrap.wrap(r["label"], width, break_on_hyphens=False)) or r["label"]
    return label + ("" if r["class"] == "every rank" else "\n" + r["class"])


def overlaps(fig, ax):
    """Pairs of texts on the figure (bar totals, the capacity, tick labels, the legend) whose
    boxes overlap: what the plot test checks is empty."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    texts = [t for t in ax.texts + ax.get_xticklabels() if t.get_text()]
    boxes = [(t.get_text(), t.get_window_extent(r)) for t in texts]
    leg = ax.get_legend()
    if leg is not None:
        boxes.append(("legend", leg.get_window_extent(r)))
    out = []
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            if boxes[i][1].overlaps(boxes[j][1]):
                out.append([boxes[i][0], boxes[j][0]])
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="cpsim_plot.py memory", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="`cpsim memory --json` files, or one scenario YAML")
    ap.add_argument("-o", "--out", default="memory", help="output path without extension")
    ap.add_argument("--cpsim", default=os.environ.get("CPSIM", "build/cpsim"),
                    help="cpsim binary for YAML inputs (default $CPSIM or build/cpsim)")
    ap.add_argument("--set", action="append", default=[], help="override for every configuration")
    ap.add_argument("--vary", help="KEY=v1,v2,...: one bar per value")
    ap.add_argument("--config", action="append", default=[],
                    help="LABEL:key=v;key=v: one more bar (repeatable)")
    ap.add_argument("--title", help="plot title")
    ap.add_argument("--data", help="also write the bars as JSON here (for tests and tables)")
    ap.add_argument("--data-overlaps", action="store_true",
                    help="with --data: write {bars, overlaps}, the pairs of texts that overlap on the figure")
    args = ap.parse_args(argv)

    rows = bars(collect(args))
    groups = []
    for r in rows:
        for g in r["parts"]:
            if g not in groups:
                groups.append(g)
    order = [label for _, label, _ in GROUPS]
    groups.sort(key=lambda g: order.index(g) if g in order else len(order))

    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(rows) + 3), 5.2))
    x = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for g in groups:
        vals = [r["parts"].get(g, 0.0) for r in rows]
        col = next(r["colors"][g] for r in rows if g in r["colors"])
        ax.bar(x, vals, bottom=bottom, color=col, label=g, width=0.6, edgecolor="white", linewidth=0.5)
        bottom = [b + v for b, v in zip(bottom, vals)]
    cap = rows[0]["capacity"]
    top = max(max(r["total"] for r in rows), cap)
    ax.axhline(cap, color="black", linestyle="--", linewidth=1)
    # The capacity is named outside the bars, at the right-hand end of its line, so that no bar's
    # total can land on it; the legend hangs below it.
    ax.annotate(f"capacity\n{cap:.1f} GB", xy=(1.0, cap), xycoords=("axes fraction", "data"), xytext=(4, 0),
                textcoords="offset points", va="center", ha="left", fontsize=8)
    for i, r in enumerate(rows):
        if not r["fits"]:
            ax.bar([i], [r["total"]], width=0.6, fill=False, hatch="//", edgecolor=COLORS["failed"],
                   linewidth=0)
        # A total within a label's height of the capacity line sits above the line instead.
        y = r["total"]
        if abs(y - cap) < 0.05 * top:
            y = max(y, cap) + 0.01 * top
        ax.text(i, y, f"{r['total']:.1f} GB" + ("" if r["fits"] else " OOM"), ha="center",
                va="bottom", fontsize=8, color="black" if r["fits"] else COLORS["critical"],
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.8})
    ax.set_xticks(x)
    ax.set_xticklabels([tick_label(r) for r in rows], fontsize=8)
    ax.set_ylabel("memory per GPU [GB]")
    ax.set_ylim(0, top * 1.18)
    # The legend hangs on the side of the capacity label away from it.
    low = cap / (top * 1.18) > 0.5
    ax.legend(fontsize=7, loc="lower left" if low else "upper left", bbox_to_anchor=(1.01, 0.0 if low else 1.0),
              frameon=False)
    ax.set_title(args.title or "Memory per GPU by term (the rank class with the largest peak)", fontsize=10)
    fig.tight_layout()
    save(fig, args.out)
    if args.data:
        with open(args.data, "w", encoding="utf-8") as f:
            json.dump(rows if not args.data_overlaps else {"bars": rows, "overlaps": overlaps(fig, ax)}, f, indent=1)
    return 0
