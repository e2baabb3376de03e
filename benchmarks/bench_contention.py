"""The sensor step on a busy machine: quiet, then next to 1 and 2 CPU-bound processes.

Users run sensorgym beside Async env workers, ablation workers, an SB3 update or other jobs. With torch's
default intra-op threads, small tensor ops can wait on OpenMP barriers whenever another process holds a
core. This benchmark times ``SensorManager.step`` on the standard 12-sensor suite (benchmarks/suite.py)
for each B, under each load, with

* ``default``: the manager's default threading (``SensorManager(..., num_threads=None)`` where the build
  supports it, i.e. what a default install does);
* ``torch N``: the manager forced to run the step with torch's global setting (``num_threads=0``) at the
  process default N threads, the pre-issue-16 behaviour;
* ``1 thread``: ``num_threads=1``.

It prints µs per step and the ratio to the same setting's quiet time (target: <= 1.3x with one competing
process, at every B). Load processes are plain Python busy loops (one core each), started before and
stopped after each measurement.

Usage:
    python benchmarks/bench_contention.py                         # B in 1 16 64 256 1024 4096
    python benchmarks/bench_contention.py --sizes 64 1024 --min-time 0.3
"""

from __future__ import annotations

import argparse
import inspect
import multiprocessing as mp
import os
import platform
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_manager import time_it
from suite import build_suite, make_state

import sensorgym as sg

SIZES = [1, 16, 64, 256, 1024, 4096]


def _burn(stop: mp.Event) -> None:  # one core, pure Python: like another job on the machine
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


class Load:
    """``n`` CPU-bound processes for the duration of a ``with`` block."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.stop = mp.Event()
        self.procs: list[mp.Process] = []

    def __enter__(self) -> Load:
        self.procs = [mp.Process(target=_burn, args=(self.stop,), daemon=True) for _ in range(self.n)]
        for p in self.procs:
            p.start()
        time.sleep(0.3 if self.n else 0.0)  # let the load reach steady state
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for p in self.procs:
            p.join(timeout=5)


def settings() -> dict[str, dict]:
    """Thread settings to compare; the ``num_threads`` option exists from issue 16 on."""
    has_option = "num_threads" in inspect.signature(sg.SensorManager).parameters
    out = {"default": {}}
    if has_option:
        out[f"torch {torch.get_num_threads()}"] = {"num_threads": 0}
        out["1 thread"] = {"num_threads": 1}
    return out


def measure(b: int, kwargs: dict, min_time: float) -> float:
    mgr = build_suite(b, **kwargs) if kwargs else build_suite(b)
    state = make_state(b)
    mgr.reset(state)
    return time_it(lambda: mgr.step(state), torch.device("cpu"), min_time) * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    p.add_argument("--loads", type=int, nargs="+", default=[0, 1, 2], help="competing processes")
    p.add_argument("--min-time", type=float, default=0.5, help="seconds of timing per cell")
    args = p.parse_args()

    print(
        f"# Sensor step under contention: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, torch {torch.__version__}, "
        f"default intra-op threads {torch.get_num_threads()}"
    )
    if len(settings()) == 1:
        print("(this build has no SensorManager num_threads option: only the default is measured)")
    rows = []
    for name, kwargs in settings().items():
        for b in args.sizes:
            times = {}
            for n in args.loads:
                with Load(n):
                    times[n] = measure(b, kwargs, args.min_time)
            rows.append((name, b, times))
    loads = args.loads
    head = ["setting", "B"] + [f"{n} busy µs" for n in loads] + [f"{n} busy / quiet" for n in loads if n]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, b, times in rows:
        quiet = times.get(0, float("nan"))
        cells = [name, str(b)] + [f"{times[n]:,.1f}" for n in loads]
        cells += [f"{times[n] / quiet:.2f}x" for n in loads if n]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
