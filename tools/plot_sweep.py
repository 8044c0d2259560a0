"""sweep / heatmap: metrics of a `cpsim sweep` output directory against its swept axes.

sweep: a metric against one swept column, one line per schedule, topology or any other column
(optionally one panel per value of a further column). heatmap: a metric over two swept
columns, failed points drawn as grey cells with the word "failed".

Columns are results.csv's swept keys and metrics, or derived from each run's JSON: schedule,
topology, platform, ring_degree, or a JSON pointer such as /attention/comm_s.
"""
import argparse
import math
from collections import OrderedDict

import matplotlib.colors as mcolors
import numpy as np

from plot_common import (COLORS, PALETTE, SCHEDULE_ORDER, SweepDir, axis_label, die, metric_axis,
                         parse_number, plt, save, tokens)


def is_token_axis(column):
    return column in ("training.seq_len",) or column.endswith("seq_len")


def tick_text(column, value):
    v = parse_number(value)
    if v is not None and is_token_axis(column):
        return tokens(v)
    return str(value)


def order_values(values):
    """Numeric values ascending, otherwise known schedules first, then first appearance."""
    uniq = list(OrderedDict.fromkeys(values))
    nums = [parse_number(v) for v in uniq]
    if all(n is not None for n in nums):
        return [v for _, v in sorted(zip(nums, uniq))]
    rank = {s: i for i, s in enumerate(SCHEDULE_ORDER)}
    return sorted(uniq, key=lambda v: (rank.get(v, len(rank)), uniq.index(v)))


def filtered_rows(sw, where):
    conds = []
    for w in where:
        k, eq, v = w.partition("=")
        if not eq:
            die(f"--where expects COLUMN=VALUE, got '{w}'")
        conds.append((k, v))
    return [r for r in sw.rows if all(str(sw.value(r, k)) == v for k, v in conds)]


def metric_value(sw, row, metric):
    if row["status"] != "ok":
        return None
    v = sw.value(row, metric)
    if isinstance(v, bool):
        return float(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def does_not_fit(sw, row):
    """True when the point ran but its memory does not fit (results.csv `fits`, else the run's
    /memory/fits). Such points are drawn greyed and hatched and are never "best"."""
    if row.get("status") != "ok":
        return False
    v = row["fits"] if "fits" in row else sw.value(row, "/memory/fits")
    return str(v).lower() in ("false", "0", "no")


def check_unplotted(sw, rows, used, hint_for="series"):
    """Refuses a plot that would merge points differing in a swept column it does not show."""
    for c in sw.swept:
        if c in used:
            continue
        vals = {str(r.get(c, "")) for r in rows}
        if len(vals) > 1:
            hint = f"--series {c}, --facet {c}" if "series" in hint_for else f"--x {c}, --y {c}"
            die(f"swept column '{c}' takes {len(vals)} values ({', '.join(sorted(vals)[:4])}) but is "
                f"not plotted: pass {hint} or --where {c}=VALUE")


def shown_columns(sw, columns, where):
    """The swept columns a plot tells apart: those it shows, those --where fixes, and the swept
    keys a derived column (schedule, topology, platform) is made of."""
    used = set(columns) | {k for k, _, _ in (w.partition("=") for w in where)}
    if used & {"schedule", "topology", "platform"}:
        used |= {c for c in sw.swept if c.startswith("parallel.attention") or c.startswith("platform")}
    return used


def default_series(sw, rows, x):
    for cand in ("schedule", "topology"):
        vals = {sw.value(r, cand) for r in rows if r["status"] == "ok"}
        if len(vals) > 1:
            return cand
    rest = [c for c in sw.swept if c != x]
    return rest[0] if rest else None


def plot_lines(sw, args):
    rows = filtered_rows(sw, args.where)
    if not rows:
        die("no rows left after --where")
    x = args.x or next((c for c in sw.swept if all(parse_number(r[c]) is not None for r in rows)),
                       sw.swept[0] if sw.swept else None)
    if x is None:
        die("the sweep has no swept column; give --x")
    series = args.series or default_series(sw, rows, x)
    facets = [None]
    if args.facet:
        facets = order_values([str(v) for r in rows if (v := sw.value(r, args.facet)) is not None])
    metrics = args.y or ["step_time_s"]
    scope = sw.scope()
    check_unplotted(sw, rows, shown_columns(sw, [x, series, args.facet], args.where))

    panels = len(facets) * len(metrics)
    ncols = min(panels, 3)  # facets wrap into a grid instead of one row thousands of pixels wide
    nrows = (panels + ncols - 1) // ncols
    fig, axes_grid = plt.subplots(nrows, ncols, figsize=(max(6.5, 5.2 * ncols), 4.2 * nrows + 0.4),
                                  squeeze=False)
    axes = [[a for row in axes_grid for a in row]]
    for a in axes[0][panels:]:
        a.set_visible(False)
    # A failed point has no result JSON, so a derived series (schedule, topology) is None for it:
    # the series come from the points that ran, and failures are counted in the title instead.
    all_series = (order_values([str(v) for r in rows if (v := sw.value(r, series)) is not None]) if series
                  else ["all"])
    color = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(all_series)}
    # Markers and dashes too, so that lines lying on top of each other stay visible.
    marker = {s: "osD^vP*X"[i % 8] for i, s in enumerate(all_series)}
    dash = {s: ["-", "--", "-.", ":"][i % 4] for i, s in enumerate(all_series)}
    xs_all = order_values([r[x] if x in r else str(sw.value(r, x)) for r in rows])
    numeric = all(parse_number(v) is not None for v in xs_all)
    # Failed points whose facet is derived from a result they do not have: counted, not drawn.
    failed_total = sum(1 for r in rows if args.facet and sw.value(r, args.facet) is None)
    series_data = []
    handles = OrderedDict()
    for fi, facet in enumerate(facets):
        frows = [r for r in rows if facet is None or str(sw.value(r, args.facet)) == facet]
        for mi, metric in enumerate(metrics):
            ax = axes[0][fi * len(metrics) + mi]
            ylabel, scale = metric_axis(metric, scope)
            if mi == 0:
                failed_total += sum(1 for r in frows if metric_value(sw, r, metric) is None)
            plotted = []
            for s in all_series:
                pts = []
                oom = []
                for r in frows:
                    if series and str(sw.value(r, series)) != s:
                        continue
                    xv = r[x] if x in r else str(sw.value(r, x))
                    v = metric_value(sw, r, metric)
                    if v is None:
                        continue
                    if does_not_fit(sw, r):
                        oom.append((xv, v * scale))
                    pts.append((xv, v * scale))
                if oom:
                    ox = [parse_number(p[0]) if numeric else xs_all.index(p[0]) for p in oom]
                    h_oom = ax.scatter(ox, [p[1] for p in oom], s=90, marker="X", color=COLORS["failed"],
                                       zorder=6, label="does not fit in memory (OOM)")
                    handles.setdefault("does not fit in memory (OOM)", h_oom)
                if not pts:
                    continue
                if numeric:
                    pts.sort(key=lambda p: parse_number(p[0]))
                    px = [parse_number(p[0]) for p in pts]
                else:
                    pts.sort(key=lambda p: xs_all.index(p[0]))
                    px = [xs_all.index(p[0]) for p in pts]
                (line,) = ax.plot(px, [p[1] for p in pts], marker=marker[s], markersize=5,
                                  linewidth=1.6, linestyle=dash[s], color=color[s], label=s,
                                  markerfacecolor="none" if len(all_series) > 4 and marker[s] != "o" else color[s])
                handles.setdefault(s, line)
                plotted.extend(p[1] for p in pts)
                series_data.append({"panel": fi * len(metrics) + mi, "series": s,
                                    "points": [[p[0], p[1]] for p in pts]})
            if numeric:
                nums = [parse_number(v) for v in xs_all]
                if min(nums) > 0 and max(nums) / min(nums) >= 8:
                    ax.set_xscale("log", base=2)
                ax.set_xticks(nums)
                ax.set_xticklabels([tick_text(x, v) for v in xs_all])
                ax.minorticks_off()
            else:
                ax.set_xticks(range(len(xs_all)))
                ax.set_xticklabels(xs_all, rotation=20, ha="right")
            if args.logy:
                log_y(ax, plotted)
            else:
                ax.set_ylim(bottom=0)
            ax.set_xlabel(axis_label(x))
            ax.set_ylabel(ylabel)
            if facet is not None:
                ax.set_title(f"{axis_label(args.facet)}: {facet}", fontsize=10)
            ax.grid(alpha=0.3)
    title = args.title or f"{metric_axis(metrics[0], scope)[0].split(' [')[0]} vs {axis_label(x).split(' [')[0]}"
    if failed_total:
        title += f"  ({failed_total} failed point{'s' if failed_total > 1 else ''} not shown)"
    fig.suptitle(title, fontsize=12)
    if series or handles:
        fig.legend(list(handles.values()), list(handles.keys()), title=axis_label(series) if series else None,
                   loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title_fontsize=9)
    fig.tight_layout()
    if args.data:
        import json
        fig.canvas.draw()
        panels = [{"yscale": a.get_yscale(),
                   "yticks": [t.get_text() for t in a.get_yticklabels() + a.get_yticklabels(minor=True)
                              if t.get_text() and a.get_ylim()[0] <= t.get_position()[1] <= a.get_ylim()[1]]}
                  for a in axes[0] if a.get_visible()]
        with open(args.data, "w", encoding="utf-8") as f:
            json.dump({"title": title, "series": series_data, "panels": panels}, f, indent=1)
    save(fig, args.out)


def plain_number(v, _pos=None):
    """90 as "90", 0.5 as "0.5": not matplotlib's log-axis "9x10^1"."""
    return f"{v:g}"


def log_y(ax, values):
    """A logarithmic y axis with plain tick labels. With a value of 0 or less (an MFU of 0 %, no
    exposed communication) a log axis would drop the point, so the axis is symlog: linear
    below the smallest positive value, logarithmic above it."""
    from matplotlib import ticker
    positive = [v for v in values if v > 0]
    if len(positive) < len(values):
        ax.set_yscale("symlog", linthresh=min(positive) if positive else 1.0)
        ax.set_ylim(bottom=min(0.0, min(values)))
    else:
        ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(plain_number))
    # Minor ticks carry labels only when the axis spans less than a decade (else they crowd).
    lo, hi = (min(positive), max(positive)) if positive else (1.0, 1.0)
    few = hi / lo < 10
    ax.yaxis.set_minor_formatter(ticker.FuncFormatter(plain_number) if few else ticker.NullFormatter())


def note_text(column, value):
    if column == "ring_degree":
        return f"ring {value}"
    if column == "parallel.attention.ulysses_degree":
        return f"Ulysses {value}"
    return f"{column.split('.')[-1]} {value}"


def cell_number(v):
    """A heatmap cell's value: 3 significant digits, but never an exponent below a million."""
    return f"{v:.0f}" if 1000 <= abs(v) < 1e6 else f"{v:.3g}"


def plot_heatmap(sw, args):
    rows = filtered_rows(sw, args.where)
    if not args.x or not args.y:
        die("heatmap needs --x and --y (two swept columns)")
    # One cell per point, as `cpsim sweep --pivot` keeps one: never one point over another.
    check_unplotted(sw, rows, shown_columns(sw, [args.x, args.y], args.where), hint_for="heatmap")
    metric = args.metric
    scope = sw.scope()
    label, scale = metric_axis(metric, scope)
    # A failed point has no result JSON: a derived axis (schedule, topology) has no value for it,
    # so it has no cell; it is counted in the title rather than drawn in a row labelled "None".
    placed = [r for r in rows if sw.value(r, args.x) is not None and sw.value(r, args.y) is not None]
    unplaced = len(rows) - len(placed)
    rows = placed
    xv = order_values([str(sw.value(r, args.x)) for r in rows])
    yv = order_values([str(sw.value(r, args.y)) for r in rows])
    grid = np.full((len(yv), len(xv)), np.nan)
    failed = np.zeros((len(yv), len(xv)), dtype=bool)
    oom = np.zeros((len(yv), len(xv)), dtype=bool)
    present = np.zeros((len(yv), len(xv)), dtype=bool)
    notes = {}
    for r in rows:
        i, j = yv.index(str(sw.value(r, args.y))), xv.index(str(sw.value(r, args.x)))
        present[i, j] = True
        if args.note:
            notes[(i, j)] = sw.value(r, args.note)
        v = metric_value(sw, r, metric)
        if v is None:
            failed[i, j] = True
        else:
            grid[i, j] = v * scale
            oom[i, j] = does_not_fit(sw, r)
    if np.all(np.isnan(grid)):
        die("no finished point to plot")
    # The metric's own unit (times in ms), as every other plot and docs/workflow.md say; four
    # significant digits so that 1,596 ms does not read "1.6e+03".
    unit = label[label.rfind("[") + 1:-1] if label.endswith("]") else ""
    # OOM points never count as best; colour and ratios relative to each row's (or column's)
    # best fitting point, so that differences inside a row stay visible when rows differ by 10x.
    usable = np.where(oom, np.nan, grid)
    better = np.nanmax if args.higher_is_better else np.nanmin
    rel = args.color if args.color != "auto" else ("row" if args.best == "row" else
                                                   "column" if args.best == "column" else "absolute")
    ref = np.full(grid.shape, np.nan)
    for i in range(len(yv)):
        for j in range(len(xv)):
            if rel == "row" and np.isfinite(usable[i]).any():
                ref[i, j] = better(usable[i])
            elif rel == "column" and np.isfinite(usable[:, j]).any():
                ref[i, j] = better(usable[:, j])
            elif rel == "absolute" and np.isfinite(usable).any():
                ref[i, j] = better(usable)
    ratio = grid / ref if not args.higher_is_better else ref / grid
    shown = ratio if rel in ("row", "column") else grid
    fig, ax = plt.subplots(figsize=(1.35 * len(xv) + 3.4, 0.85 * len(yv) + 2.2))
    cmap = plt.get_cmap(args.cmap).copy()
    cmap.set_bad("#eeeeee")
    finite = shown[np.isfinite(shown)]
    norm = mcolors.Normalize(vmin=finite.min(), vmax=max(finite.max(), finite.min() * 1.0001))
    im = ax.imshow(np.ma.masked_invalid(np.where(oom, np.nan, shown)), cmap=cmap, norm=norm, aspect="auto")
    pick = np.nanargmax if args.higher_is_better else np.nanargmin
    best_cells = set()
    if np.isfinite(usable).any():
        if args.best == "all":
            best_cells.add(tuple(int(v) for v in np.unravel_index(pick(usable), usable.shape)))
        elif args.best == "row":
            for i in range(len(yv)):
                if np.isfinite(usable[i]).any():
                    best_cells.add((i, int(pick(usable[i]))))
        elif args.best == "column":
            for j in range(len(xv)):
                if np.isfinite(usable[:, j]).any():
                    best_cells.add((int(pick(usable[:, j])), j))
    cells = []
    for i in range(len(yv)):
        for j in range(len(xv)):
            if np.isfinite(grid[i, j]):
                txt = f"{cell_number(grid[i, j])} {unit}".strip()
                if (i, j) not in best_cells and np.isfinite(ratio[i, j]) and not oom[i, j]:
                    txt += f"\nx{ratio[i, j]:.2f}"
                if oom[i, j]:
                    txt += "\nOOM"
                    ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#dddddd",
                                               edgecolor=COLORS["failed"], hatch="///", linewidth=0))
                    color = "black"
                else:
                    rgb = cmap(norm(shown[i, j]))[:3]
                    dark = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] < 0.5
                    color = "white" if dark else "black"
                if args.note and notes.get((i, j)) is not None:
                    txt += "\n" + note_text(args.note, notes[(i, j)])
                ax.text(j, i, txt, ha="center", va="center", fontsize=8, color=color,
                        weight="bold" if (i, j) in best_cells else "normal")
                cells.append({"row": yv[i], "column": xv[j], "value": float(grid[i, j]), "unit": unit,
                              "ratio": float(ratio[i, j]) if np.isfinite(ratio[i, j]) else None,
                              "oom": bool(oom[i, j]), "best": (i, j) in best_cells})
            elif failed[i, j]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=COLORS["failed"], alpha=0.35))
                ax.text(j, i, "failed", ha="center", va="center", fontsize=8, color="black")
            elif not present[i, j]:
                ax.text(j, i, "-", ha="center", va="center", fontsize=8, color="#999999")
    for i, j in best_cells:
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False,
                                   edgecolor=COLORS["critical"], linewidth=2.2))
    ax.set_xticks(range(len(xv)))
    ax.set_xticklabels([tick_text(args.x, v) for v in xv])
    ax.set_yticks(range(len(yv)))
    ax.set_yticklabels([tick_text(args.y, v) for v in yv])
    ax.set_xlabel(axis_label(args.x))
    ax.set_ylabel(axis_label(args.y))
    cb = fig.colorbar(im, ax=ax)
    cb.set_label(f"ratio to the {rel}'s best" if rel in ("row", "column") else label)
    where = {"all": "", "row": " in each row", "column": " in each column"}.get(args.best)
    suffix = f" (best{where} outlined in red; others as x ratio to it)" if where is not None else ""
    if oom.any():
        suffix += "; hatched: does not fit in memory"
    if unplaced:
        suffix += f"; {unplaced} failed point{'s' if unplaced > 1 else ''} not shown"
    ax.set_title(args.title or f"{label.split(' [')[0]}{suffix}", fontsize=10)
    fig.tight_layout()
    save(fig, args.out)
    if args.data:
        import json
        with open(args.data, "w", encoding="utf-8") as f:
            json.dump({"label": label, "cells": cells, "rows": yv, "columns": xv,
                       "title": ax.get_title()}, f, indent=1)


def main(cmd, argv=None):
    ap = argparse.ArgumentParser(prog=f"cpsim_plot.py {cmd}", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n")[-1])
    ap.add_argument("sweep", help="a `cpsim sweep -o DIR` directory (or its results.csv)")
    ap.add_argument("-o", "--out", default=cmd, help="output path without extension")
    ap.add_argument("--where", action="append", default=[], help="keep rows whose COLUMN=VALUE (repeatable)")
    ap.add_argument("--title", help="plot title")
    ap.add_argument("--x", help="column on the x axis")
    if cmd == "sweep":
        ap.add_argument("--y", action="append", help="metric(s) on the y axis (default step_time_s); "
                        "repeat for side-by-side panels")
        ap.add_argument("--series", help="one line per value of this column (default: schedule or "
                        "topology, whichever varies)")
        ap.add_argument("--facet", help="one panel per value of this column")
        ap.add_argument("--logy", action="store_true", help="logarithmic y axis (symlog when a value is 0)")
        ap.add_argument("--data", help="also write the plotted series, y scales and tick labels as JSON")
    else:
        ap.add_argument("--y", help="column on the y axis")
        ap.add_argument("--metric", default="step_time_s", help="metric in the cells (default step_time_s)")
        ap.add_argument("--cmap", default="viridis_r", help="matplotlib colour map")
        ap.add_argument("--note", help="a second line in each cell: this column's value "
                        "(e.g. ring_degree)")
        ap.add_argument("--best", choices=("all", "row", "column", "none"), default="all",
                        help="outline the best cell overall, per row or per column (default all)")
        ap.add_argument("--color", choices=("auto", "row", "column", "absolute"), default="auto",
                        help="colour by ratio to the row's / column's best, or by the value "
                        "(default: follows --best)")
        ap.add_argument("--data", help="also write the cells (value, unit, ratio, OOM, best) as JSON")
        ap.add_argument("--higher-is-better", action="store_true",
                        help="outline the largest value instead of the smallest")
    args = ap.parse_args(argv)
    sw = SweepDir(args.sweep)
    if cmd == "sweep":
        plot_lines(sw, args)
    else:
        plot_heatmap(sw, args)
    return 0
