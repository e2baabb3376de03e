"""Soak test (slow; run with ``pytest -m slow``): 100k steps with random partial resets.

Invariants checked every step: ground truth equals the state that was handed in; an undelayed,
noiseless sensor reads exactly the state; a delayed, jittered, noiseless sensor reads a snapshot
``D .. D + ceil(jitter/dt)`` steps old (or the episode's first); reads never go back in capture time;
everything stays finite. Resident memory must stay flat after warm-up.
"""

from __future__ import annotations

import resource

import pytest
import torch

import sensorgym as sg

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
