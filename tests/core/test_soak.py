"""Soak test (slow; run with ``pytest -m slow``): 100k steps with random partial resets.

Invariants checked every step: ground truth equals the state that was handed in; an undelayed,
noiseless sensor reads exactly the state; a delayed, jittered, noiseless sensor reads a snapshot
``D .. D + ceil(jitter/dt)`` steps old (or the episode's first); reads never go back in capture time;
everything stays finite. Resident memory must stay flat after warm-up.
"""

from __future__ import annotations

import os
import resource
import time

import pytest
import torch

import sensorgym as sg
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation

B, STEPS, DT = 32, 100_000, 0.1


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


@pytest.mark.slow
def test_soak_100k_steps_with_random_partial_resets():
    mgr = sg.SensorManager(num_envs=B, dt=DT, seed=0)
    clean = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,)))
    late = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), delay=0.2, jitter=0.2, history_length=3))
    noisy = mgr.add_sensor(
        sg.StateSensorOptions(
            key="x",
            shape=(1,),
            noise=sg.LogUniform(0.01, 1.0),
            random_walk=0.01,
            bias=sg.Normal(0, 1),
            resolution=0.01,
            delay=sg.Choice([0.0, 0.1, 0.3]),
        )
    )
    g = torch.Generator().manual_seed(1)
    # x = 1000 * episode + t encodes the episode and the time in it, exactly in float32 (< 2**24)
    t_ep = torch.zeros(B)
    episode = torch.arange(B, dtype=torch.float32)
    state = lambda: {"x": (1000.0 * episode + t_ep)[:, None]}  # noqa: E731
    mgr.reset(state())
    prev_capture = torch.zeros(B)
    rss = []
    for step in range(STEPS):
        done = (torch.rand(B, generator=g) < 0.01) | (t_ep >= 998)
        t_ep += 1
        t_ep[done] = 0
        episode[done] = (episode[done] + B) % 16_000
        if step % 10 == 5 and done.any():
            mgr.step({"x": (1000.0 * episode + t_ep)[:, None]})  # a plain step ...
            mgr.reset(state(), envs_idx=done)  # ... then a partial reset (non-advancing)
        else:
            mgr.step(state(), reset_mask=done)
        x = state()["x"][:, 0]
        assert torch.equal(clean.read()[:, 0], x)
        assert torch.equal(late.read_ground_truth(0)[:, 0], x)
        seen = late.read(0)[:, 0]
        age = x - seen
        assert ((seen >= 1000.0 * episode) & (age >= 0) & (age <= 4)).all()
        ok = (age >= 2) | (seen == 1000.0 * episode)  # D = 2 unless padded with the first snapshot
        assert ok.all(), (step, x[~ok], seen[~ok], done[~ok], episode[~ok])
        capture = torch.where(done, seen, torch.maximum(seen, prev_capture))
        assert torch.equal(capture, seen), "a read went back in capture time"
        prev_capture = seen
        assert torch.isfinite(noisy.read()).all()
        if step % 10_000 == 0:
            rss.append(rss_mb())
    growth = rss[-1] - rss[1]
    print(f"RSS samples (MB): {[round(r, 1) for r in rss]}; growth after warm-up {growth:.2f} MB")
    assert growth < 5.0


# -- wrapper soak on the batched torch env (issue: robustness) ---------------------------------------------
WRAPPER_STEPS = int(os.environ.get("SENSORGYM_SOAK_STEPS", 1_000_000))
WRAPPER_ENVS = int(os.environ.get("SENSORGYM_SOAK_ENVS", 4096))


@pytest.mark.slow
def test_wrapper_soak_batched_torch_env():
    """``WRAPPER_STEPS`` wrapper steps at ``WRAPPER_ENVS`` envs with random partial resets (DISABLED mode
    with a random ``reset_mask``, plus the 200-step truncation): resident memory flat, no slowdown, the
    invariants checked every 1000 steps. ``SENSORGYM_SOAK_STEPS``/``SENSORGYM_SOAK_ENVS`` scale it."""
    b = WRAPPER_ENVS
    env = BatchedPendulumEnv(num_envs=b, autoreset_mode="Disabled")
    sensors = {
        "angle": sg.StateSensorOptions(
            key="obs",
            index=[0, 1],
            delay=sg.Choice([0.0, 0.05, 0.1]),
            jitter=0.05,
            history_length=3,
            noise=sg.LogUniform(0.001, 0.05),
            resolution=0.001,
        ),
        "rate": sg.StateSensorOptions(
            key="obs", index=[2], noise=0.05, random_walk=0.01, bias=sg.Normal(0, 0.1)
        ),
        "truth": sg.StateSensorOptions(key="state", shape=(2,)),
    }
    envs = SensorObservation(env, sensors, seed=0, critic_randomization=True)
    space = envs.single_observation_space
    g = torch.Generator().manual_seed(0)
    obs, _ = envs.reset(seed=0)
    actions = torch.zeros(b, 1)
    rss, block_s, t0 = [], [], time.perf_counter()
    block = max(WRAPPER_STEPS // 20, 1000)
    for step in range(1, WRAPPER_STEPS + 1):
        actions.uniform_(-2.0, 2.0, generator=g)
        obs, _, term, trunc, _ = envs.step(actions)
        mask = (term | trunc) | (torch.rand(b, generator=g) < 0.002)
        if mask.any():
            obs, _ = envs.reset(options={"reset_mask": mask})
        if step % 1000 == 0:
            pol, crit = obs["policy"], obs["critic"]
            assert pol.shape == (b, *space["policy"].shape) and crit.shape == (b, *space["critic"].shape)
            assert pol.dtype == torch.float32 and torch.isfinite(pol).all() and torch.isfinite(crit).all()
            # GT is never delayed: the critic's angle and rate are the env's own current observation
            # (critic = GT angle(2), rate(1), truth(2), env obs(3), randomized parameters)
            assert torch.equal(crit[:, 0:3], crit[:, 5:8])
            assert torch.equal(pol[:, 7:9], crit[:, 3:5])  # "truth" has no imperfection: measured == GT
        if step % block == 0:
            block_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            rss.append(rss_mb())
    growth = rss[-1] - rss[1]
    blocks = [round(s, 1) for s in block_s]
    print(f"{WRAPPER_STEPS} steps x {b} envs: {sum(block_s):.0f} s; per-block s {blocks}; ")
    print(f"RSS MB {[round(r) for r in rss]}; growth after warm-up {growth:.1f} MB")
    assert growth < 20.0
    first, last = sorted(block_s[1:4])[1], sorted(block_s[-3:])[1]
    assert last < 1.5 * first, f"slowdown: {first:.1f} s -> {last:.1f} s per block"
