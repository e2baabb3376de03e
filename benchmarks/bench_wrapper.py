"""Wrapper overhead on Pendulum-v1: sensorgym vs composing Gymnasium's own single-env wrappers.

For B sub-envs (SyncVectorEnv) it times one ``step`` of
  * bare: the vector env alone;
  * sensorgym: ``SensorObservation`` with a delayed (2 steps), jittered, noisy, per-episode randomized
    angle sensor with history 3, its ground-truth twin and the env observation for the critic;
  * gymnasium: per sub-env ``TransformObservation`` (Gaussian noise) -> ``DelayObservation(2)`` ->
    ``FrameStackObservation(3)`` (no jitter, no randomization, no GT twin);
  * numpy floor: ``StraightLineNumpy``, the same per-step work as sensorgym's (noise, jittered delay
    read, history, the GT twin and env observation for the critic, the same two torch draws) written
    as straight-line numpy for this one configuration, with no library around it: a lower bound of what
    any Python implementation of this step adds (it skips episode resets and validation);
and prints the time each adds on top of the bare env and the ratios.

Usage:
    python benchmarks/bench_wrapper.py                 # B in {1, 16, 64, 256}
    python benchmarks/bench_wrapper.py --sizes 64 --steps 300
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import gymnasium as gym
import numpy as np
import torch
from gymnasium.wrappers import DelayObservation, FrameStackObservation, TransformObservation

import sensorgym as sg
from sensorgym.wrappers import SensorObservation

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


class StraightLineNumpy(gym.vector.VectorWrapper):
    """The sensorgym configuration's per-step work as straight-line numpy on preallocated buffers: the
    floor for a Python step (each numpy call costs ~0.3 µs alone, about twice that inside an env step)."""

    def __init__(self, env: gym.vector.VectorEnv, delay: int = 2, jitter: int = 1, history: int = 3) -> None:
        super().__init__(env)
        b, c = env.num_envs, 2
        self.t, self.depth, self.history_len = 0, delay + jitter + 1, history
        self.delay, self.jitter = delay, jitter
        self.generator = torch.Generator().manual_seed(0)
        self.normal, self.uniform = torch.zeros(b, c), torch.zeros(b, 2)
        self.normal_np, self.uniform_np = self.normal.numpy(), self.uniform.numpy()
        self.std = np.full((b, c), 0.01, np.float32)
        self.gt, self.work, self.scratch, self.cache = (np.zeros((b, c), np.float32) for _ in range(4))
        self.ring = np.zeros((self.depth, b, c), np.float32)
        self.hist = np.zeros((history, b, c), np.float32)
        self.jitter_steps = np.zeros((b, 1), np.float32)
        self.shift, self.prev = np.zeros((b, 1), np.int64), np.zeros((b, 1), np.int64)
        self.table = (np.arange(self.depth)[:, None] - np.arange(self.depth)[None, :]) % self.depth
        self.rows, self.slots = np.arange(b), np.zeros(b, np.int64)
        self.newest_first = (np.arange(history)[:, None] - np.arange(history)[None, :]) % history

    def step(self, actions):
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        self.t += 1
        t, b = self.t, self.num_envs
        self.normal.normal_(generator=self.generator)
        self.uniform.uniform_(generator=self.generator)
        np.copyto(self.gt, obs[:, 0:2])
        np.multiply(self.normal_np, self.std, self.scratch)
        np.add(self.gt, self.scratch, self.work)
        np.copyto(self.ring[t % self.depth], self.work)
        np.multiply(self.uniform_np[:, :1], 2.0, self.jitter_steps)
        np.add(self.jitter_steps, self.uniform_np[:, 1:], self.jitter_steps)
        np.floor(self.jitter_steps, self.jitter_steps)
        np.copyto(self.shift, self.jitter_steps, casting="unsafe")
        np.minimum(self.shift, self.jitter, out=self.shift)
        np.add(self.shift, self.delay, self.shift)
        np.add(self.prev, 1, self.prev)
        np.minimum(self.shift, self.prev, out=self.shift)
        np.copyto(self.prev, self.shift)
        np.take(self.table[t % self.depth], self.shift[:, 0], out=self.slots)
        np.copyto(self.cache, self.ring[self.slots, self.rows])
        np.copyto(self.hist[t % self.history_len], self.cache)
        policy = np.empty((b, 6), np.float32)
        critic = np.empty((b, 5), np.float32)
        policy.reshape(b, 3, 2)[:] = self.hist[self.newest_first[t % self.history_len]].transpose(1, 0, 2)
        critic[:, :2] = self.gt
        critic[:, 2:] = obs
        return {"policy": policy, "critic": critic}, rewards, terminations, truncations, dict(info)


def make(kind: str, b: int) -> gym.vector.VectorEnv:
    """``kind``: bare, sensorgym (executor chosen automatically), sensorgym-torch (the torch executor
    forced), gymnasium, numpy-floor."""
    wrappers = [gym_composition] if kind == "gymnasium" else None
    envs = gym.make_vec("Pendulum-v1", num_envs=b, vectorization_mode="sync", wrappers=wrappers)
    if kind.startswith("sensorgym"):
        executor = "torch" if kind == "sensorgym-torch" else "auto"
        envs = SensorObservation(envs, SENSORS, seed=0, executor=executor)
    if kind == "numpy-floor":
        envs = StraightLineNumpy(envs)
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
    p.add_argument("--rounds", type=int, default=9, help="interleaved rounds; the best of each is kept")
    args = p.parse_args()
    print(
        f"Pendulum-v1, SyncVectorEnv, {platform.machine()} {os.cpu_count()} cores, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads), gymnasium {gym.__version__}\n"
    )
    print(
        "| B | executor (auto) | bare µs/step | sensorgym µs/step | gymnasium wrappers µs/step | "
        "sensorgym adds µs | sensorgym, torch executor forced, adds µs | gymnasium adds µs | "
        "gymnasium added / sensorgym added | numpy floor adds µs | sensorgym added / floor added |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in args.sizes:
        kinds = ("bare", "sensorgym", "sensorgym-torch", "gymnasium", "numpy-floor")
        envs = {kind: make(kind, b) for kind in kinds}
        t = time_steps(envs, args.steps, args.rounds)
        sg_add, gym_add = t["sensorgym"] - t["bare"], t["gymnasium"] - t["bare"]
        torch_add, floor_add = t["sensorgym-torch"] - t["bare"], t["numpy-floor"] - t["bare"]
        print(
            f"| {b} | {envs['sensorgym'].manager.executor_used} | {t['bare'] * 1e6:,.0f} | "
            f"{t['sensorgym'] * 1e6:,.0f} | {t['gymnasium'] * 1e6:,.0f} | {sg_add * 1e6:,.1f} | "
            f"{torch_add * 1e6:,.1f} | {gym_add * 1e6:,.1f} | {gym_add / sg_add:.1f}x | "
            f"{floor_add * 1e6:,.1f} | {sg_add / floor_add:.1f}x |"
        )


if __name__ == "__main__":
    main()
