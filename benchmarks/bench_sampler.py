"""What the sampler options of SPEC 2.8 (``update_period``, ``update_phase``, ``dropout``) cost per step.

Three variants of the standard suite (benchmarks/suite.py), timed interleaved in one process:
  * without: the suite as it is;
  * defaults: every sensor given ``update_period=0.0, update_phase=None, dropout=0.0`` explicitly (the
    claim: a sensor without the options costs nothing extra, so the ratio is 1.0 up to timing noise);
  * sampler: the IMUs sample at 30 Hz with a drawn phase and lose 5% of their samples, the encoders at
    100 Hz (a multi-rate robot at the suite's 50 Hz control step); the contacts stay as they are.
It prints µs per step and the ratio to "without" for each B (the sampler itself: one batched decision per
class per step, no per-env Python).

Usage:
    python benchmarks/bench_sampler.py                       # CPU, B in {1, 64, 1024, 16384}
    python benchmarks/bench_sampler.py --sizes 1 64 --min-time 0.2 --device cuda
    python benchmarks/bench_sampler.py --cpu-time --threads 1   # on a busy machine: CPU time, 1 thread
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_manager import sync, time_it
from suite import (
    DT,
    IMU_OPTIONS,
    N_CONTACT,
    N_ENC,
    N_IMU,
    ContactBenchOptions,
    EncoderBenchOptions,
    make_state,
)

import sensorgym as sg

DEFAULTS = dict(update_period=0.0, update_phase=None, dropout=0.0)
VARIANTS = {
    "without": ({}, {}),
    "defaults": (DEFAULTS, DEFAULTS),
    "sampler": (dict(update_period=1 / 30, dropout=0.05), dict(update_period=0.01)),
}


def build(variant: str, num_envs: int, device: torch.device) -> sg.SensorManager:
    imu_extra, enc_extra = VARIANTS[variant]
    mgr = sg.SensorManager(num_envs=num_envs, dt=DT, device=device, seed=0)
    for i in range(N_IMU):
        opts = sg.StateSensorOptions(key=f"imu{i}", shape=(3,), **IMU_OPTIONS, **imu_extra)
        mgr.add_sensor(opts, name=f"imu{i}")
    for i in range(N_CONTACT):
        mgr.add_sensor(ContactBenchOptions(delay=0.02), name=f"contact{i}")
    for i in range(N_ENC):
        mgr.add_sensor(EncoderBenchOptions(resolution=0.01, **enc_extra), name=f"enc{i}")
    return mgr


def cpu_time_it(fn, device: torch.device, min_time: float) -> float:
    """Like ``time_it`` but in CPU seconds of this process (``time.process_time``): other processes on the
    machine then barely move the numbers (CPU devices only)."""
    for _ in range(5):
        fn()
    best = float("inf")
    for _ in range(3):
        n, start = 0, time.process_time()
        while True:
            fn()
            n += 1
            if n % 10 == 0 and time.process_time() - start > min_time / 3:
                break
        best = min(best, (time.process_time() - start) / n)
    return best


def run(
    sizes: list[int], device: torch.device, min_time: float, rounds: int = 3, cpu_time: bool = False
) -> list[dict]:
    timer = cpu_time_it if cpu_time else time_it
    rows = []
    for b in sizes:
        state = make_state(b, device)
        managers = {}
        for name in VARIANTS:
            managers[name] = build(name, b, device)
            managers[name].reset(state)
        best = dict.fromkeys(VARIANTS, float("inf"))
        for _ in range(rounds):  # interleaved, best of rounds: the machine's noise hits all variants
            for name, mgr in managers.items():
                best[name] = min(best[name], timer(lambda m=mgr, x=state: m.step(x), device, min_time))
        sync(device)
        rows.append(dict(B=b, **best))
        print(f"  B={b}: " + ", ".join(f"{k} {v * 1e6:,.1f} µs" for k, v in best.items()), file=sys.stderr)
    return rows


def table(rows: list[dict], device: torch.device, cpu_time: bool = False) -> str:
    clock = "CPU time" if cpu_time else "wall clock"
    lines = [
        f"Sampler options on the standard suite ({device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {clock})\n",
        "| B | without µs/step | defaults given µs/step | ratio | sampler on µs/step | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        w = r["without"]
        lines.append(
            f"| {r['B']} | {w * 1e6:,.1f} | {r['defaults'] * 1e6:,.1f} | {r['defaults'] / w:.2f} | "
            f"{r['sampler'] * 1e6:,.1f} | {r['sampler'] / w:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024, 16384])
    p.add_argument("--min-time", type=float, default=0.3, help="seconds of timing per measurement")
    p.add_argument("--cpu-time", action="store_true", help="time in CPU seconds (CPU device only)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.cpu_time and device.type != "cpu":
        p.error("--cpu-time measures CPU devices only")
    rows = run(args.sizes, device, args.min_time, cpu_time=args.cpu_time)
    print(table(rows, device, args.cpu_time))


if __name__ == "__main__":
    main()
