#!/usr/bin/env python3
"""Run cpsim's validation suite: every validation/<area>/<case>.yaml holds one public
measurement, the cpsim command that predicts it, and the tolerance allowed.

    tools/validate.py build/cpsim              # table, median error; exit 1 on a breach
    tools/validate.py build/cpsim --markdown   # the table of docs/validation.md

Python 3 standard library only: the case files use a small YAML subset (top-level
`key: value`, flow lists `[a, "b"]`, quoted or plain scalars, # comments).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRED = ("name", "mechanism", "source", "command", "extract", "measured", "unit", "tolerance")


def scalar(text, where):
    text = text.strip()
    if not text:
        return ""
    if text[0] in "\"'":
        q = text[0]
        end = text.find(q, 1)
        if end < 0:
            raise ValueError(f"{where}: unterminated quote")
        return text[1:end]
    if "#" in text:
        text = text[: text.index(" #")] if " #" in text else text
    text = text.strip()
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        return text


def flow_list(text, where):
    inner = text.strip()
    if not (inner.startswith("[") and "]" in inner):
        raise ValueError(f"{where}: expected a [list]")
    inner = inner[1 : inner.rindex("]")]
    items, cur, quote = [], "", None
    for ch in inner:
        if quote:
            if ch == quote:
                quote = None
            else:
                cur += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ",":
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        items.append(cur.strip())
    return items


def load_case(path):
    case = {}
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            where = f"{path}:{no}"
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if ":" not in line:
                raise ValueError(f"{where}: expected 'key: value'")
            key, _, value = line.partition(":")
            key = key.strip()
            if key in case:
                raise ValueError(f"{where}: duplicate key '{key}'")
            case[key] = flow_list(value, where) if key == "command" else scalar(value, where)
    missing = [k for k in REQUIRED if k not in case]
    if missing:
        raise ValueError(f"{path}: missing key(s) {', '.join(missing)}")
    for k in ("measured", "tolerance"):
        if not isinstance(case[k], (int, float)):
            raise ValueError(f"{path}: '{k}' must be a number")
    return case


def extract(doc, path):
    cur = doc
    for part in path.replace("]", "").split("."):
        name, _, index = part.partition("[")
        if name:
            cur = cur[name]
        if index:
            cur = cur[int(index)]
    return float(cur)


def run_case(cpsim, case):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [cpsim] + [str(c) for c in case["command"]] + ["--json", out]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
        with open(out, encoding="utf-8") as f:
            return extract(json.load(f), case["extract"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cpsim", help="path to the cpsim binary")
    ap.add_argument("--markdown", action="store_true", help="print the table of docs/validation.md")
    ap.add_argument("--cases", default=os.path.join(ROOT, "validation"), help="case directory")
    args = ap.parse_args()
    cpsim = os.path.abspath(args.cpsim)
    paths = sorted(
        os.path.join(d, f) for d, _, fs in os.walk(args.cases) for f in fs if f.endswith(".yaml"))
    if not paths:
        print(f"validate: no cases under {args.cases}", file=sys.stderr)
        return 2
    rows, breaches, gaps, errors = [], 0, 0, []
    for p in paths:
        try:
            case = load_case(p)
            pred = run_case(cpsim, case)
        except Exception as e:  # one broken case must not hide the others
            print(f"validate: {os.path.relpath(p, ROOT)}: {e}", file=sys.stderr)
            breaches += 1
            continue
        err = (pred - case["measured"]) / case["measured"]
        ok = abs(err) <= case["tolerance"]
        # A known gap (`known_gap: why`) is a breach we have written down and not fixed: it is
        # shown on every run and in docs/validation.md, but does not fail the suite. Tuning a constant to
        # make it pass is exactly what the suite exists to prevent.
        gap = not ok and bool(case.get("known_gap"))
        breaches += 0 if ok or gap else 1
        gaps += 1 if gap else 0
        errors.append(abs(err))
        rows.append((case, pred, err, ok, os.path.relpath(p, ROOT)))
    median = statistics.median(errors) if errors else float("nan")
    if args.markdown:
        print("| case | mechanism | predicted | measured | error | tolerance | source |")
        print("|---|---|---:|---:|---:|---:|---|")
        for case, pred, err, ok, rel in rows:
            print(f"| `{case['name']}` | {case['mechanism']} | {pred:.4g} {case['unit']} | "
                  f"{case['measured']:.4g} {case['unit']} | {err:+.1%}{'' if ok else (' (known gap)' if case.get('known_gap') else ' ✗')} | "
                  f"±{case['tolerance']:.0%} | {case['source']} |")
        print(f"\nMedian absolute error over {len(rows)} cases: {median:.1%}; {gaps} known gap(s) "
              "outside their tolerance (each case file says why).")
    else:
        print(f"{'case':44} {'predicted':>12} {'measured':>12} {'error':>8} {'tol':>6}")
        for case, pred, err, ok, rel in rows:
            print(f"{case['name']:44} {pred:12.4g} {case['measured']:12.4g} {err:+8.1%} "
                  f"{case['tolerance']:6.0%}{'' if ok else ('  known gap' if case.get('known_gap') else '  BREACH')}")
        print(f"median |error| {median:.1%} over {len(rows)} cases; {breaches} breach(es), "
              f"{gaps} known gap(s)")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
