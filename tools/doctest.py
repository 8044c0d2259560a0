#!/usr/bin/env python3
"""Run the commands quoted in README.md and docs/*.md and compare their output with the text
the page shows (SimGrid's .tesh idea), so that no quoted figure can go stale unnoticed.

    tools/doctest.py check [--cpsim BIN] [FILE...]   # diff on any change; exit 1
    tools/doctest.py regen [--cpsim BIN] [FILE...]   # rewrite the expected output on purpose
    tools/doctest.py list [FILE...]                  # the blocks and their commands

Two forms in Markdown (the full rules: docs/doctest.md):

1. A fenced block whose info string starts with `console`:

       ```console
       $ build/cpsim partition --seq 16 --cp 4 --layout contiguous
       cpsim partition: s = 16 tokens, cp = 4, layout contiguous, 1 document
       ...
       ```

   `$ ` starts a command (a line ending in `\\` continues it); the lines up to the next `$ `
   are its expected output, stdout and stderr together. In expected lines `[...]` matches any
   text within the line, and a line holding only `...` matches any number of lines. A last line
   `[exit N]` expects exit status N (else 0). Volatile text (wall times, elapsed seconds) is
   replaced by `[...]` before comparing (VOLATILE below), so `regen` writes it that way itself.
   The info string `console from=tests/golden/NAME.golden` takes the output from a golden file
   instead of running the command (for scenarios that take too long for this test): the golden
   test runs the same command, and this test checks that the command is the golden's.

2. A generated region, rendered as Markdown:

       <!-- doctest: python3 tools/validate.py build/cpsim --markdown -->
       ...the command's output, verbatim...
       <!-- /doctest -->

Commands run with bash in a scratch directory that links every top-level entry of the source
tree (so `scenarios/...` resolves and outputs land in the scratch directory), with
`build/cpsim` naming the binary under test. Python 3 standard library only.
"""
import argparse
import concurrent.futures
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILES = ["README.md", "docs/*.md"]
# Text that differs from run to run on the same input: replaced by [...] before comparing.
VOLATILE = [
    re.compile(r"(?<=ops in )[0-9.]+(?= s wall)"),        # run summary: simulated N ops in X s wall
    re.compile(r"(?<=\()[0-9.]+ s(?=\)$)"),               # sweep progress: (0.3 s)
    re.compile(r"(?<= in )[0-9]+m?[0-9]*s(?= -> )"),       # sweep: ... in 14s -> DIR
    re.compile(r"(?<=wall )[0-9.]+ s"),                    # samples: wall 12.3 s
    re.compile(r"(?<=; )[0-9.]+ s wall \([^)]*\)"),       # plan: 1.8 s wall (enumeration ...)
]
ELLIPSIS = "[...]"
COMMAND_TIMEOUT_S = 120


class Block:
    def __init__(self, path, line, kind, commands, origin=None):
        self.path, self.line, self.kind, self.origin = path, line, kind, origin
        self.commands = commands  # [(command, expected_lines, expected_rc)]
        self.start = self.end = 0  # line span of the expected text (generated regions)


def rel(path):
    return os.path.relpath(path, ROOT)


def parse(path):
    """Blocks of one Markdown file, and its lines."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(```+)console(.*)$", line)
        gen = re.match(r"^<!-- doctest: (.*) -->$", line)
        if fence:
            opts = dict(o.split("=", 1) for o in fence.group(2).split() if "=" in o)
            j = i + 1
            while j < len(lines) and lines[j] != fence.group(1):
                j += 1
            if j == len(lines):
                raise SystemExit(f"{rel(path)}:{i + 1}: console block never closed")
            b = Block(path, i + 1, "console", parse_console(path, i + 1, lines[i + 1:j]), opts.get("from"))
            b.start, b.end = i + 1, j
            blocks.append(b)
            i = j + 1
        elif gen:
            j = i + 1
            while j < len(lines) and lines[j] != "<!-- /doctest -->":
                j += 1
            if j == len(lines):
                raise SystemExit(f"{rel(path)}:{i + 1}: doctest region never closed (<!-- /doctest -->)")
            b = Block(path, i + 1, "region", [(gen.group(1), lines[i + 1:j], 0)])
            b.start, b.end = i + 1, j
            blocks.append(b)
            i = j + 1
        elif re.match(r"^(```+|~~~+)", line):  # any other fenced block: its text is not parsed
            close = re.match(r"^(```+|~~~+)", line).group(1)
            i += 1
            while i < len(lines) and lines[i] != close:
                i += 1
            i += 1
        else:
            i += 1
    return blocks, lines


def parse_console(path, first, body):
    commands, k = [], 0
    if body and not body[0].startswith("$ "):
        raise SystemExit(f"{rel(path)}:{first + 1}: a console block starts with a `$ ` command line")
    while k < len(body):
        cmd = body[k][2:]
        while cmd.endswith("\\") and k + 1 < len(body):
            k += 1
            cmd = cmd + "\n" + body[k]
        k += 1
        out = []
        while k < len(body) and not body[k].startswith("$ "):
            out.append(body[k])
            k += 1
        rc = 0
        if out and re.fullmatch(r"\[exit \d+\]", out[-1]):
            rc = int(out[-1][6:-1])
            out = out[:-1]
        commands.append((cmd, out, rc))
    return commands


def normalise(text):
    lines = text.rstrip("\n").split("\n") if text.strip("\n") else []
    out = []
    for line in lines:
        line = line.rstrip()
        for pattern in VOLATILE:
            line = pattern.sub(ELLIPSIS, line)
        out.append(line)
    return out


def line_matches(expected, actual):
    if ELLIPSIS not in expected:
        return expected == actual
    parts = [re.escape(p) for p in expected.split(ELLIPSIS)]
    return re.fullmatch(".*".join(parts), actual) is not None


def lines_match(expected, actual):
    """expected may hold `...` lines (any number of lines)."""
    memo = {}

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(expected):
            r = j == len(actual)
        elif expected[i] == "...":
            r = any(go(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            r = j < len(actual) and line_matches(expected[i], actual[j]) and go(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return go(0, 0)


def scratch_dir(cpsim):
    d = tempfile.mkdtemp(prefix="cpsim-doctest-")
    for name in os.listdir(ROOT):
        if name in ("build",) or name.startswith("."):
            continue
        os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    os.mkdir(os.path.join(d, "build"))
    os.symlink(os.path.abspath(cpsim), os.path.join(d, "build", "cpsim"))
    return d


def golden_output(block, cmd):
    """The summary a golden file pins, after checking that cmd is the golden's command."""
    golden = os.path.join(ROOT, block.origin)
    with open(golden, encoding="utf-8") as f:
        text = f.read().split("\n--- json")[0].split("\n")
    scenario = "scenarios/" + os.path.basename(golden)[: -len(".golden")] + ".yaml"
    args = next((l[len("# args:"):].strip() for l in text if l.startswith("# args:")), "")
    want = " ".join(["build/cpsim run", scenario] + ([args] if args else []))
    if " ".join(cmd.split()) != want:
        return None, f"the command is not the golden's: want `{want}`"
    return [l for l in text if not l.startswith("#")], None


def run_block(block, cpsim):
    """[(actual_lines, actual_rc, error)] for each command of the block."""
    results = []
    if block.origin:
        for cmd, _, _ in block.commands:
            out, err = golden_output(block, cmd)
            results.append((out or [], 0, err))
        return results
    d = scratch_dir(cpsim)
    try:
        env = dict(os.environ, COLUMNS="100", LC_ALL="C.UTF-8")
        env.pop("CPSIM_LOG", None)
        for cmd, _, _ in block.commands:
            try:
                p = subprocess.run(["bash", "-c", cmd], cwd=d, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   timeout=COMMAND_TIMEOUT_S)
                text = p.stdout.decode("utf-8", "replace").replace(d + "/", "")
                out = normalise(text) if block.kind == "console" else text.rstrip("\n").split("\n")
                results.append((out, p.returncode, None))
            except subprocess.TimeoutExpired:
                results.append(([], -1, f"timed out after {COMMAND_TIMEOUT_S} s"))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return results


def regen_lines(expected, actual):
    """actual, keeping the page's own elisions where they still match."""
    if not lines_match(expected, actual):
        if "..." in expected and expected[-1] == "..." and "..." not in expected[:-1]:
            keep = len(expected) - 1  # a head: keep showing the same number of lines
            return actual[:keep] + ["..."] if len(actual) > keep else actual
        kept = []
        for k, line in enumerate(actual):
            old = expected[k] if k < len(expected) else None
            kept.append(old if old and ELLIPSIS in old and line_matches(old, line) else line)
        return kept
    return expected


def render(block, new_commands):
    if block.kind == "region":
        return new_commands[0][1]
    body = []
    for cmd, out, rc in new_commands:
        body.extend(("$ " + cmd).split("\n"))
        body.extend(out)
        if rc:
            body.append(f"[exit {rc}]")
    return body


def files_from(args):
    import glob
    pats = args or DEFAULT_FILES
    files = []
    for p in pats:
        hits = sorted(glob.glob(os.path.join(ROOT, p))) if not os.path.isabs(p) else sorted(glob.glob(p))
        files.extend(hits if hits else [os.path.join(ROOT, p)])
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["check", "regen", "list"])
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md docs/*.md)")
    ap.add_argument("--cpsim", default=os.path.join(ROOT, "build", "cpsim"), help="binary under test")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_intermixed_args()
    parsed = {f: parse(f) for f in files_from(args.files)}
    blocks = [b for f in parsed for b in parsed[f][0]]
    if args.mode == "list":
        for b in blocks:
            for cmd, _, _ in b.commands:
                print(f"{rel(b.path)}:{b.line}: {'golden ' if b.origin else ''}{cmd.splitlines()[0]}")
        print(f"{len(blocks)} blocks, {sum(len(b.commands) for b in blocks)} commands")
        return 0
    if not os.access(args.cpsim, os.X_OK):
        print(f"doctest: no cpsim binary at {args.cpsim} (build it, or pass --cpsim)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda b: run_block(b, args.cpsim), blocks))
    failed, changed = 0, {}
    for b, res in zip(blocks, results):
        new = []
        for (cmd, want, want_rc), (got, rc, err) in zip(b.commands, res):
            where = f"{rel(b.path)}:{b.line}"
            if err:
                print(f"{where}: {cmd.splitlines()[0]}: {err}")
                failed += 1
                new.append((cmd, want, want_rc))
                continue
            ok = rc == want_rc and (lines_match(want, got) if b.kind == "console" else want == got)
            if args.mode == "check" and not ok:
                failed += 1
                print(f"{where}: `{cmd.splitlines()[0]}` differs from the page (exit {rc}, page says {want_rc}):")
                sys.stdout.writelines(l + "\n" for l in difflib.unified_diff(
                    want, got, "page", "now", lineterm="", n=2))
            new.append((cmd, want if ok else (regen_lines(want, got) if b.kind == "console" else got),
                        want_rc if ok else rc))
        if args.mode == "regen":
            lines = render(b, new)
            if b.kind == "console":
                old = parsed[b.path][1][b.start:b.end]
            else:
                old = parsed[b.path][1][b.start:b.end]
            if lines != old:
                changed.setdefault(b.path, []).append((b.start, b.end, lines))
    for path, edits in changed.items():
        lines = parsed[path][1]
        for start, end, new_lines in sorted(edits, reverse=True):
            lines[start:end] = new_lines
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"doctest: rewrote {len(edits)} block(s) in {rel(path)}")
    n = sum(len(b.commands) for b in blocks)
    print(f"doctest: {len(blocks)} blocks, {n} commands, {failed} failed, "
          f"{time.monotonic() - t0:.1f} s")
    if args.mode == "check" and failed:
        print("doctest: if the change is intended: tools/doctest.py regen (then review git diff)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
