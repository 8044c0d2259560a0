#!/usr/bin/python3
"""The data behind tools/cpsim_plot.py's figures (each command's --data JSON), on inputs made
here so that each case is exactly the one that went wrong:
  - sweep --logy: percent ticks read "90", not "9x10^1", and a 0 % series is still drawn;
  - sweep and heatmap: failed points (no result JSON, so no schedule) are counted, never a
    series or row called "None";
  - heatmap: times stay in ms, the unit the docs give, also above 1,000 ms;
  - memory: no two texts (bar totals, capacity, labels, legend) overlap;
  - pareto: the title is several short lines, not one crammed line;
  - measured: each profiled rank above its simulation, busy time per class as the trace has it.
Exit 77 (skipped) without matplotlib."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLOT = [sys.executable, os.path.join(ROOT, "tools", "cpsim_plot.py")]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def plot(args):
    p = subprocess.run(PLOT + args, capture_output=True, text=True)
    if p.returncode != 0:
        failures.append(f"{' '.join(args[:2])} exited {p.returncode}: {p.stderr.strip()}")
        print("FAIL:", failures[-1])
    return p.returncode == 0


def sweep_dir(d, rows, swept):
    """A `cpsim sweep -o` directory: results.csv and runs/<id>.json for the ok points."""
    os.makedirs(os.path.join(d, "runs"))
    metrics = ["step_time_s", "mfu"]
    with open(os.path.join(d, "results.csv"), "w") as f:
        f.write(",".join(["id", "status", "reason"] + swept + metrics) + "\n")
        for i, r in enumerate(rows):
            rid = f"{i:04d}"
            ok = r.get("status", "ok") == "ok"
            vals = [str(r.get(k, "")) for k in swept] + [str(r[m]) if ok else "" for m in metrics]
            f.write(",".join([rid, r.get("status", "ok"), r.get("reason", "")] + vals) + "\n")
            if ok:
                with open(os.path.join(d, "runs", rid + ".json"), "w") as j:
                    json.dump({"step_time_s": r["step_time_s"], "mfu": r["mfu"], "scope": "step",
                               "memory": {"fits": True},
                               "scenario": {"parallel": {"cp": 8, "attention": {"scheme": r["scheme"], "layout": "zigzag"}},
                                            "platform": {"name": "dgx-h100", "nodes": 1, "gpus_per_node": 8}}}, j)


def main():
    if subprocess.run([sys.executable, "-c", "import matplotlib"], capture_output=True).returncode != 0:
        print("skipped: no matplotlib")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        # --- sweep --logy with a percent metric, one series at 0 %.
        d = os.path.join(tmp, "pct")
        rows = [{"training.seq_len": s, "parallel.attention.scheme": sch, "scheme": sch, "step_time_s": 1.5,
                 "mfu": m}
                for sch, ms in (("ring", (0.85, 0.9, 0.95)), ("allgather", (0.0, 0.5, 0.6)))
                for s, m in zip(("16K", "32K", "64K"), ms)]
        sweep_dir(d, rows, ["training.seq_len", "parallel.attention.scheme"])
        out = os.path.join(tmp, "pct.json")
        if plot(["sweep", d, "--x", "training.seq_len", "--y", "mfu", "--series", "parallel.attention.scheme",
                 "--logy", "--data", out, "-o", os.path.join(tmp, "pct")]):
            data = json.load(open(out))
            ticks = data["panels"][0]["yticks"]
            check(ticks and not any("times" in t or "^" in t or "\u00d7" in t for t in ticks),
                  f"log-y percent ticks are plain numbers: {ticks}")
            ag = [s for s in data["series"] if s["series"] == "allgather"]
            check(ag and len(ag[0]["points"]) == 3 and ag[0]["points"][0][1] == 0.0,
                  f"the 0 % point of allgather is drawn: {ag}")
            check(data["panels"][0]["yscale"] == "symlog", f"a 0 on a log axis makes it symlog: {data['panels'][0]}")
        # The same without the zero series: a plain log axis, still plain ticks.
        d2 = os.path.join(tmp, "pct2")
        sweep_dir(d2, [r for r in rows if r["scheme"] == "ring"], ["training.seq_len", "parallel.attention.scheme"])
        out = os.path.join(tmp, "pct2.json")
        if plot(["sweep", d2, "--x", "training.seq_len", "--y", "mfu", "--logy", "--data", out,
                 "-o", os.path.join(tmp, "pct2")]):
            p = json.load(open(out))["panels"][0]
            check(p["yscale"] == "log" and "90" in p["yticks"] and not any("^" in t or "times" in t for t in p["yticks"]),
                  f"log axis over 85-95 %: ticks {p['yticks']}")
        # --- failed points with a derived series and a derived heatmap row.
        d3 = os.path.join(tmp, "failed")
        rows3 = [{"training.seq_len": s, "parallel.cp": cp, "scheme": sch, "step_time_s": t, "mfu": 0.4}
                 for s, cp, sch, t in (("16K", 8, "ring", 0.8), ("32K", 8, "ring", 1.5963),
                                       ("16K", 8, "ulysses", 0.9), ("32K", 8, "ulysses", 2.2))]
        rows3.append({"training.seq_len": "64K", "parallel.cp": 8, "status": "failed", "reason": "out of memory"})
        sweep_dir(d3, rows3, ["training.seq_len", "parallel.cp"])
        out = os.path.join(tmp, "failed.json")
        if plot(["sweep", d3, "--x", "training.seq_len", "--series", "schedule", "--data", out,
                 "-o", os.path.join(tmp, "failed")]):
            data = json.load(open(out))
            names = sorted({s["series"] for s in data["series"]})
            check(names == ["ring-zigzag", "ulysses"], f"series of the points that ran only: {names}")
            check("1 failed point not shown" in data["title"], f"the failure is counted: {data['title']}")
        out = os.path.join(tmp, "heat.json")
        if plot(["heatmap", d3, "--x", "training.seq_len", "--y", "schedule", "--data", out,
                 "-o", os.path.join(tmp, "heat")]):
            data = json.load(open(out))
            check("None" not in data["rows"], f"heatmap rows: {data['rows']}")
            check("1 failed point not shown" in data["title"], f"heatmap title counts it: {data['title']}")
            cell = [c for c in data["cells"] if c["row"] == "ring-zigzag" and c["column"] == "32K"]
            check(cell and cell[0]["unit"] == "ms" and abs(cell[0]["value"] - 1596.3) < 1e-6,
                  f"times stay in ms above 1,000 ms: {cell}, label {data['label']}")
            check(data["label"].endswith("[ms]"), f"the colour bar is in ms: {data['label']}")
        # --- memory: totals near the capacity line, long labels.
        caps = 85.9e9
        for name, total, fits in (("ZeRO-3 with chunked loss and full recomputation", 85.2e9, True),
                                  ("as given, CP 8 on one node", 97.1e9, False),
                                  ("CP 16 on two nodes with selective recomputation", 50.1e9, True)):
            terms = [{"name": "weights (bf16)", "bytes": total * 0.2}, {"name": "optimizer states", "bytes": total * 0.5},
                     {"name": "activations: full-attention layers (16)", "bytes": total * 0.27},
                     {"name": "CUDA context, NCCL buffers, allocator slack", "bytes": total * 0.03}]
            with open(os.path.join(tmp, name + ".json"), "w") as f:
                json.dump({"classes": [{"name": "every rank", "peak_bytes": total, "capacity_bytes": caps,
                                        "fits": fits, "terms": terms}]}, f)
        out = os.path.join(tmp, "mem.json")
        names = ["ZeRO-3 with chunked loss and full recomputation", "as given, CP 8 on one node",
                 "CP 16 on two nodes with selective recomputation"]
        if plot(["memory"] + [os.path.join(tmp, n + ".json") for n in names] +
                ["--data", out, "--data-overlaps", "-o", os.path.join(tmp, "mem")]):
            data = json.load(open(out))
            check(data["overlaps"] == [], f"memory plot texts overlap: {data['overlaps']}")
        # --- pareto title.
        plan = {"gpus": 8, "capacity_bytes": caps,
                "counts": {"ranked": 2, "oom": 1041, "dominated": 153, "screened": 50, "bounded": 0,
                           "over_budget": 24, "too_big": 0, "failed": 0, "invalid": 0},
                "candidates": [{"status": "ranked", "label": "tp1 cp4 pp1 dp2 v1 m2 ulysses rc=full z2",
                                "peak_bytes": 72.2e9, "tokens_per_s": 22607, "simgrid_step_s": None},
                               {"status": "ranked", "label": "tp2 cp2 pp1 dp2 v1 m2 ring-zigzag rc=full z1",
                                "peak_bytes": 70.3e9, "tokens_per_s": 22270, "simgrid_step_s": 23.5}]}
        with open(os.path.join(tmp, "plan.json"), "w") as f:
            json.dump(plan, f)
        out = os.path.join(tmp, "pareto.json")
        if plot(["pareto", os.path.join(tmp, "plan.json"), "--data", out, "-o", os.path.join(tmp, "pareto")]):
            title = json.load(open(out))["title"]
            lines = title.split("\n")
            check(len(lines) >= 2 and all(len(l) <= 80 for l in lines), f"pareto title lines: {lines}")
            check("oom 1041" in title and "bounded" not in title, f"losers by reason, zeros left out: {title}")
        # --- measured: a profiled rank and its simulation on one axis, lanes in process order,
        # each side's busy time per class as the trace has it.
        tl = {"traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "rank 0 simulated"}},
            {"ph": "M", "name": "process_sort_index", "pid": 2, "args": {"sort_index": 2}},
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "rank 0 measured (r0.json)"}},
            {"ph": "M", "name": "process_sort_index", "pid": 1, "args": {"sort_index": 1}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "stream 7"}},
            {"ph": "M", "name": "thread_name", "pid": 2, "tid": 1, "args": {"name": "compute"}},
            {"ph": "X", "pid": 2, "tid": 1, "ts": 0, "dur": 900, "cat": "gemm", "name": "qkv"},
            {"ph": "X", "pid": 2, "tid": 1, "ts": 900, "dur": 1200, "cat": "attention", "name": "attn"},
            {"ph": "X", "pid": 1, "tid": 7, "ts": 100, "dur": 1500, "cat": "gemm", "name": "nvjet"},
            {"ph": "X", "pid": 1, "tid": 7, "ts": 1600, "dur": 1000, "cat": "attention", "name": "flash_fwd"},
            {"ph": "X", "pid": 1, "tid": 7, "ts": 2600, "dur": 400, "cat": "collective", "name": "nccl"},
            {"ph": "X", "pid": 1, "tid": 0, "ts": 0, "dur": 3500, "cat": "step", "name": "ProfilerStep"}]}
        with open(os.path.join(tmp, "tl.json"), "w") as f:
            json.dump(tl, f)
        out = os.path.join(tmp, "measured.json")
        if plot(["measured", os.path.join(tmp, "tl.json"), "--data", out, "-o", os.path.join(tmp, "measured")]):
            data = json.load(open(out))
            lanes = data["lanes"]
            check([l["side"] for l in lanes] == ["measured", "simulated"], f"measured lane first, no step lane: {lanes}")
            check(lanes[0]["busy_us_by_class"] == {"attention": 1000, "collective": 400, "gemm": 1500},
                  f"measured busy time per class: {lanes[0]}")
            check(lanes[1]["end_us"] == 2100 and lanes[0]["end_us"] == 3500, f"each side's step end: {lanes}")
            check(data["unit"] == "ms" and data["span_us"] == 3500, f"one axis over both sides: {data}")
    print("plot_data_test: ok" if not failures else f"plot_data_test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
