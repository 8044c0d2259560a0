"""pareto: `cpsim plan`'s simulated layouts as throughput against peak memory per GPU.

Every layout the plan simulated is a point (SimGrid-verified ones filled, analytic ones open);
the Pareto front (no other layout is both faster and smaller) is the line; the best is labelled.
Layouts that lost before simulation (OOM, invalid, dominated, screened, over budget) are counted
in the title, not drawn. Input: `cpsim plan SCENARIO --gpus N --json F`.
"""
import argparse
import json

from plot_common import COLORS, die, load_json, plt, save


def front(points):
    """Pareto front of (memory, throughput): least memory for each throughput level."""
    out = []
    best = -1.0
    for p in sorted(points, key=lambda p: (p["mem"], -p["tps"])):
        if p["tps"] > best:
            out.append(p)
            best = p["tps"]
    return out


def pareto_title(j, simulated, width=80):
    """The title on lines of at most `width` characters: what was simulated, then the layouts
    that lost before simulation by reason (it was one line of a dozen counts, wider than the plot)."""
    import textwrap
    n = j.get("counts", {})
    lost = [f"{k.replace('_', ' ')} {v}" for k, v in sorted(n.items()) if k != "ranked" and v]
    head = f"cpsim plan on {j.get('gpus')} GPUs: {simulated} layouts simulated"
    if not lost:
        return head
    return head + "\n" + "\n".join(textwrap.wrap("not simulated: " + ", ".join(lost), width))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="cpsim_plot.py pareto", description=__doc__.split("\n\n")[0])
    ap.add_argument("plan", help="`cpsim plan --json` output")
    ap.add_argument("-o", "--out", default="pareto", help="output path without extension")
    ap.add_argument("--title", help="plot title")
    ap.add_argument("--data", help="also write the points and the front as JSON here")
    args = ap.parse_args(argv)
    j = load_json(args.plan)
    if "candidates" not in j:
        die(f"{args.plan}: not a `cpsim plan --json` file (no 'candidates')")
    pts = []
    for c in j["candidates"]:
        if c["status"] != "ranked" or not c.get("tokens_per_s"):
            continue
        pts.append({"label": c["label"], "mem": c["peak_bytes"] / 1e9, "tps": c["tokens_per_s"],
                    "verified": c.get("simgrid_step_s") is not None})
    if not pts:
        die(f"{args.plan}: no simulated layout to plot")
    fr = front(pts)
    fig, ax = plt.subplots(figsize=(8, 5))
    for verified in (False, True):
        sel = [p for p in pts if p["verified"] == verified]
        if sel:
            ax.scatter([p["mem"] for p in sel], [p["tps"] for p in sel], s=28,
                       facecolors=COLORS["compute"] if verified else "none", edgecolors=COLORS["compute"],
                       label="SimGrid (verified)" if verified else "analytic engine")
    ax.plot([p["mem"] for p in fr], [p["tps"] for p in fr], color=COLORS["critical"], drawstyle="steps-post",
            label="Pareto front")
    best = max(pts, key=lambda p: (p["tps"], -p["mem"]))
    ax.annotate(best["label"], (best["mem"], best["tps"]), textcoords="offset points", xytext=(-10, 8),
                ha="right", fontsize=7)
    cap = j.get("capacity_bytes", 0) / 1e9
    if cap:
        ax.axvline(cap, color="black", linestyle="--", linewidth=1, label=f"capacity {cap:.1f} GB")
    ax.set_xlabel("peak memory per GPU [GB]")
    ax.set_ylabel("throughput [tokens/s]")
    title = args.title or pareto_title(j, len(pts))
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, args.out)
    if args.data:
        with open(args.data, "w", encoding="utf-8") as f:
            json.dump({"points": pts, "front": fr, "title": title}, f, indent=1)
    return 0
