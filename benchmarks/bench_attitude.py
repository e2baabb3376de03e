"""What an attitude estimator adds to the IMU sensor's step, in the pipeline: ``AttitudeSensor`` against the
plain ``IMUSensor`` with the same options, the same state and manager settings, and against the same
``AttitudeSensor`` with ``estimator="none"`` (its outputs from the truth: what the estimator itself adds)
(issue 35's budget: at most 25% of the IMU's step at B = 1 and B = 4096; nothing when off, since an
``IMUSensor`` carries no estimator code at all). A fourth arm, "projection only", is the IMU projected to
three columns by a ``_post_process`` that writes nothing: the engine's share of what any projected sensor
costs.

For each batch size B and executor: ``SensorManager(num_envs=B, dt=0.02)`` with one ``IMUOptions(body=
"torso", acc_noise=0.05, gyro_noise=0.01, mag_noise=0.1)``, and the same with ``AttitudeOptions`` (6-axis
Madgwick or Mahony, with ``--magnetometer`` 9-axis; output the projected gravity; with ``--outputs``
more). The time of ``mgr.step`` on a fixed ``(B, 9)`` float32 state, the managers stepped in alternation
round by round (so a load change hits both), the best round of each. The compiled kernels run where numba
is installed (the ``fast`` extra); ``--no-kernels`` times the op-by-op route.

Usage:
    python benchmarks/bench_attitude.py                    # B in {1, 64, 4096}, both executors
    python benchmarks/bench_attitude.py --sizes 1 4096 --rounds 9
    python benchmarks/bench_attitude.py --sizes 1 4096 --processes 11 --rounds 9 --round-time 0.2
    python benchmarks/bench_attitude.py --sizes 1 4096 --processes 11 --magnetometer   # the 9-axis forms
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

import sensorgym as sg
from sensorgym.estimators import kernels_available, use_kernels
from sensorgym.sensors.mujoco.attitude import truth_key
from sensorgym.sensors.mujoco.base import state_key

IMU = dict(body="torso", acc_noise=0.05, gyro_noise=0.01, mag_noise=0.1)


@dataclass(frozen=True, kw_only=True)
class ProjectionOnlyOptions(sg.IMUOptions):
    """An IMU projected to three columns by a hook that writes nothing: what the engine's projection path
    costs any post-processed sensor (the ``AttitudeSensor`` pays it too)."""


class ProjectionOnly(sg.IMUSensor):
    options_cls = ProjectionOnlyOptions
    projection_depth = 1  # as AttitudeSensor

    def _get_intermediate_format(self) -> tuple:
        return ((3,), (3,), (3,))

    def _get_return_format(self) -> tuple:
        return (3,)

    @classmethod
    def _post_process(cls, md, data, timeline, *, is_measured):
        return timeline.at(0)


def manager(b: int, executor: str, options: sg.IMUOptions) -> tuple[sg.SensorManager, dict]:
    mgr = sg.SensorManager(num_envs=b, dt=0.02, seed=0, executor=executor)
    mgr.add_sensor(options)
    rng = np.random.default_rng(0)
    state = {
        state_key(options): (rng.normal(size=(b, 9)) + np.array([0, 0, 9.81, 0, 0, 0, 0, 0, 0])).astype(
            np.float32
        )
    }
    if isinstance(options, sg.AttitudeOptions):
        state[truth_key(options)] = np.tile(np.float32([1, 0, 0, 0]), (b, 1))
    mgr.reset(state)
    for _ in range(30):  # warm: plans recorded, kernels compiled
        mgr.step(state)
    return mgr, state


def per_step(mgr: sg.SensorManager, state: dict, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while True:
        mgr.step(state)
        n += 1
        if n % 10 == 0 and time.perf_counter() - start > seconds:
            return (time.perf_counter() - start) / n


ARMS = ("imu", "projection", "none", "madgwick", "mahony")


def measure(b: int, executor: str, args: argparse.Namespace) -> dict[str, float]:
    """Seconds per step of each arm in this process, the best of ``args.rounds`` interleaved rounds."""
    outputs = tuple(args.outputs)
    nine = dict(outputs=outputs, estimator_magnetometer=args.magnetometer)
    arms = {
        "imu": manager(b, executor, sg.IMUOptions(**IMU)),
        "projection": manager(b, executor, ProjectionOnlyOptions(**IMU)),
        "none": manager(b, executor, sg.AttitudeOptions(**IMU, estimator="none", outputs=outputs)),
        "madgwick": manager(b, executor, sg.AttitudeOptions(**IMU, **nine)),
        "mahony": manager(b, executor, sg.AttitudeOptions(**IMU, **nine, estimator="mahony")),
    }
    best = dict.fromkeys(arms, float("inf"))
    for _ in range(args.rounds):
        for name, (mgr, state) in arms.items():
            best[name] = min(best[name], per_step(mgr, state, args.round_time))
    return best


def row(b: int, executor: str, best: dict[str, float]) -> str:
    imu = best["imu"]
    cells = [f"{best[k] * 1e6:.1f} | {best[k] / imu - 1:+.0%}" for k in ARMS[1:]]
    # what the estimator itself adds: the same sensor and outputs, estimator on against "none"
    alone = ", ".join(f"{(best[k] - best['none']) / imu:+.0%}" for k in ("madgwick", "mahony"))
    return f"| {b} | {executor} | {imu * 1e6:.1f} | " + " | ".join(cells) + f" | {alone} |"


def in_processes(args: argparse.Namespace) -> dict[tuple[int, str], dict[str, float]]:
    """The median over ``args.processes`` fresh processes of each arm's time and of the shares: at B = 1
    one process's managers keep their own speed (memory layout) for its whole life, so the best of rounds
    in one process differs from the next process's by more than the estimator costs."""
    runs = []
    for _ in range(args.processes):
        command = [sys.executable, __file__, "--json", "--processes", "1", "--rounds", str(args.rounds),
                   "--round-time", str(args.round_time), "--sizes", *map(str, args.sizes),
                   "--executors", *args.executors, "--outputs", *args.outputs,
                   *(["--no-kernels"] if args.no_kernels else []),
                   *(["--magnetometer"] if args.magnetometer else [])]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        runs.append({(b, e): best for b, e, best in json.loads(done.stdout)})
    return {key: {arm: statistics.median(r[key][arm] for r in runs) for arm in ARMS} for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 4096])
    parser.add_argument("--executors", nargs="+", default=["numpy", "torch"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--round-time", type=float, default=0.15)
    parser.add_argument("--outputs", nargs="+", default=["projected_gravity"])
    parser.add_argument("--no-kernels", action="store_true")
    parser.add_argument("--magnetometer", action="store_true", help="the estimators' 9-axis forms")
    parser.add_argument("--processes", type=int, default=1, help="median over this many fresh processes")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one process's bests
    args = parser.parse_args()
    use_kernels(not args.no_kernels)
    torch.set_num_threads(1)
    if args.json:
        print(json.dumps([[b, e, measure(b, e, args)] for b in args.sizes for e in args.executors]))
        return
    route = "op tape" if args.no_kernels or not kernels_available() else "compiled kernels"
    how = f"median over {args.processes} processes of the " if args.processes > 1 else ""
    form = "9-axis" if args.magnetometer else "6-axis"
    rounds = f"{how}best of {args.rounds} rounds, interleaved; 1 thread"
    print(f"route: {route}; {form}; outputs {args.outputs}; {rounds}")
    print(
        "| B | executor | IMU step (µs) | projection only (µs) | added | attitude outputs, no estimator (µs) "
        "| added | + Madgwick (µs) | added | + Mahony (µs) | added "
        "| the estimator alone: Madgwick, Mahony (% of the IMU step) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    if args.processes > 1:
        for (b, executor), best in in_processes(args).items():
            print(row(b, executor, best), flush=True)
        return
    for b in args.sizes:
        for executor in args.executors:
            print(row(b, executor, measure(b, executor, args)), flush=True)


if __name__ == "__main__":
    main()
