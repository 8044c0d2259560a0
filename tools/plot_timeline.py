"""timeline: a Gantt chart per GPU of one layer's forward and backward, from `cpsim run --trace`.

Each GPU gets one lane per stream (compute, CP send, CP receive, ...). Attention kernels, other
kernels and transfers have their own colours; other layers' and micro-batches' work inside the
window is drawn in light grey, and only what is left of a GPU's compute stream is hatched as
waiting; ops on the critical path (the trace's `critical` argument) are outlined in red. By
default: the first full-attention layer, its first micro-batch (ops of no micro-batch, such as
a layer's gradient sync, join it when the trace has only one), up to 16 GPUs.
"""
import argparse
from collections import Counter, defaultdict

import matplotlib.lines as mlines
import matplotlib.patches as mpatches

from plot_common import COLORS, die, load_json, plt, save


def pick_micro_batch(mbs):
    """The first real micro-batch (>= 0); -1 (no micro-batch) only when the layer has nothing
    else."""
    real = [m for m in mbs if m >= 0]
    return real[0] if real else (mbs[0] if mbs else -1)


def is_compute_stream(tname, pid, tid):
    name = tname.get((pid, tid), "")
    return name == "compute" or (tid == 1 and not name)


def merge_intervals(spans):
    out = []
    for s, f in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], f)
        else:
            out.append([s, f])
    return out


def pick_layer(events):
    """The first layer that runs full attention (an attention kernel with a shape), else the
    first layer with any op."""
    att = sorted({e["args"]["layer"] for e in events
                  if e["args"].get("layer", -1) >= 0 and "shape" in e["args"]})
    if att:
        return att[0]
    any_layer = sorted({e["args"].get("layer", -1) for e in events} - {-1})
    return any_layer[0] if any_layer else None


# Transfers coloured by the parallelism they serve (the stream's name prefix), each with a
# legend entry; the same split as the summary's "by kind" line.
KIND_COLORS = {"cp": COLORS["comm"], "tp": "#9467bd", "dp": "#8c564b", "pp": "#2ca02c", "ep": "#e377c2"}
KIND_NAMES = {"cp": "CP transfer (K,V / dK,dV)", "tp": "TP all-reduce / gather", "dp": "DP gradient sync",
              "pp": "PP activations / gradients", "ep": "EP dispatch / combine"}


def parse_time_us(text):
    """'1.5ms', '300us', '2s' or a bare number of microseconds."""
    t = text.strip()
    for suffix, mul in (("ms", 1e3), ("us", 1.0), ("µs", 1.0), ("s", 1e6)):
        if t.endswith(suffix):
            return float(t[:-len(suffix)]) * mul
    return float(t)


def parse_window(text):
    a, sep, b = (text or "").partition(":")
    if not sep:
        die(f"--window expects T0:T1 (e.g. 0:2ms), got '{text}'")
    try:
        t0 = parse_time_us(a) if a else None
        t1 = parse_time_us(b) if b else None
    except ValueError:
        die(f"--window expects times such as 1.5ms or 300us, got '{text}'")
    if t0 is not None and t1 is not None and t1 <= t0:
        die(f"--window: the end {b} is not after the start {a}")
    return t0, t1


def main(argv=None):
    ap = argparse.ArgumentParser(prog="cpsim_plot.py timeline", description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="file written by `cpsim run --trace`")
    ap.add_argument("-o", "--out", default="timeline", help="output path without extension")
    ap.add_argument("--layer", type=int, help="layer to show (default: the first full-attention layer)")
    ap.add_argument("--micro-batch", type=int, default=None,
                    help="micro-batch to show (default: the first one in the trace)")
    ap.add_argument("--ranks", help="GPUs to show, e.g. 0-3,7 (default: up to 16)")
    ap.add_argument("--window", help="time window T0:T1 since the layer's first op, e.g. 0:2ms "
                    "(either end may be left out)")
    ap.add_argument("--compare", action="append", default=[],
                    help="another trace drawn below on the same time axis (repeatable)")
    ap.add_argument("--title", help="plot title (default: from the trace)")
    ap.add_argument("--data", help="also write what is drawn (per panel: window, ops per colour) as JSON")
    args = ap.parse_args(argv)
    window = parse_window(args.window) if args.window else (None, None)
    panels = [prepare(path, args) for path in [args.trace] + args.compare]
    span = max(p["span_us"] for p in panels)
    lo = window[0] if window[0] is not None else 0.0
    hi = window[1] if window[1] is not None else span
    unit, div = ("ms", 1e3) if hi - lo >= 2000 else ("µs", 1.0)
    heights = [len(p["rows"]) for p in panels]
    fig_h = 2.2 + 0.3 * sum(heights) + 0.6 * (len(panels) - 1)
    fig, axes = plt.subplots(len(panels), 1, figsize=(13, fig_h), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    data = []
    kinds_seen = set()
    for ax, p in zip([a[0] for a in axes], panels):
        data.append(draw(ax, p, lo, hi, div, kinds_seen))
    axes[-1][0].set_xlabel(f"time since the layer's first op [{unit}]")
    if len(panels) > 1 and not args.title:
        fig.suptitle("Same time axis for every trace", fontsize=11)
    handles = [mpatches.Patch(color=COLORS["compute"], label="attention kernel"),
               mpatches.Patch(color=COLORS["compute2"], label="other kernel (merge, accumulate, ...)")]
    for k in ("cp", "tp", "pp", "dp", "ep", "other"):
        if k in kinds_seen:
            handles.append(mpatches.Patch(color=KIND_COLORS.get(k, COLORS["failed"]),
                                          label=KIND_NAMES.get(k, "other transfer")))
    if any(p["other"] for p in panels):
        handles.append(mpatches.Patch(color=COLORS["other_work"], label="other layers / micro-batches"))
    handles += [mpatches.Patch(facecolor="white", edgecolor=COLORS["idle"], hatch="////",
                               label="waiting (compute stream idle)"),
                mpatches.Patch(facecolor="white", edgecolor=COLORS["critical"], linewidth=1.6,
                               label="on the critical path")]
    if any(p["first_bwd"] and p["has_fwd"] for p in panels):
        handles.append(mlines.Line2D([], [], color="black", linewidth=2.2, label="backward starts (per GPU)"))
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.9 / fig_h + 0.02, 1, 1))
    save(fig, args.out)
    if args.data:
        import json
        with open(args.data, "w", encoding="utf-8") as f:
            json.dump({"unit": unit, "window_us": [lo, hi], "panels": data,
                       "legend": [h.get_label() for h in handles]}, f, indent=1)
    return 0


def prepare(path, args):
    trace = load_json(path)
    if not isinstance(trace, dict) or "traceEvents" not in trace:
        die(f"{path}: not a Chrome trace (no traceEvents)")
    ev = trace["traceEvents"]
    pname, tname = {}, {}
    for e in ev:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            pname[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            tname[(e["pid"], e["tid"])] = e["args"]["name"]
    ops = [e for e in ev if e.get("ph") == "X" and "args" in e]
    if not ops:
        die(f"{path}: no ops in the trace")
    all_ops = ops
    layer = args.layer if args.layer is not None else pick_layer(ops)
    if layer is not None:
        ops = [e for e in ops if e["args"].get("layer") == layer]
        if not ops:
            die(f"{path}: no ops of layer {layer}")
    mbs = sorted({e["args"].get("micro_batch", -1) for e in ops})
    mb = args.micro_batch if args.micro_batch is not None else pick_micro_batch(mbs)
    # Ops of no micro-batch (-1: a layer's gradient reduce-scatter, ZeRO-3 gathers) belong to
    # every micro-batch at once: shown with the only one, or alone when asked for.
    layer_wide = args.micro_batch is None and len([m for m in mbs if m >= 0]) <= 1
    ops = [e for e in ops if e["args"].get("micro_batch", -1) == mb
           or (layer_wide and e["args"].get("micro_batch", -1) < 0)]
    if not ops:
        die(f"{path}: no ops of micro-batch {mb} in layer {layer}")

    def rank_of(e):
        return e["args"].get("rank", e["pid"] - 1)

    ranks = sorted({rank_of(e) for e in ops})
    if args.ranks:
        want = set()
        for part in args.ranks.split(","):
            a, _, b = part.partition("-")
            want.update(range(int(a), int(b or a) + 1))
        ranks = [r for r in ranks if r in want]
    elif len(ranks) > 16:
        ranks = ranks[:16]
    if not ranks:
        die("no GPU left to show")
    ops = [e for e in ops if rank_of(e) in ranks]

    t0 = min(e["ts"] for e in ops)
    t1 = max(e["ts"] + e["dur"] for e in ops)
    span_us = max(t1 - t0, 1e-9)

    # Other layers' and micro-batches' work inside the window, per lane: a step runs them
    # between this layer's forward and backward, and its stream is busy then, not waiting.
    shown = {id(e) for e in ops}
    rank_set = set(ranks)
    other = defaultdict(list)
    for e in all_ops:
        if id(e) in shown or rank_of(e) not in rank_set:
            continue
        if e["ts"] < t1 and e["ts"] + e["dur"] > t0:
            other[(rank_of(e), e["tid"])].append((max(e["ts"], t0), min(e["ts"] + e["dur"], t1)))
    other = {k: merge_intervals(v) for k, v in other.items()}

    # Lanes: per GPU, its streams in stream order; the compute stream first.
    lanes = defaultdict(set)
    for e in ops:
        lanes[rank_of(e)].add(e["tid"])
    rows = []  # (rank, tid, pid)
    pid_of = {rank_of(e): e["pid"] for e in ops}
    for r in ranks:
        for tid in sorted(lanes[r]):
            rows.append((r, tid, pid_of[r]))
    ypos = {(r, tid): i for i, (r, tid, _) in enumerate(rows)}

    by_lane = defaultdict(list)
    for e in ops:
        by_lane[(rank_of(e), e["tid"])].append(e)
    # The backward starts with a GPU's first backward kernel on its compute stream: the host
    # stream launches kernels ahead of the GPU, and a backward transfer may start as soon as its
    # data exist.
    first_bwd = {}
    for e in ops:
        if e["args"].get("phase") == "bwd" and "bytes" not in e["args"] and is_compute_stream(tname, e["pid"], e["tid"]):
            r = rank_of(e)
            first_bwd[r] = min(first_bwd.get(r, e["ts"]), e["ts"])
    has_fwd = any(e["args"].get("phase") == "fwd" for e in ops)
    schemes = Counter(e["args"].get("scheme") for e in ops if e["args"].get("scheme"))
    scheme = schemes.most_common(1)[0][0] if schemes else ""
    title = args.title if (args.title and path == args.trace) else (
        f"{path.split('/')[-1]}: layer {layer} forward + backward on {len(ranks)} GPUs"
        + (f" ({scheme})" if scheme else "") + (f", micro-batch {mb}" if len(mbs) > 1 else ""))
    return {"ops": ops, "rows": rows, "ypos": ypos, "by_lane": by_lane, "t0": t0, "t1": t1,
            "span_us": span_us, "tname": tname, "pname": pname, "ranks": ranks, "rank_of": rank_of,
            "first_bwd": first_bwd, "has_fwd": has_fwd, "title": title, "layer": layer,
            "micro_batch": mb, "other": other}


def transfer_kind(stream_name):
    k = (stream_name or "").split("-")[0]
    return k if k in KIND_COLORS else "other"


def draw(ax, p, lo, hi, div, kinds_seen):
    ops, rows, ypos, by_lane, t0, t1 = p["ops"], p["rows"], p["ypos"], p["by_lane"], p["t0"], p["t1"]
    tname, pname, ranks, rank_of = p["tname"], p["pname"], p["ranks"], p["rank_of"]
    span_us = max(hi - lo, 1e-9)
    h = 0.72
    counts = Counter()
    for key, es in by_lane.items():
        y = ypos[key]
        for e in es:
            s_rel, f_rel = e["ts"] - t0, e["ts"] - t0 + e["dur"]
            if f_rel < lo or s_rel > hi:
                continue
            x = s_rel / div
            w = max(e["dur"] / div, span_us / div * 1e-4)
            comm = "bytes" in e["args"]
            if comm:
                kind = transfer_kind(tname.get((e["pid"], e["tid"]), ""))
                kinds_seen.add(kind)
                color = KIND_COLORS.get(kind, COLORS["failed"])
                counts[kind] += 1
            elif e.get("cat") == "attention" or "shape" in e["args"]:
                color = COLORS["compute"]
                counts["attention"] += 1
            else:
                color = COLORS["compute2"]
                counts["other kernel"] += 1
            crit = bool(e["args"].get("critical"))
            ax.barh(y, w, left=x, height=h, color=color,
                    edgecolor=COLORS["critical"] if crit else "white",
                    linewidth=1.6 if crit else 0.3, zorder=3 if crit else 2)

    # Other layers' and micro-batches' work on the shown lanes: one light-grey band per lane.
    other, other_us = p["other"], defaultdict(float)
    for r, tid, pid in rows:
        spans = other.get((r, tid), [])
        if not spans:
            continue
        ax.broken_barh([((s - t0) / div, (f - s) / div) for s, f in spans], (ypos[(r, tid)] - h / 2, h),
                       facecolors=COLORS["other_work"], edgecolors="none", zorder=1.5)
        if is_compute_stream(tname, pid, tid):
            other_us[r] += sum(f - s for s, f in spans)

    # Waiting: what is left of each GPU's compute stream inside the window, once this layer's
    # ops and the other work are taken out.
    waiting = {}
    for r, tid, pid in rows:
        if not is_compute_stream(tname, pid, tid):
            continue
        busy = merge_intervals([(e["ts"], e["ts"] + e["dur"]) for e in by_lane[(r, tid)]]
                               + [tuple(x) for x in other.get((r, tid), [])])
        cur = t0
        gaps = []
        for s, f in busy:
            if s > cur:
                gaps.append((cur, s))
            cur = max(cur, f)
        if cur < t1:
            gaps.append((cur, t1))
        gaps = [(s, f) for s, f in gaps if (f - s) >= span_us * 2e-3]
        waiting[r] = [[s - t0, f - t0] for s, f in gaps]
        for s, f in gaps:
            ax.barh(ypos[(r, tid)], (f - s) / div, left=(s - t0) / div, height=h,
                    color="none", edgecolor=COLORS["idle"], hatch="////", linewidth=0, zorder=1)

    # Forward / backward boundary, per GPU: its first backward kernel (transfers of the
    # backward may start earlier, as soon as their data exist).
    first_bwd, has_fwd = p["first_bwd"], p["has_fwd"]
    if first_bwd and has_fwd:
        for r in ranks:
            if r not in first_bwd:
                continue
            ys = [ypos[(r, tid)] for (rr, tid, _) in rows if rr == r]
            x = (first_bwd[r] - t0) / div
            ax.plot([x, x], [min(ys) - 0.45, max(ys) + 0.45], color="black", linewidth=2.2,
                    zorder=5, solid_capstyle="butt")

    labels = []
    prev = None
    for r, tid, pid in rows:
        stream = tname.get((pid, tid), f"stream {tid - 1}")
        gpu = pname.get(pid, f"GPU {r}")
        labels.append(f"{gpu}  {stream}" if r != prev else f"{gpu}  {stream}")
        prev = r
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    # Separate GPUs with light rules.
    for i in range(1, len(rows)):
        if rows[i][0] != rows[i - 1][0]:
            ax.axhline(i - 0.5, color="#999999", linewidth=0.6)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(lo / div, hi / div)
    ax.set_title(p["title"], fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    lanes = [f"GPU {r} {tname.get((pid, tid), f'stream {tid - 1}')}" for r, tid, pid in rows]
    # What is drawn, in microseconds since the window's first op, for tests and scripts.
    return {"title": p["title"], "ranks": ranks, "span_us": p["span_us"], "ops_drawn": dict(counts),
            "layer": p["layer"], "micro_batch": p["micro_batch"], "lanes": lanes,
            "t0_us": t0, "waiting_us": {str(r): w for r, w in waiting.items()},
            "other_work_us": {str(r): v for r, v in other_us.items()},
            "backward_starts_us": {str(r): first_bwd[r] - t0 for r in ranks if r in first_bwd}
            if (first_bwd and has_fwd) else {}}
