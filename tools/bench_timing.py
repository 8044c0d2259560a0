"""What tools/bench_compute.py's sections share: the timer, the per-section budget, logging to
stderr and the commit the rows are stamped with."""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Timer:
    def __init__(self, torch, warmup, repeats, device):
        self.torch, self.warmup, self.repeats, self.device = torch, warmup, repeats, device

    def per_call_us(self, fn):
        torch = self.torch
        if self.device != "cuda":  # CPU dry runs: wall clock, one call
            t = time.perf_counter()
            fn()
            return (time.perf_counter() - t) * 1e6
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        one = max(start.elapsed_time(stop) * 1e3, 1.0)
        group = int(min(50, max(1, 2000.0 / one)))
        times = []
        for _ in range(self.repeats):
            start.record()
            for _ in range(group):
                fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e3 / group)
        return statistics.median(times)


class Budget:
    def __init__(self, seconds):
        self.t0, self.seconds, self.told = time.monotonic(), seconds, False

    def spent(self, what):
        if self.seconds and time.monotonic() - self.t0 > self.seconds:
            if not self.told:
                log(f"bench_compute: {what}: {self.seconds:.0f} s budget spent; skipping the rest")
                self.told = True
            return True
        return False

