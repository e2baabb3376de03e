"""What the error-model options of SPEC 5.1 cost per step, term by term.

Variants of the standard suite (benchmarks/suite.py), timed interleaved in one process, best of rounds:
  * without: the suite as it is (its IMUs have delay, jitter, noise, bias, random walk, resolution);
  * defaults: every IMU given every SPEC 5.1 option at its default explicitly (the claim: a sensor
    without the options costs nothing extra, so the ratio is 1.0 up to timing noise);
  * one term at a time on the IMUs: ``scale_factor``, ``noise_density`` (in place of ``noise``),
    ``random_walk_density`` (in place of ``random_walk``), ``bias_instability``, ``bandwidth``, and
    ``dropout_burst`` (with ``dropout``, against ``dropout`` alone);
  * all: every term at once, with a 400 Hz own rate read at the suite's 50 Hz and bursty losses.
It prints µs per step and the ratio to "without" for each B.

Usage:
    python benchmarks/bench_error_model.py                    # CPU, B in {1, 64, 4096}
    python benchmarks/bench_error_model.py --sizes 64 --min-time 0.2 --cpu-time
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_manager import sync, time_it
from bench_sampler import cpu_time_it
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

DEFAULTS = dict(
    noise_density=0.0, random_walk_density=0.0, bias_instability=0.0, bias_correlation_time=0.0,
    scale_factor=0.0, bandwidth=0.0, dropout_burst=None,
)  # fmt: skip
NOISE, WALK = IMU_OPTIONS["noise"], IMU_OPTIONS["random_walk"]
#: variant -> options replacing or adding to the suite's IMU options
VARIANTS = {
    "without": {},
    "defaults": DEFAULTS,
    "scale_factor": dict(scale_factor=0.01),
    "noise_density": dict(noise=0.0, noise_density=0.002),
    "random_walk_density": dict(random_walk=0.0, random_walk_density=0.001),
    "bias_instability": dict(bias_instability=0.01, bias_correlation_time=100.0),
    "bandwidth": dict(bandwidth=20.0),
    "dropout": dict(dropout=0.05),
    "dropout_burst": dict(dropout=0.05, dropout_burst=4.0),
    "all": dict(
        noise=0.0, noise_density=0.002, random_walk=0.0, random_walk_density=0.001, bias_instability=0.01,
        bias_correlation_time=100.0, scale_factor=0.01, bandwidth=20.0, update_period=0.0025, dropout=0.05,
        dropout_burst=4.0,
    ),
}  # fmt: skip


def build(variant: str, num_envs: int, device: torch.device) -> sg.SensorManager:
    mgr = sg.SensorManager(num_envs=num_envs, dt=DT, device=device, seed=0)
    imu = {**IMU_OPTIONS, **VARIANTS[variant]}
    for i in range(N_IMU):
        mgr.add_sensor(sg.StateSensorOptions(key=f"imu{i}", shape=(3,), **imu), name=f"imu{i}")
    for i in range(N_CONTACT):
        mgr.add_sensor(ContactBenchOptions(delay=0.02), name=f"contact{i}")
    for i in range(N_ENC):
        mgr.add_sensor(EncoderBenchOptions(resolution=0.01), name=f"enc{i}")
    return mgr


def run(sizes: list[int], device: torch.device, min_time: float, rounds: int, cpu_time: bool) -> list[dict]:
    timer = cpu_time_it if cpu_time else time_it
    rows = []
    for b in sizes:
        state = make_state(b, device)
        managers = {name: build(name, b, device) for name in VARIANTS}
        for mgr in managers.values():
            mgr.reset(state)
        best = dict.fromkeys(VARIANTS, float("inf"))
        for _ in range(rounds):  # interleaved, best of rounds: the machine's noise hits all variants
            for name, mgr in managers.items():
                best[name] = min(best[name], timer(lambda m=mgr, x=state: m.step(x), device, min_time))
        sync(device)
        rows.append(dict(B=b, **best))
        print(f"  B={b}: " + ", ".join(f"{k} {v * 1e6:,.1f}" for k, v in best.items()), file=sys.stderr)
    return rows


def table(rows: list[dict], device: torch.device, cpu_time: bool) -> str:
    clock = "CPU time" if cpu_time else "wall clock"
    lines = [
        f"Error-model terms on the standard suite's IMUs ({device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {clock}); µs per step (ratio to without)\n",
        "| variant | " + " | ".join(f"B = {r['B']}" for r in rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]
    for name in VARIANTS:
        cells = [f"{r[name] * 1e6:,.1f} ({r[name] / r['without']:.2f})" for r in rows]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 4096], help="batch sizes B")
    p.add_argument("--min-time", type=float, default=0.3, help="seconds of timing per measurement")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the best is kept)")
    p.add_argument("--cpu-time", action="store_true", help="time in CPU seconds (CPU device only)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.cpu_time and device.type != "cpu":
        p.error("--cpu-time measures CPU devices only")
    rows = run(args.sizes, device, args.min_time, args.rounds, args.cpu_time)
    print(table(rows, device, args.cpu_time))


if __name__ == "__main__":
    main()
