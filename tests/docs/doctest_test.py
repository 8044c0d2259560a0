#!/usr/bin/env python3
"""tools/doctest.py must fail when a page's figure differs from the command's output, pass when it
matches (with [...] and ... elisions), and `regen` must make a stale page pass again while
keeping its elisions. Usage: doctest_test.py CPSIM"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "doctest.py")
CPSIM = sys.argv[1]

PAGE = """# page
```console
$ build/cpsim partition --seq 16 --cp 4 --layout contiguous | tail -2
ratio to balanced:                      {ratio}
imbalance (max / mean pairs per GPU):   [...]
$ build/cpsim check scenarios/quickstart.yaml --set parallel.cp=5 2>&1 | head -1
scenarios/quickstart.yaml:9:12: error: [...]
...
[exit 0]
$ build/cpsim rnu
error: unknown subcommand 'rnu' (did you mean 'run'?)
[exit 2]
```
"""


def tool(mode, page):
    p = subprocess.run([sys.executable, TOOL, mode, "--cpsim", CPSIM, page], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "page.md")
        with open(page, "w") as f:
            f.write(PAGE.format(ratio="1.706x"))
        rc, out = tool("check", page)
        if rc != 0:
            print("FAIL: a page that matches was refused:\n" + out)
            failures += 1
        with open(page, "w") as f:
            f.write(PAGE.format(ratio="1.700x"))
        rc, out = tool("check", page)
        if rc != 1 or "-ratio to balanced:                      1.700x" not in out:
            print(f"FAIL: a stale figure was not reported (exit {rc}):\n" + out)
            failures += 1
        rc, out = tool("regen", page)
        text = open(page).read()
        if "1.706x" not in text or "imbalance (max / mean pairs per GPU):   [...]" not in text:
            print("FAIL: regen did not restore the figure or dropped an elision:\n" + text)
            failures += 1
        rc, out = tool("check", page)
        if rc != 0:
            print("FAIL: the regenerated page does not pass:\n" + out)
            failures += 1
    print("doctest_test: ok" if not failures else f"doctest_test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
