"""What one attitude-estimator update costs, tape against compiled kernel, and against the IMU's own step.

For each batch size B: the sensorgym IMU class's own step (``SensorManager(num_envs=B, dt=0.02)`` with
one ``IMUOptions(body="torso", acc_noise=0.05, gyro_noise=0.01)``, a ``(B, 9)`` float32 state; the time
of ``mgr.step``), then one ``update(state, gyr, acc[, mag])`` of each estimator (Madgwick, Mahony), 6-
and 9-axis, on a numpy and on a torch (CPU) state, float32 and float64, through the recorded op tape
(``use_kernels(False)``) and through the compiled kernel (``use_kernels(True)``, numba). Tape and kernel
are timed interleaved, best of rounds, in one process; the table gives the ratio tape / kernel and the
kernel's update as a share of the IMU step (issue 35's budget: at most 25% at B = 1 and B = 4096).

Usage:
    python benchmarks/bench_estimators.py                          # B in {1, 64, 4096}
    python benchmarks/bench_estimators.py --sizes 1 4096 --min-time 0.1 --threads 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import sensorgym as sg
from sensorgym.estimators import Madgwick, Mahony, kernels_available, use_kernels

FILTERS = {"Madgwick": Madgwick(beta=0.1, rate=50.0), "Mahony": Mahony(kp=1.0, ki=0.1, rate=50.0)}


def best_per_call(fn, min_time: float, rounds: int) -> list[float]:
    """Seconds per call of ``fn`` in each of ``rounds`` rounds of about ``min_time / rounds`` s."""
    out = []
    for _ in range(rounds):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            if n % 10 == 0 and time.perf_counter() - start > min_time / rounds:
                break
        out.append((time.perf_counter() - start) / n)
    return out


def imu_step(batch: int, min_time: float) -> float:
    mgr = sg.SensorManager(num_envs=batch, dt=0.02)
    imu = mgr.add_sensor(sg.IMUOptions(body="torso", acc_noise=0.05, gyro_noise=0.01))
    state = {imu.state_key: torch.zeros(batch, 9)}
    mgr.reset(state)
    for _ in range(20):
        mgr.step(state)
    return min(best_per_call(lambda: mgr.step(state), min_time, 3))


def update_times(filt, batch: int, executor: str, dtype: torch.dtype, axes: int, min_time: float):
    """(tape, kernel) seconds per ``update``, measured interleaved (best of 3 rounds each)."""
    rng = np.random.default_rng(0)
    state = filt.new_state(batch, dtype=dtype, executor=executor)
    filt.initialize(state, q0=[1.0, 0.0, 0.0, 0.0])
    samples = [rng.normal(size=(batch, 3)) + c for c in ([0, 0, 0], [0, 0, 9.81], [18, 0, -45])]
    samples = [torch.tensor(s, dtype=torch.float32) for s in samples]  # what the IMU writes
    if executor == "numpy":
        samples = [s.numpy() for s in samples]
    gyr, acc, mag = samples
    mag = mag if axes == 9 else None
    best = {True: float("inf"), False: float("inf")}
    for _ in range(3):
        for on in (False, True):
            use_kernels(on)
            for _ in range(3):
                filt.update(state, gyr, acc, mag)
            best[on] = min(
                best[on], *best_per_call(lambda: filt.update(state, gyr, acc, mag), min_time / 3, 1)
            )
    use_kernels(True)
    return best[False], best[True]


def step_times(batch: int, min_time: float) -> list[float]:
    """Seconds per kernel ``step`` (samples already in the state's rows: a pipeline that writes them
    there pays no copy), numpy float32 state, for Madgwick 6/9-axis and Mahony 6/9-axis."""
    out = []
    for filt in FILTERS.values():
        state = filt.new_state(batch, dtype=torch.float32, executor="numpy")
        filt.initialize(state, q0=[1.0, 0.0, 0.0, 0.0])
        state.arrays.a.v[2] = 9.81
        state.arrays.m.v[0] = 20.0
        for axes in (6, 9):
            filt.step(state, axes == 9)
            out.append(min(best_per_call(lambda: filt.step(state, axes == 9), min_time, 3)))  # noqa: B023
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 4096])
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds per measurement")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if not kernels_available():
        raise SystemExit("bench_estimators: numba is not installed (pip install sensorgym[fast])")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; µs per call, best of rounds\n")
    for dtype in (torch.float32, torch.float64):
        print(f"### {str(dtype).split('.')[-1]} state\n")
        print(
            "| B | estimator | IMU step µs | numpy tape µs | numpy kernel µs | tape / kernel | torch tape µs "
            "| torch kernel µs | tape / kernel | kernel / IMU step (numpy, torch) |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for batch in args.sizes:
            imu = imu_step(batch, args.min_time)
            for name, filt in FILTERS.items():
                for axes in (6, 9):
                    cells = []
                    shares = []
                    for executor in ("numpy", "torch"):
                        tape, kernel = update_times(filt, batch, executor, dtype, axes, args.min_time)
                        cells += [f"{tape * 1e6:.1f}", f"{kernel * 1e6:.2f}", f"{tape / kernel:.0f}x"]
                        shares.append(f"{100 * kernel / imu:.0f}%")
                    row = [str(batch), f"{name} {axes}-axis", f"{imu * 1e6:.1f}", *cells, ", ".join(shares)]
                    print("| " + " | ".join(row) + " |", flush=True)
        print()
    print("### the kernel's step alone (samples already in the state's rows), numpy, float32\n")
    print("| B | Madgwick 6-axis µs | Madgwick 9-axis µs | Mahony 6-axis µs | Mahony 9-axis µs |")
    print("|---|---|---|---|---|")
    for batch in args.sizes:
        print(f"| {batch} | " + " | ".join(f"{t * 1e6:.2f}" for t in step_times(batch, args.min_time)) + " |")


if __name__ == "__main__":
    main()
