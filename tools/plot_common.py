"""Shared helpers for cpsim's plot commands: reading cpsim's JSON and CSV, units, saving.

Reads only what cpsim writes (`cpsim run --json/--trace`, `cpsim sweep` directories); needs
Debian's python3-matplotlib (run with /usr/bin/python3).
"""
import csv
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "cpsim"  # stable ids: regenerated SVGs diff cleanly
import matplotlib.pyplot as plt  # noqa: E402

# One colour per role, the same in every plot.
COLORS = {
    "compute": "#1f77b4",       # attention and other kernels
    "compute2": "#6baed6",      # non-attention kernels (merges, norms, GEMMs)
    "comm": "#ff7f0e",          # transfers
    "exposed": "#ff7f0e",
    "idle": "#c7c7c7",          # waiting / bubble
    "other_work": "#e4e4e4",    # a timeline's other layers and micro-batches
    "critical": "#d62728",
    "failed": "#7f7f7f",
}

# Stable colours for schedules and platforms across plots.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]

SCHEDULE_ORDER = ["ring-contiguous", "ring-zigzag", "ring-striped", "allgather", "ulysses"]

# Metric columns of results.csv: label, unit, scale for display.
METRICS = {
    "step_time_s": ("time per step", "ms", 1e3),
    "tokens_per_s": ("throughput", "tokens/s", 1.0),
    "tflops_per_gpu": ("model TFLOP/s per GPU", "TFLOP/s", 1.0),
    "mfu": ("model FLOPs utilisation", "%", 100.0),
    "exposed_comm_s": ("exposed communication (mean per GPU)", "ms", 1e3),
    "overlap_fraction": ("CP communication hidden behind compute", "%", 100.0),
    "imbalance": ("attention imbalance (max / mean over GPUs)", "ratio", 1.0),
    "peak_bytes_per_rank": ("peak memory per GPU", "GB", 1e-9),
    "sim_wall_s": ("simulator wall time", "s", 1.0),
}


def die(msg, code=2):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)


def load_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        die(f"{path}: {e}")


def load_result(path):
    r = load_json(path)
    for key in ("step_time_s", "breakdown", "scenario"):
        if key not in r:
            die(f"{path}: not a `cpsim run --json` result (no '{key}')")
    return r


def scope_label(scope):
    return {"attention-layer": "time of one attention layer (fwd + bwd)",
            "layer": "time of one layer (fwd + bwd)"}.get(scope, "time per step")


def schedule_name(scenario):
    """'ring-zigzag', 'allgather', 'ulysses', 'usp u2 x ring 4' from a result's scenario echo."""
    p = scenario.get("parallel", {})
    a = p.get("attention", {})
    s = a.get("scheme", "?")
    if s in ("ring", "double-ring"):
        return f"{s}-{a.get('layout', '?')}"
    if s == "usp":
        u = a.get("ulysses_degree", 0) or 1
        return f"usp u{u} x ring {max(1, p.get('cp', 1) // u)}"
    return s


def topology_name(scenario):
    """'dgx-h100 (1x8, nvswitch)' from a result's scenario echo."""
    pl = scenario.get("platform", {})
    nodes, per = pl.get("nodes", 1), pl.get("gpus_per_node", 0)
    fabric = pl.get("intra", {}).get("fabric", "")
    net = "" if nodes <= 1 else ", IB"
    return f"{pl.get('name', '?')} ({nodes}x{per}, {fabric}{net})"


def tokens(n):
    n = int(n)
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def parse_number(text):
    """'16K' -> 16384, '1M' -> 1048576, '0.5' -> 0.5, 'true' -> None (not a number)."""
    t = str(text).strip()
    if not t:
        return None
    mult = 1
    if t[-1] in "KkMG" and len(t) > 1:
        mult = {"K": 1 << 10, "k": 1 << 10, "M": 1 << 20, "G": 1 << 30}[t[-1]]
        t = t[:-1]
    try:
        v = float(t) * mult
    except ValueError:
        return None
    return v if math.isfinite(v) else None


class SweepDir:
    """A `cpsim sweep -o DIR` directory: results.csv (or a results.*.csv shard) and runs/."""

    FIXED = ("id", "status", "reason")

    def __init__(self, path):
        if os.path.isdir(path):
            self.dir = path
            csvs = [os.path.join(path, "results.csv")]
            if not os.path.exists(csvs[0]):
                csvs = sorted(os.path.join(path, f) for f in os.listdir(path)
                              if f.startswith("results.") and f.endswith(".csv"))
        else:
            self.dir = os.path.dirname(path) or "."
            csvs = [path]
        self.rows = []
        header = None
        for c in csvs:
            try:
                with open(c, newline="", encoding="utf-8") as f:
                    rd = csv.DictReader(f)
                    header = header or rd.fieldnames
                    self.rows.extend(rd)
            except OSError as e:
                die(f"{c}: {e}")
        if not header or "status" not in header:
            die(f"{path}: not a `cpsim sweep` output (no results.csv with a status column)")
        self.rows.sort(key=lambda r: r["id"])
        first_metric = header.index("step_time_s") if "step_time_s" in header else len(header)
        self.swept = [h for h in header[3:first_metric]]
        self.metrics = header[first_metric:]
        self._runs = {}

    def run(self, row):
        """The result JSON of an ok row, or None."""
        if row["status"] != "ok":
            return None
        rid = row["id"]
        if rid not in self._runs:
            p = os.path.join(self.dir, "runs", rid + ".json")
            self._runs[rid] = load_json(p) if os.path.exists(p) else None
        return self._runs[rid]

    def scope(self):
        for r in self.rows:
            j = self.run(r)
            if j:
                return j.get("scope", "step")
        return "step"

    def value(self, row, column):
        """A CSV column, or one derived from the run: schedule, topology, platform, ring_degree,
        or any JSON pointer into the result such as /attention/comm_s."""
        if column in row:
            return row[column]
        if column == "ring_degree":
            cp = parse_number(row.get("parallel.cp", ""))
            u = parse_number(row.get("parallel.attention.ulysses_degree", ""))
            if cp and u:
                return str(int(cp // u)) if cp % u == 0 else f"{cp / u:g}"
        j = self.run(row)
        if j is None:
            return None
        sc = j.get("scenario", {})
        if column == "schedule":
            return schedule_name(sc)
        if column == "topology":
            return topology_name(sc)
        if column == "platform":
            return sc.get("platform", {}).get("name")
        if column == "ring_degree":
            p = sc.get("parallel", {})
            u = p.get("attention", {}).get("ulysses_degree", 0) or 1
            return str(p.get("cp", 1) // u)
        if column.startswith("/"):
            cur = j
            for part in column.strip("/").split("/"):
                if isinstance(cur, dict) and part in cur:
                    cur = cur[part]
                else:
                    return None
            return cur
        die(f"no column '{column}' in the sweep (columns: {', '.join(self.swept + self.metrics)}; "
            "derived: schedule, topology, platform, ring_degree, /json/pointer)")


def metric_axis(column, scope="step"):
    """(label with unit, scale) for a metric column or JSON pointer."""
    if column in METRICS:
        label, unit, scale = METRICS[column]
        if column == "step_time_s":
            label = scope_label(scope)
        return f"{label} [{unit}]", scale
    name = column.strip("/").replace("/", " ")
    if name.endswith("_s"):
        return f"{name[:-2].replace('_', ' ')} [ms]", 1e3
    if name.endswith("bytes") or "bytes_" in name:
        return f"{name.replace('_', ' ')} [GB]", 1e-9
    return name.replace("_", " "), 1.0


def axis_label(column):
    """A swept key as an axis label with its unit."""
    names = {
        "training.seq_len": "sequence length [tokens]",
        "parallel.cp": "context-parallel degree [GPUs]",
        "parallel.attention.ulysses_degree": "Ulysses degree [GPUs]",
        "ring_degree": "ring degree [GPUs]",
        "platform.nodes": "nodes",
        "platform.network.nic.bw": "NIC bandwidth per direction",
        "parallel.attention.scheme": "attention scheme",
        "schedule": "schedule",
        "topology": "topology",
    }
    return names.get(column, column)


def save(fig, out):
    d = os.path.dirname(out)
    if d:
        os.makedirs(d, exist_ok=True)
    for ext in ("png", "svg"):
        fig.savefig(f"{out}.{ext}", dpi=150, bbox_inches="tight",
                    metadata={"Date": None} if ext == "svg" else None)
    plt.close(fig)
    print(f"wrote {out}.png and {out}.svg")
