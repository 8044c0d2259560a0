"""measured: a profiled step and its simulation on one time axis, from `cpsim compare --timeline`.

Each profiled rank gets its measured lanes (one per CUDA stream, the profiler's kernels, the
profiled window's start at 0) and right below them its simulated lanes (cpsim's streams, the
simulated step's start at 0). Kernels have the same colour on both sides by class (attention,
GEMM, memory-bound, collective, p2p), the classes `cpsim compare` sums; a dashed line ends each
side's step. Where the two disagree is where to look: a class that is longer, a gap where the
simulation overlaps and the run does not.
"""
import argparse

import matplotlib.patches as mpatches

from plot_common import COLORS, die, load_json, plt, save

# The kernel classes of `cpsim compare` (and cpsim's own trace categories), one colour each.
CLASS_COLORS = {
    "attention": COLORS["compute"],
    "gemm": "#2ca02c",
    "memory": COLORS["compute2"],
    "linear-attention": "#17becf",
    "collective": COLORS["comm"],
    "p2p": "#d62728",
    "overhead": COLORS["idle"],
}
CLASS_NAMES = {
    "attention": "attention", "gemm": "GEMM", "memory": "memory-bound (norm, elementwise, ...)",
    "linear-attention": "linear attention", "collective": "collective (NCCL)",
    "p2p": "p2p send / receive", "overhead": "host / launch overhead (simulated only)",
}


def lanes_of(trace):
    """[(pid, tid, label, [(start, dur, class)])] in the trace's process then thread order."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        die("not a trace written by `cpsim compare --timeline` (no traceEvents)")
    pname, psort, tname, step_end = {}, {}, {}, {}
    spans = {}
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            a = e.get("args", {})
            if e.get("name") == "process_name":
                pname[e["pid"]] = a.get("name", "")
            elif e.get("name") == "process_sort_index":
                psort[e["pid"]] = a.get("sort_index", e["pid"])
            elif e.get("name") == "thread_name":
                tname[(e["pid"], e["tid"])] = a.get("name", "")
        elif ph == "X" and e.get("cat") == "step":
            step_end[e["pid"]] = float(e["ts"]) + float(e.get("dur", 0))
        elif ph == "X":
            spans.setdefault((e["pid"], e["tid"]), []).append(
                (float(e["ts"]), float(e.get("dur", 0)), e.get("cat", "memory")))
    lanes = []
    for pid, tid in sorted(spans, key=lambda k: (psort.get(k[0], k[0]), k[1])):
        label = f"{pname.get(pid, pid)} · {tname.get((pid, tid), tid)}"
        lanes.append((pid, tid, label, sorted(spans[(pid, tid)])))
    if not lanes:
        die("the trace has no kernels")
    return lanes, pname, step_end


def main(argv=None):
    ap = argparse.ArgumentParser(prog="cpsim_plot.py measured", description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="file written by `cpsim compare ... --timeline FILE`")
    ap.add_argument("-o", "--out", default="measured", help="output path without extension")
    ap.add_argument("--title", help="plot title")
    ap.add_argument("--data", help="also write what is drawn (per lane: busy time per class, end) as JSON")
    args = ap.parse_args(argv)
    lanes, pname, step_end = lanes_of(load_json(args.trace))
    # Each side's step: its "step" event (the profiled window, the simulated step), else its
    # last kernel's end.
    end_of = dict(step_end)
    for pid, _, _, sp in lanes:
        if pid not in step_end:
            end_of[pid] = max(end_of.get(pid, 0.0), max(s + d for s, d, _ in sp))
    span = max(end_of.values())
    unit, div = ("ms", 1e3) if span >= 2000 else ("µs", 1.0)
    fig_h = 1.8 + 0.32 * len(lanes)
    fig, ax = plt.subplots(figsize=(13, fig_h))
    seen, data = [], []
    for i, (pid, tid, label, sp) in enumerate(lanes):
        y = len(lanes) - 1 - i
        by_class = {}
        for c in sorted({c for _, _, c in sp}):
            bars = [(s / div, d / div) for s, d, cc in sp if cc == c]
            ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=CLASS_COLORS.get(c, COLORS["failed"]), linewidth=0)
            by_class[c] = sum(d for s, d, cc in sp if cc == c)
            if c not in seen:
                seen.append(c)
        side = "simulated" if "simulated" in str(pname.get(pid, "")) else "measured"
        ax.plot([end_of[pid] / div] * 2, [y - 0.45, y + 0.45], color="black", linestyle="--", linewidth=1)
        data.append({"lane": label, "side": side, "kernels": len(sp),
                     "busy_us_by_class": {k: round(v, 3) for k, v in by_class.items()},
                     "end_us": round(end_of[pid], 3)})
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([lab for _, _, lab, _ in reversed(lanes)], fontsize=8)
    ax.set_xlim(0, span / div * 1.02)
    ax.set_xlabel(f"time since the step's start, each side from its own [{unit}]")
    ax.set_title(args.title or "Profiled step (measured) and cpsim's simulation, one time axis", fontsize=11)
    order = [c for c in CLASS_COLORS if c in seen] + [c for c in seen if c not in CLASS_COLORS]
    handles = [mpatches.Patch(color=CLASS_COLORS.get(c, COLORS["failed"]), label=CLASS_NAMES.get(c, c))
               for c in order]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.7 / fig_h + 0.02, 1, 1))
    save(fig, args.out)
    if args.data:
        import json
        with open(args.data, "w", encoding="utf-8") as f:
            json.dump({"unit": unit, "span_us": round(span, 3), "lanes": data,
                       "legend": [h.get_label() for h in handles]}, f, indent=1)
    return 0
