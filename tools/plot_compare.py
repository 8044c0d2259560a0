"""compare: where the time goes, one stacked bar per run (schedule, platform, ...).

Each bar is the simulated time (step, layer or attention layer, as the runs were scoped) split
into the mean per GPU of compute, communication no compute hides (exposed), and idle time
(waiting on other GPUs, pipeline bubble). The three add up to the step time.
"""
import argparse
import os

from plot_common import (COLORS, SweepDir, die, load_result, plt, save, schedule_name,
                         scope_label, topology_name)


def run_label(r, vary):
    sc = r["scenario"]
    parts = []
    if "schedule" in vary:
        parts.append(schedule_name(sc))
    if "topology" in vary:
        parts.append(topology_name(sc).replace(" (", "\n("))
    if "seq" in vary:
        n = sc["training"]["seq_len"]
        parts.append(f"{n // 1024}K tokens" if n % 1024 == 0 else f"{n} tokens")
    if "scope" in vary:
        parts.append(r.get("scope", ""))
    if "name" in vary or not parts:
        parts.append(r.get("name", "?"))
    return "\n".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="cpsim_plot.py compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+",
                    help="result files of `cpsim run --json`, or one `cpsim sweep` output directory")
    ap.add_argument("-o", "--out", default="compare", help="output path without extension")
    ap.add_argument("--labels", help="comma-separated bar labels, in input order")
    ap.add_argument("--where", action="append", default=[],
                    help="sweep only: keep rows whose COLUMN=VALUE (repeatable)")
    ap.add_argument("--title", help="plot title")
    args = ap.parse_args(argv)

    runs = []
    if len(args.inputs) == 1 and os.path.isdir(args.inputs[0]):
        sw = SweepDir(args.inputs[0])
        for row in sw.rows:
            if any(str(sw.value(row, k)) != v for k, _, v in (w.partition("=") for w in args.where)):
                continue
            j = sw.run(row)
            if j is not None:
                runs.append(j)
        if not runs:
            die(f"{args.inputs[0]}: no finished run matches")
    else:
        if args.where:
            die("--where applies to a sweep directory")
        runs = [load_result(p) for p in args.inputs]

    # Label by what differs between the runs.
    vary = set()
    for key, fn in (("schedule", lambda r: schedule_name(r["scenario"])),
                    ("topology", lambda r: topology_name(r["scenario"])),
                    ("seq", lambda r: r["scenario"]["training"]["seq_len"]),
                    ("scope", lambda r: r.get("scope"))):
        if len({fn(r) for r in runs}) > 1:
            vary.add(key)
    labels = [run_label(r, vary) for r in runs]
    if len(set(labels)) < len(labels):
        labels = [run_label(r, vary | {"name"}) for r in runs]
    if args.labels:
        given = args.labels.split(",")
        if len(given) != len(runs):
            die(f"--labels has {len(given)} labels for {len(runs)} runs")
        labels = given

    steps = [r["step_time_s"] for r in runs]
    scale, unit = (1e3, "ms") if max(steps) < 2 else (1.0, "s")
    comp = [r["breakdown"]["compute_s"] * scale for r in runs]
    expo = [r["breakdown"]["exposed_comm_s"] * scale for r in runs]
    idle = [r["breakdown"]["idle_s"] * scale for r in runs]

    n = len(runs)
    fig, ax = plt.subplots(figsize=(max(6.5, 1.4 * n + 2.5), 5.2))
    x = range(n)
    ax.bar(x, comp, 0.62, color=COLORS["compute"], label="compute")
    ax.bar(x, expo, 0.62, bottom=comp, color=COLORS["exposed"], label="exposed communication")
    bottom2 = [a + b for a, b in zip(comp, expo)]
    ax.bar(x, idle, 0.62, bottom=bottom2, color=COLORS["idle"], hatch="////", edgecolor="white",
           label="idle (waiting on other GPUs, pipeline bubble)")
    top = max(s * scale for s in steps)
    any_oom = False
    for i, r in enumerate(runs):
        total = steps[i] * scale
        ov = r.get("attention", {}).get("overlap_fraction")
        txt = f"{total:.3g} {unit}"
        if ov is not None and r.get("attention", {}).get("comm_s", 0) > 0:
            txt += f"\nCP comm\n{100 * ov:.0f}% hidden"
        mem = r.get("memory", {})
        oom = mem.get("fits") is False
        if oom:
            # It could not run as configured: grey it out rather than show it as a result.
            any_oom = True
            ax.bar([i], [total], 0.62, color="white", alpha=0.55, hatch="xx", edgecolor=COLORS["failed"],
                   linewidth=0, zorder=3)
            txt += f"\nOOM {mem.get('peak_bytes_per_rank', 0) / 1e9:.0f} GB"
        ax.text(i, total + top * 0.015, txt, ha="center", va="bottom", fontsize=7.5,
                color=COLORS["critical"] if oom else "black")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=8, rotation=0 if n <= 8 else 30, ha="center" if n <= 8 else "right")
    scopes = {r.get("scope", "step") for r in runs}
    what = scope_label(scopes.pop()) if len(scopes) == 1 else "simulated time"
    ax.set_ylabel(f"{what} [{unit}]\nmean per GPU")
    ax.set_ylim(0, top * 1.3)
    names = {r["scenario"]["model"]["name"] for r in runs}
    seqs = {r["scenario"]["training"]["seq_len"] for r in runs}
    sub = ", ".join(sorted(names))
    if len(seqs) == 1:
        s = seqs.pop()
        sub += f", {s // 1024}K tokens" if s % 1024 == 0 else f", {s} tokens"
    ax.set_title(args.title or f"Where the time goes ({sub})")
    handles, names_ = ax.get_legend_handles_labels()
    if any_oom:
        import matplotlib.patches as mpatches
        handles.append(mpatches.Patch(facecolor="white", hatch="xx", edgecolor=COLORS["failed"],
                                      label="does not fit in memory (OOM): not runnable as configured"))
    ax.legend(handles=handles, fontsize=8, loc="upper left", ncol=2)
    ax.grid(axis="y", alpha=0.3)
    save(fig, args.out)
    return 0
