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
        facets = order_values([str(sw.value(r, args.facet)) for r in rows])
    metrics = args.y or ["step_time_s"]
    scope = sw.scope()

    ncols = len(facets) * len(metrics)
    fig, axes = plt.subplots(1, ncols, figsize=(max(6.5, 5.2 * ncols), 4.6), squeeze=False)
    all_series = order_values([str(sw.value(r, series)) for r in rows]) if series else ["all"]
    color = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(all_series)}
    # Markers and dashes too, so that lines lying on top of each other stay visible.
    marker = {s: "osD^vP*X"[i % 8] for i, s in enumerate(all_series)}
    dash = {s: ["-", "--", "-.", ":"][i % 4] for i, s in enumerate(all_series)}
    xs_all = order_values([r[x] if x in r else str(sw.value(r, x)) for r in rows])
    numeric = all(parse_number(v) is not None for v in xs_all)
    failed_total = 0
    handles = OrderedDict()
    for fi, facet in enumerate(facets):
        frows = [r for r in rows if facet is None or str(sw.value(r, args.facet)) == facet]
        for mi, metric in enumerate(metrics):
            ax = axes[0][fi * len(metrics) + mi]
            ylabel, scale = metric_axis(metric, scope)
            for s in all_series:
                pts = []
                for r in frows:
                    if series and str(sw.value(r, series)) != s:
                        continue
                    xv = r[x] if x in r else str(sw.value(r, x))
                    v = metric_value(sw, r, metric)
                    if v is None:
                        failed_total += mi == 0
                        continue
                    pts.append((xv, v * scale))
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
                ax.set_yscale("log")
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
    if series:
        fig.legend(list(handles.values()), list(handles.keys()), title=axis_label(series),
                   loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title_fontsize=9)
    fig.tight_layout()
    save(fig, args.out)


def note_text(column, value):
    if column == "ring_degree":
        return f"ring {value}"
    if column == "parallel.attention.ulysses_degree":
        return f"Ulysses {value}"
    return f"{column.split('.')[-1]} {value}"


def plot_heatmap(sw, args):
    rows = filtered_rows(sw, args.where)
    if not args.x or not args.y:
        die("heatmap needs --x and --y (two swept columns)")
    metric = args.metric
    scope = sw.scope()
    label, scale = metric_axis(metric, scope)
    xv = order_values([str(sw.value(r, args.x)) for r in rows])
    yv = order_values([str(sw.value(r, args.y)) for r in rows])
    grid = np.full((len(yv), len(xv)), np.nan)
    failed = np.zeros((len(yv), len(xv)), dtype=bool)
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
    if np.all(np.isnan(grid)):
        die("no finished point to plot")
    fig, ax = plt.subplots(figsize=(1.25 * len(xv) + 3.2, 0.8 * len(yv) + 2.2))
    cmap = plt.get_cmap(args.cmap).copy()
    cmap.set_bad("#eeeeee")
    finite = grid[np.isfinite(grid)]
    norm = mcolors.Normalize(vmin=finite.min(), vmax=finite.max())
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, norm=norm, aspect="auto")
    pick = np.nanargmax if args.higher_is_better else np.nanargmin
    best_cells = set()
    if args.best == "all":
        best_cells.add(tuple(int(v) for v in np.unravel_index(pick(grid), grid.shape)))
    elif args.best == "row":
        for i in range(len(yv)):
            if np.isfinite(grid[i]).any():
                best_cells.add((i, int(pick(grid[i]))))
    elif args.best == "column":
        for j in range(len(xv)):
            if np.isfinite(grid[:, j]).any():
                best_cells.add((int(pick(grid[:, j])), j))
    for i in range(len(yv)):
        for j in range(len(xv)):
            if np.isfinite(grid[i, j]):
                rgb = cmap(norm(grid[i, j]))[:3]
                dark = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] < 0.5
                txt = f"{grid[i, j]:.3g}"
                if args.note and notes.get((i, j)) is not None:
                    txt += "\n" + note_text(args.note, notes[(i, j)])
                ax.text(j, i, txt, ha="center", va="center", fontsize=9,
                        color="white" if dark else "black",
                        weight="bold" if (i, j) in best_cells else "normal")
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
    cb.set_label(label)
    where = {"all": "", "row": " in each row", "column": " in each column"}.get(args.best)
    suffix = f" (best{where} outlined in red)" if where is not None else ""
    ax.set_title(args.title or f"{label.split(' [')[0]}{suffix}", fontsize=11)
    fig.tight_layout()
    save(fig, args.out)


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
        ap.add_argument("--logy", action="store_true", help="logarithmic y axis")
    else:
        ap.add_argument("--y", help="column on the y axis")
        ap.add_argument("--metric", default="step_time_s", help="metric in the cells (default step_time_s)")
        ap.add_argument("--cmap", default="viridis_r", help="matplotlib colour map")
        ap.add_argument("--note", help="a second line in each cell: this column's value "
                        "(e.g. ring_degree)")
        ap.add_argument("--best", choices=("all", "row", "column", "none"), default="all",
                        help="outline the best cell overall, per row or per column (default all)")
        ap.add_argument("--higher-is-better", action="store_true",
                        help="outline the largest value instead of the smallest")
    args = ap.parse_args(argv)
    sw = SweepDir(args.sweep)
    if cmd == "sweep":
        plot_lines(sw, args)
    else:
        plot_heatmap(sw, args)
    return 0
