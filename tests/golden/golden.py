#!/usr/bin/env python3
"""Whole-output golden tests for the bundled scenarios (SimGrid's .tesh files are the model).

Each scenarios/<stem>.yaml has tests/golden/<stem>.golden: the run's summary text (less the
wall-clock line) followed by chosen JSON fields, printed to 10 significant digits. A change that
moves any of it fails with a unified diff; a change that moves it on purpose regenerates the
files with `regen` and the diff is reviewed in the commit.

  golden.py check  CPSIM SCENARIO.yaml      # exit 0 when equal, 1 with a diff, 77 when skipped
  golden.py regen  CPSIM [SCENARIO.yaml...] # rewrite (all bundled scenarios by default)

The header line `# args: ...` of a golden file holds the extra run arguments (heavy scenarios
use the analytic engine so that the suite stays within CI's time); `# heavy` marks the ones
skipped under sanitizers (CPSIM_GOLDEN_SKIP_HEAVY=1), where they would take minutes.
"""
import difflib
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent

# Extra arguments per scenario stem; anything not listed runs as bundled. The large
# meshes take 40-200 s with SimGrid on a loaded 2-core machine, so their golden output is the
# analytic engine's (both engines are pinned elsewhere: tests/engine/engines_test.cpp).
DEFAULT_ARGS = {
    "llama3-405b-16k-gpus": ["--engine", "analytic"],
    "llama3-70b-128k-1024-h100": ["--engine", "analytic"],
    "deepseek-v3-128k-32nodes": ["--engine", "analytic"],
    "llama3-70b-128k-fp8": ["--engine", "analytic"],
}
HEAVY = {"llama3-405b-16k-gpus", "llama3-70b-128k-1024-h100", "deepseek-v3-128k-32nodes",
         "llama3-70b-128k-fp8"}

JSON_FIELDS = [
    "step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "breakdown", "attention",
    "memory.peak_bytes_per_rank", "memory.fits", "memory.terms", "pricing",
    "bytes_per_link_class", "time_by_category_s", "straggler_rank", "communication", "ttft_s",
    "top_waits", "perturbations",
]


def fmt(v):
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, float):
        return format(v, ".10g")
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {fmt(v[k])}" for k in sorted(v)) + "}"
    return json.dumps(v)


def lookup(doc, path):
    cur = doc
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def render(cpsim, scenario, args):
    with tempfile.TemporaryDirectory(prefix="cpsim-golden-") as tmp:
        out = pathlib.Path(tmp) / "result.json"
        # Relative to the repository root, so that outputs naming the scenario (the OOM advice)
        # are the same in every clone.
        rel = os.path.relpath(pathlib.Path(scenario).resolve(), ROOT)
        cmd = [cpsim, "run", rel, "--json", str(out)] + args
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            raise SystemExit(f"golden: {' '.join(cmd)} exited {p.returncode}\n{p.stdout}{p.stderr}")
        # Off a terminal a run that succeeds writes nothing to stderr (progress draws on a
        # terminal only): a debugging print left in once went unnoticed.
        if p.stderr:
            raise SystemExit(f"golden: {' '.join(cmd)} wrote to stderr:\n{p.stderr[:2000]}")
        doc = json.loads(out.read_text())
    lines = [l.rstrip() for l in p.stdout.splitlines()
             if not l.lstrip().startswith("simulated ")]  # wall-clock time: not reproducible
    lines.append("--- json")
    for f in JSON_FIELDS:
        v = lookup(doc, f)
        if v is not None:
            lines.append(f"{f} = {fmt(v)}")
    return "\n".join(lines) + "\n"


def header(stem):
    h = [f"# golden output of scenarios/{stem}.yaml; regenerate: tests/golden/golden.py regen CPSIM"]
    h.append("# args: " + " ".join(DEFAULT_ARGS.get(stem, [])))
    if stem in HEAVY:
        h.append("# heavy")
    return "\n".join(h) + "\n"


def golden_path(scenario):
    return HERE / (pathlib.Path(scenario).stem + ".golden")


def check(cpsim, scenario):
    stem = pathlib.Path(scenario).stem
    gp = golden_path(scenario)
    if not gp.exists():
        print(f"golden: {gp} is missing; run tests/golden/golden.py regen {cpsim} {scenario}")
        return 1
    want = gp.read_text()
    if stem in HEAVY and os.environ.get("CPSIM_GOLDEN_SKIP_HEAVY") == "1":
        print(f"golden: {stem} skipped (heavy, sanitizer build)")
        return 77
    got = header(stem) + render(cpsim, scenario, DEFAULT_ARGS.get(stem, []))
    if got == want:
        print(f"golden: {stem} ok")
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        want.splitlines(True), got.splitlines(True), f"{gp.name} (recorded)", f"{gp.name} (now)"))
    print(f"golden: {stem} differs; if on purpose: tests/golden/golden.py regen {cpsim} {scenario}")
    return 1


def regen(cpsim, scenarios):
    for s in scenarios:
        stem = pathlib.Path(s).stem
        golden_path(s).write_text(header(stem) + render(cpsim, s, DEFAULT_ARGS.get(stem, [])))
        print(f"golden: wrote {golden_path(s).relative_to(ROOT)}")
    return 0


def main(argv):
    if len(argv) < 3 or argv[1] not in ("check", "regen"):
        print(__doc__, file=sys.stderr)
        return 2
    cpsim = str(pathlib.Path(argv[2]).resolve())
    if argv[1] == "check":
        if len(argv) != 4:
            print("golden: check takes one scenario", file=sys.stderr)
            return 2
        return check(cpsim, argv[3])
    scenarios = argv[3:] or sorted(str(p) for p in (ROOT / "scenarios").glob("*.yaml"))
    return regen(cpsim, scenarios)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
