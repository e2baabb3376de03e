"""Wrapper overhead on Pendulum-v1: sensorgym vs composing Gymnasium's own single-env wrappers.

For B sub-envs (SyncVectorEnv) it times one ``step`` of
  * bare: the vector env alone;
  * sensorgym: ``SensorObservation`` with a delayed (2 steps), jittered, noisy, per-episode randomized
    angle sensor with history 3, its ground-truth twin and the env observation for the critic;
  * gymnasium: per sub-env ``TransformObservation`` (Gaussian noise) -> ``DelayObservation(2)`` ->
    ``FrameStackObservation(3)`` (no jitter, no randomization, no GT twin);
and prints the time each adds on top of the bare env and the ratio.

Usage:
    python benchmarks/bench_wrapper.py                 # B in {1, 16, 64, 256}
    python benchmarks/bench_wrapper.py --sizes 64 --steps 300
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import time

import gymnasium as gym
import numpy as np
import torch
from gymnasium.wrappers import DelayObservation, FrameStackObservation, TransformObservation

import sensorgym as sg
from sensorgym.wrappers import SensorObservation, common

SENSORS = {
    "angle": sg.StateSensorOptions(
        key="obs", index=[0, 1], delay=0.1, jitter=0.05, noise=sg.LogUniform(0.005, 0.05), history_length=3
    ),
}


def _noisy(env: gym.Env) -> gym.Env:
    rng = np.random.default_rng(0)
    return TransformObservation(
        env, lambda o: (o + rng.normal(0, 0.01, o.shape)).astype(np.float32), env.observation_space
    )


def gym_composition(env: gym.Env) -> gym.Env:
    return FrameStackObservation(DelayObservation(_noisy(env), delay=2), stack_size=3)


@contextlib.contextmanager
def forced_executor(executor: str):
    """Wrappers built inside get ``SensorManager(executor=executor)`` (the wrappers leave it "auto")."""
    orig = common.SensorManager
    common.SensorManager = functools.partial(orig, executor=executor)
    try:
        yield
    finally:
        common.SensorManager = orig


def make(kind: str, b: int) -> gym.vector.VectorEnv:
    """``kind``: bare, sensorgym (executor chosen automatically), sensorgym-torch (the torch executor
    forced), gymnasium."""
    wrappers = [gym_composition] if kind == "gymnasium" else None
    envs = gym.make_vec("Pendulum-v1", num_envs=b, vectorization_mode="sync", wrappers=wrappers)
    if kind.startswith("sensorgym"):
        with forced_executor("torch" if kind == "sensorgym-torch" else "auto"):
            envs = SensorObservation(envs, SENSORS, seed=0)
    return envs


def time_steps(envs: dict[str, gym.vector.VectorEnv], steps: int, rounds: int = 5) -> dict[str, float]:
    """Best time per step of each env; rounds interleave the envs so machine noise hits all alike."""
    b = next(iter(envs.values())).num_envs
    actions = np.random.default_rng(0).uniform(-2, 2, (steps, b, 1)).astype(np.float32)
    for env in envs.values():
        env.reset(seed=0)
        for a in actions[:20]:
            env.step(a)
    best = dict.fromkeys(envs, float("inf"))
    for _ in range(rounds):
        for kind, env in envs.items():
            start = time.perf_counter()
            for a in actions:
                env.step(a)
            best[kind] = min(best[kind], (time.perf_counter() - start) / steps)
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 16, 64, 256])
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    print(
        f"Pendulum-v1, SyncVectorEnv, {platform.machine()} {os.cpu_count()} cores, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), gymnasium {gym.__version__}\n"
    )
    print(
        "| B | executor (auto) | bare µs/step | sensorgym µs/step | gymnasium wrappers µs/step | "
        "sensorgym adds µs | sensorgym, torch executor forced, adds µs | gymnasium adds µs | "
        "gymnasium added / sensorgym added |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for b in args.sizes:
        envs = {kind: make(kind, b) for kind in ("bare", "sensorgym", "sensorgym-torch", "gymnasium")}
        t = time_steps(envs, args.steps)
        sg_add, gym_add = t["sensorgym"] - t["bare"], t["gymnasium"] - t["bare"]
        torch_add = t["sensorgym-torch"] - t["bare"]
        print(
            f"| {b} | {envs['sensorgym'].manager.executor_used} | {t['bare'] * 1e6:,.0f} | "
            f"{t['sensorgym'] * 1e6:,.0f} | {t['gymnasium'] * 1e6:,.0f} | {sg_add * 1e6:,.1f} | "
            f"{torch_add * 1e6:,.1f} | {gym_add * 1e6:,.1f} | {gym_add / sg_add:.1f}x |"
        )


if __name__ == "__main__":
    main()
