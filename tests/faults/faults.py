#!/usr/bin/env python3
"""Fault injection: every subcommand of cpsim under every fault a user's machine can throw at it.

Faults: stdout on /dev/full, stdout closed, stdout a pipe whose reader is gone with SIGPIPE
ignored, stderr closed, the output file on /dev/full, `ulimit -f`, a full file system (a small
tmpfs; needs root, else skipped), `ulimit -v`, and SIGINT/SIGTERM/SIGKILL at a seeded random
moment.
What must hold after each: never exit 0 with output lost; never a crash (a signal other than
the one sent, or a C++ runtime abort); a failed write says which output in one line; no
temporary file left; a previous output file never destroyed; no cpsim process left running
(checked over the whole session the command was started in, grandchildren included).

  faults.py CPSIM [--seed N] [--list]

Runs in well under 2 minutes on a loaded 2-core machine: every command is a small scenario.
Prints one line per subcommand x fault, and the failures; exit 1 if any.
"""
import argparse
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TINY = """name: tiny
platform: dgx-h100
model: qwen3.8-27b
training:
  seq_len: 16K
parallel:
  cp: 8
  attention:
    scheme: ring
    layout: zigzag
simulation:
  engine: analytic
  scope: attention-layer
"""
SWEEP = """name: faults
base: tiny.yaml
axes:
  training.seq_len: [4K, 8K, 16K, 32K]
"""
HF = ('{"model_type":"llama","num_hidden_layers":32,"hidden_size":4096,"num_attention_heads":32,'
      '"num_key_value_heads":8,"intermediate_size":14336,"vocab_size":128256}\n')
MEGATRON = ["--num-layers", "4", "--hidden-size", "1024", "--num-attention-heads", "8",
            "--ffn-hidden-size", "4096", "--vocab-size", "32000", "--seq-length", "4096",
            "--platform", "dgx-h100", "--nodes", "1"]


def subcommands(work):
    """name -> (argv after cpsim with {OUT} where the output file goes, or None; stdout used)."""
    t = os.path.join(work, "tiny.yaml")
    sw = os.path.join(work, "sweep.yaml")
    return {
        "run": (["run", t, "--json", "{OUT}"], True),
        "run --samples": (["run", t, "--set", "simulation.scope=step", "--samples", "4", "-j", "2",
                           "--json", "{OUT}"], True),
        "run --trace": (["run", t, "--set", "simulation.scope=step", "--set", "simulation.engine=simgrid",
                         "--trace", "{OUT}"], True),
        "check": (["check", t], True),
        "kernels shapes": (["kernels", "shapes", t], True),
        "kernels price": (["kernels", "price", "--platform", "dgx-h100", "--json", "{OUT}"], True),
        "kernels gdn": (["kernels", "gdn", "--platform", "dgx-h100", "--json", "{OUT}"], True),
        "partition": (["partition", "--seq", "16K", "--cp", "4", "--layout", "zigzag", "--json", "{OUT}"], True),
        "collective": (["collective", "--platform", "dgx-h100", "--op", "allreduce", "-b", "1K", "-e", "64K",
                        "--json", "{OUT}"], True),
        "sweep --list": (["sweep", sw, "--list"], True),
        "sweep": (["sweep", sw, "-j", "2", "-o", "{OUTDIR}"], True),
        "import hf": (["import", "hf", os.path.join(work, "config.json")], True),
        "import hf -o": (["import", "hf", os.path.join(work, "config.json"), "-o", "{OUT}"], False),
        "import megatron": (["import", "megatron", "--"] + MEGATRON, True),
        "import megatron -o": (["import", "megatron", "-o", "{OUT}", "--"] + MEGATRON, False),
        "memory": (["memory", t], True),
        "plan": (["plan", t, "--set", "simulation.scope=step", "--gpus", "8", "--budget", "4", "--verify", "1",
                  "-j", "2", "--json", "{OUT}"], True),
    }


def session_left(sid):
    """Pids still alive in session `sid` (the command and everything it started)."""
    left = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            left.append(int(d))
    return left


def catches(pid, sig):
    """Whether process `pid` has a handler for signal `sig` (/proc/PID/status SigCgt)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return (int(line.split()[1], 16) >> (sig - 1)) & 1 == 1
    except OSError:
        pass
    return False


def temporaries(d):
    if not os.path.isdir(d):
        return []
    out = []
    for root, _, files in os.walk(d):
        out += [os.path.join(root, f) for f in files if ".tmp." in f]
    return out


class Case:
    def __init__(self, binary, work, name, argv, uses_stdout, fault, seed):
        self.binary, self.work, self.name, self.argv, self.fault = binary, work, name, argv, fault
        self.uses_stdout = uses_stdout
        self.rng = random.Random(f"{seed}:{name}:{fault}")

    def run(self):
        d = tempfile.mkdtemp(prefix="f-", dir=self.work)
        out = os.path.join(d, "out.json")
        outdir = os.path.join(d, "sweep-out")
        stdout, stderr, preexec_limits = subprocess.DEVNULL, subprocess.PIPE, []
        pass_fds, close_stdout, pipe_w = (), False, None
        previous = None
        f = self.fault
        if f == "stdout /dev/full":
            stdout = open("/dev/full", "wb")
        elif f == "stdout closed":
            close_stdout = True
        elif f == "stdout reader gone":
            r, pipe_w = os.pipe()
            os.close(r)
            stdout = pipe_w
        elif f == "stderr closed":
            stderr = None
        elif f == "output /dev/full":
            out = "/dev/full"
        elif f == "ulimit -f":
            preexec_limits.append((resource.RLIMIT_FSIZE, 64))
        elif f == "ulimit -v":
            # 64 MB: past what the loader and the libraries' static constructors need (about 49 MB),
            # short of what the task graph needs; what fails then fails inside cpsim.
            preexec_limits.append((resource.RLIMIT_AS, 64 << 20))
        elif f == "full disk":
            small = os.path.join(d, "small")
            os.mkdir(small)
            if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", small],
                              stderr=subprocess.DEVNULL).returncode != 0:
                return "skip", "cannot mount a tmpfs (not root)"
            self.mounted = small
            out = os.path.join(small, "out.json")
            outdir = os.path.join(small, "sweep-out")
            previous = b"previous output\n" * 32
            with open(out, "wb") as p:
                p.write(previous)
            with open(os.path.join(small, "fill"), "wb") as p:
                try:
                    p.write(b"\0" * (64 << 10))
                except OSError:
                    pass
        argv = [a.replace("{OUTDIR}", outdir).replace("{OUT}", out) for a in self.argv]
        sig = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}.get(f)

        def child_setup():
            for res, lim in preexec_limits:
                resource.setrlimit(res, (lim, lim))
            if close_stdout:
                os.close(1)
            if f == "stdout reader gone":
                signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            if stderr is None:
                os.close(2)

        try:
            p = subprocess.Popen([self.binary] + argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
                                 preexec_fn=child_setup, start_new_session=True, cwd=d, restore_signals=True)
            if sig is not None:
                # A random moment after cpsim took over its signals (before that the process is
                # still being loaded: there is nothing of it to clean up, and the default action
                # is all there is), or 2 s after the start when it never does.
                deadline = time.time() + 2
                while time.time() < deadline and not catches(p.pid, signal.SIGTERM):
                    time.sleep(0.002)
                time.sleep(self.rng.uniform(0.0, 0.6))
                try:
                    p.send_signal(sig)
                except ProcessLookupError:
                    pass
            try:
                _, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                _, err = p.communicate()
                return "fail", "ran past 60 s"
            err = (err or b"").decode(errors="replace")
            rc = p.returncode
            why = self.judge(rc, err, sig, out, outdir, previous, d, p.pid)
            return ("fail", why) if why else ("ok", f"exit {rc}")
        finally:
            if pipe_w is not None:
                os.close(pipe_w)
            if hasattr(stdout, "close"):
                stdout.close()
            if getattr(self, "mounted", None):
                subprocess.run(["umount", "-l", self.mounted])
            shutil.rmtree(d, ignore_errors=True)

    def judge(self, rc, err, sig, out, outdir, previous, d, sid):
        deadline = time.time() + 5
        while session_left(sid) and time.time() < deadline:
            time.sleep(0.05)
        left = session_left(sid)
        if left:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            return f"exit {rc}; processes left running: {left}"
        if sig == signal.SIGKILL:
            return ""  # nothing runs on after it (checked above); its temporaries the next run removes
        if rc < 0:
            return f"killed by signal {-rc} ({signal.Signals(-rc).name})"
        if "terminate called" in err or "Aborted" in err or "Segmentation" in err:
            return f"exit {rc}; a crash: {err.strip()[:200]}"
        tmp = temporaries(d)
        if tmp:
            return f"exit {rc}; temporaries left: {tmp}"
        f = self.fault
        if f in ("stdout /dev/full", "stdout closed", "stdout reader gone"):
            if not self.uses_stdout:
                return ""
            if rc == 0:
                return "exit 0 with its stdout lost"
            if f != "stdout closed" and "standard output" not in err:
                return f"exit {rc} without naming standard output: {err.strip()[:200]}"
        elif f == "stderr closed":
            if rc != 0:
                return f"exit {rc} (expected 0: only stderr is closed)"
            lock = os.path.join(outdir, ".results.csv.lock")
            if os.path.exists(lock):
                with open(lock, "rb") as p:
                    held = p.read().strip()
                if held and not held.isdigit():  # it holds the owner's pid, nothing else
                    return f"the sweep's lock file received output: {held[:80]!r}"
        elif f == "output /dev/full":
            if "{OUT}" in " ".join(self.argv) and rc != 1:
                return f"exit {rc} (expected 1: the output is /dev/full)"
        elif f == "ulimit -f":
            if rc not in (0, 1):
                return f"exit {rc} (expected 0 or 1 under ulimit -f)"
        elif f == "ulimit -v":
            if rc not in (0, 1):
                return f"exit {rc} (expected 0, or 1 with an out-of-memory message)"
            if rc == 1 and "memory" not in err:
                return f"exit 1 without saying memory ran out: {err.strip()[:200]}"
        elif f == "full disk":
            if "{OUT}" in " ".join(self.argv) or "{OUTDIR}" in " ".join(self.argv):
                if rc == 0:
                    return "exit 0 on a full file system"
            if previous is not None and "{OUT}" in " ".join(self.argv):
                with open(out, "rb") as p:
                    if p.read() != previous:
                        return f"exit {rc}; the previous output file was destroyed"
        elif sig is not None:
            if rc not in (0, 128 + sig):
                return f"exit {rc} after {signal.Signals(sig).name} (expected 0 or {128 + sig})"
        return ""


FAULTS = ["stdout /dev/full", "stdout closed", "stdout reader gone", "stderr closed", "output /dev/full",
          "ulimit -f", "full disk", "ulimit -v", "SIGINT", "SIGTERM", "SIGKILL"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cpsim")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", help="subcommands whose name contains this")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--skip", action="append", default=[], help="a fault not to inject (repeatable)")
    a = ap.parse_args()
    binary = os.path.abspath(a.cpsim)
    work = tempfile.mkdtemp(prefix="cpsim-faults-")
    try:
        with open(os.path.join(work, "tiny.yaml"), "w") as f:
            f.write(TINY)
        with open(os.path.join(work, "sweep.yaml"), "w") as f:
            f.write(SWEEP)
        with open(os.path.join(work, "config.json"), "w") as f:
            f.write(HF)
        cmds = subcommands(work)
        if a.list:
            for name in cmds:
                print(f"{name}: {', '.join(FAULTS)}")
            return 0
        t0 = time.time()
        failures, counts = [], {"ok": 0, "fail": 0, "skip": 0}
        for name, (argv, uses_stdout) in cmds.items():
            if a.only and a.only not in name:
                continue
            for fault in [x for x in FAULTS if x not in a.skip]:
                status, why = Case(binary, work, name, argv, uses_stdout, fault, a.seed).run()
                counts[status] += 1
                print(f"{status:4} {name:16} {fault:20} {why}", flush=True)
                if status == "fail":
                    failures.append(f"{name} x {fault}: {why}")
        print(f"\n{counts['ok']} ok, {counts['fail']} failed, {counts['skip']} skipped "
              f"in {time.time() - t0:.1f} s (seed {a.seed})")
        for x in failures:
            print("FAIL", x)
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
