#!/usr/bin/env python3
"""The NCCL validation cases as a table of operation x node count: how many public figures each
cell holds, the median |error| of cpsim against them, and how many are known gaps.

    python3 validation/nccl/matrix.py build/cpsim

Runs every validation/nccl/*.yaml case with tools/validate.py's own loader and runner (the same
prediction `tools/validate.py` prints), in parallel. Python 3 standard library only.
"""
import argparse
import concurrent.futures
import importlib.util
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OPS = ["allreduce", "allgather", "reducescatter", "broadcast", "alltoall", "sendrecv"]
# Node-count columns; a case falls in the first whose upper bound holds it.
BUCKETS = [("1", 1), ("2", 2), ("3-5", 5), ("8", 8), ("16", 16), ("32-46", 46), (">=64", 10**9)]
# Nodes of a preset run without `--param nodes=`: platforms/*.yaml `nodes:` (h100-cluster: 2).
# gb200-nvl72 is 18 trays in one NVLink domain: counted as one node, the domain being the node.
PRESET_NODES = {"h100-cluster": 2}


def load_validate():
    spec = importlib.util.spec_from_file_location("validate", os.path.join(ROOT, "tools", "validate.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def op_and_nodes(case):
    cmd = [str(c) for c in case["command"]]
    op = cmd[cmd.index("--op") + 1] if "--op" in cmd else "?"
    nodes = PRESET_NODES.get(cmd[cmd.index("--platform") + 1], 1) if "--platform" in cmd else 1
    for i, c in enumerate(cmd[:-1]):
        if c == "--param" and cmd[i + 1].startswith("nodes="):
            nodes = int(cmd[i + 1].split("=", 1)[1])
    return op, nodes


def bucket(nodes):
    return next(label for label, top in BUCKETS if nodes <= top)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cpsim", help="path to the cpsim binary")
    ap.add_argument("--jobs", type=int, default=4, help="cases run at once (default 4)")
    args = ap.parse_args()
    v = load_validate()
    cpsim = os.path.abspath(args.cpsim)
    paths = sorted(os.path.join(HERE, f) for f in os.listdir(HERE) if f.endswith(".yaml"))
    cases = [v.load_case(p) for p in paths]

    def predict(case):
        return v.run_case(cpsim, case)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        preds = list(pool.map(predict, cases))

    cells = {}
    for case, pred in zip(cases, preds):
        err = (pred - case["measured"]) / case["measured"]
        gap = abs(err) > case["tolerance"] and bool(case.get("known_gap"))
        op, nodes = op_and_nodes(case)
        cells.setdefault((op, bucket(nodes)), []).append((abs(err), gap))

    print("| op \\ nodes | " + " | ".join(label for label, _ in BUCKETS) + " |")
    print("|---|" + "---:|" * len(BUCKETS))
    for op in OPS:
        row = []
        for label, _ in BUCKETS:
            got = cells.get((op, label), [])
            if not got:
                row.append("-")
                continue
            med = statistics.median(e for e, _ in got)
            gaps = sum(1 for _, g in got if g)
            row.append(f"{len(got)}: {med:.0%}" + (f" ({gaps} gap{'s' if gaps > 1 else ''})" if gaps else ""))
        print(f"| {op} | " + " | ".join(row) + " |")
    errs = [e for got in cells.values() for e, _ in got]
    gaps = sum(1 for got in cells.values() for _, g in got if g)
    print(f"\nCell: cases: median |error| (known gaps). {len(errs)} cases, median |error| "
          f"{statistics.median(errs):.1%}, {gaps} known gaps.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
