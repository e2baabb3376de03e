"""Where the time of one small-batch step goes: each piece of ``SensorObservation.step`` timed on its own.

The workload is the one of ``benchmarks/bench_wrapper.py`` (Pendulum-v1 in a SyncVectorEnv, one delayed,
jittered, noisy, randomized angle sensor with history 3, its GT twin and the env observation for the
critic). Every piece runs in a loop on its own, on the state of a real step (best of 5 rounds), so the
pieces add up to less than the wrapper step measured as a whole (in the whole step, gymnasium's code and
sensorgym's evict each other from the caches). It runs on any commit of the package (run it from that
checkout); ``--executor`` needs a version that has ``SensorManager(executor=...)``.

Usage:
    python tools/step_breakdown.py                     # B = 1, the executor chosen automatically
    python tools/step_breakdown.py --executor torch --envs 16
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import time

import gymnasium as gym
import numpy as np

import sensorgym as sg
from sensorgym.core.metadata import STEP
from sensorgym.wrappers import SensorObservation, common
from sensorgym.wrappers.state_mapping import build_state

SENSORS = {
    "angle": sg.StateSensorOptions(
        key="obs", index=[0, 1], delay=0.1, jitter=0.05, noise=sg.LogUniform(0.005, 0.05), history_length=3
    ),
}


def best_us(fn, n: int = 3000, rounds: int = 5) -> float:
    for _ in range(200):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


@contextlib.contextmanager
def executor(name: str | None):
    if name is None:
        yield
        return
    orig = common.SensorManager
    common.SensorManager = functools.partial(orig, executor=name)
    try:
        yield
    finally:
        common.SensorManager = orig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", type=int, default=1)
    p.add_argument("--executor", default=None, help="torch, numpy or auto (default: the manager's default)")
    args = p.parse_args()
    b = args.envs
    bare = gym.make_vec("Pendulum-v1", num_envs=b, vectorization_mode="sync")
    with executor(args.executor):
        env = SensorObservation(
            gym.make_vec("Pendulum-v1", num_envs=b, vectorization_mode="sync"), SENSORS, seed=0
        )
    for e in (bare, env):
        e.reset(seed=0)
    action = np.zeros((b, 1), np.float32)
    for _ in range(30):
        env.step(action)
    obs, _, _, _, info = env.env.step(action)
    mgr = env.manager
    state = build_state(obs, info, env._layout)
    no_reset = np.zeros(b, bool)
    storage = mgr.storage(sg.StateSensor)
    cls, md = storage.cls, storage.md
    used = getattr(mgr, "executor_used", "torch (no executor option)")
    rows = [
        ("SyncVectorEnv step (bare)", best_us(lambda: bare.step(action))),
        ("SensorObservation.step (whole)", best_us(lambda: env.step(action))),
        ("  build_state", best_us(lambda: build_state(obs, info, env._layout))),
        (
            "  SensorManager.step(state, reset_mask=no resets)",
            best_us(lambda: mgr.step(state, reset_mask=no_reset)),
        ),
        ("    StateSensor._check_state", best_us(lambda: cls._check_state(state, md))),
        (
            "    standard normals (one draw)",
            best_us(lambda: [mgr.random.normal_(d, None, 1) for d in mgr._normal_draws]),
        ),
        ("    ClassStorage.capture (hook + stages)", best_us(lambda: storage.capture(state, STEP))),
        (
            "      hook _update_shared_cache",
            best_us(
                lambda: cls._update_shared_cache(
                    state, md, storage.gt.timeline, storage.measured.timeline, storage.measured.intermediate
                )
            ),
        ),
        (
            "        _update_raw_data",
            best_us(lambda: cls._update_raw_data(state, md, storage.gt.timeline.at(0))),
        ),
        (
            "        hardware imperfections",  # what the default hook runs (with the folded raw copy)
            best_us(lambda: md.imperfections(storage.measured.intermediate, None)),
        ),
    ]
    for stage, name in zip(storage.step_stages, storage.stage_names(), strict=True):
        rows.append((f"      stage {name}", best_us(lambda stage=stage: stage(STEP))))
    rows.append(("  _observation (packing)", best_us(lambda: env._observation(obs))))
    print(f"B = {b}, executor: {used}\n")
    print("| piece | µs |\n|---|---:|")
    for name, t in rows:
        depth = (len(name) - len(name.lstrip())) // 2
        print(f"| {'. ' * depth}{name.strip()} | {t:.1f} |")
    print(f"\nadded by the wrapper (whole step - bare): {rows[1][1] - rows[0][1]:.1f} µs")


if __name__ == "__main__":
    main()
