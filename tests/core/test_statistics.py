"""Statistical behaviour with fixed seeds: noise, random walk, domain randomization."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sensorgym as sg

DT = 0.02


def _zeros(b, w=1):
    return {"x": torch.zeros(b, w)}


def test_noise_std_and_mean():
    b = 4000
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(2,), noise=[0.1, 0.5]))
    mgr.reset(_zeros(b, 2))
    reads = []
    for _ in range(10):
        mgr.step(_zeros(b, 2))
        reads.append(s.read().clone())
    r = torch.cat(reads)
    # 40k samples per component: std of the sample std is ~0.35%
    assert r.std(0).tolist() == pytest.approx([0.1, 0.5], rel=0.02)
    assert r.mean(0).abs().max().item() < 0.01
    # independent across steps and components
    assert abs(np.corrcoef(reads[0][:, 1], reads[1][:, 1])[0, 1]) < 0.05
    assert abs(np.corrcoef(reads[0][:, 0], reads[0][:, 1])[0, 1]) < 0.05


def test_random_walk_variance_grows_linearly_and_resets():
    b, sigma = 4000, 0.2
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=1)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", random_walk=sigma))
    mgr.reset(_zeros(b))
    assert (s.read() == 0).all()  # zero drift at the reset snapshot
    for k in range(1, 26):
        mgr.step(_zeros(b))
        if k in (1, 4, 25):
            var = s.read().var().item()
            assert var == pytest.approx(k * sigma**2, rel=0.08)
    # a partial reset zeroes the accumulator of the reset envs only
    half = torch.arange(b) < b // 2
    mgr.reset(_zeros(b), envs_idx=half)
    assert (s.read()[half] == 0).all()
    assert s.read()[~half].var().item() == pytest.approx(25 * sigma**2, rel=0.08)
    mgr.step(_zeros(b))
    assert s.read()[half].var().item() == pytest.approx(sigma**2, rel=0.08)


@pytest.mark.parametrize(
    ("dist", "low", "high"),
    [
        (sg.Uniform(0.1, 0.3), 0.1, 0.3),
        (sg.LogUniform(0.01, 1.0), 0.01, 1.0),
        (sg.Normal(0.5, 0.1, low=0.3, high=0.7), 0.3, 0.7),
        (sg.Choice([0.1, 0.4]), 0.1, 0.4),
    ],
)
def test_randomized_noise_range_and_per_episode_resampling(dist, low, high):
    b = 2000
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=2)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), noise=dist))
    mgr.reset(_zeros(b, 3))
    first = s.read_randomization()["noise"].clone()
    assert first.shape == (b, 3)
    assert (first >= low).all() and (first <= high).all()
    assert first.std().item() > 0  # per env and component
    assert not torch.equal(first[:, 0], first[:, 1])
    md = mgr.metadata(sg.StateSensor)
    for _ in range(5):  # held within the episode
        mgr.step(_zeros(b, 3))
        assert torch.equal(s.read_randomization()["noise"], first)
    reset = torch.arange(b) % 2 == 0
    mgr.step(_zeros(b, 3), reset_mask=reset)  # an autoreset resamples the reset envs only
    after = s.read_randomization()["noise"]
    assert torch.equal(after[~reset], first[~reset])
    changed = (after[reset] != first[reset]).float().mean().item()
    assert changed > (0.45 if isinstance(dist, sg.Choice) else 0.99)
    assert torch.equal(md.noise, after)
    if isinstance(dist, sg.Uniform):
        assert after.mean().item() == pytest.approx(0.2, abs=0.005)
    if isinstance(dist, sg.LogUniform):
        assert after.log().mean().item() == pytest.approx(np.log(0.1), abs=0.03)


def test_randomized_noise_is_what_the_readings_show():
    b = 3000
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=3)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", noise=sg.Choice([0.0, 1.0])))
    mgr.reset(_zeros(b))
    std = s.read_randomization()["noise"][:, 0]
    reads = []
    for _ in range(200):
        mgr.step(_zeros(b))
        reads.append(s.read()[:, 0].clone())
    emp = torch.stack(reads).std(0)
    assert (emp[std == 0] == 0).all()
    assert emp[std == 1].mean().item() == pytest.approx(1.0, rel=0.02)


def test_randomized_delay_per_env_in_steps_and_bias_per_component():
    b = 400
    mgr = sg.SensorManager(num_envs=b, dt=0.1, seed=4)
    s = mgr.add_sensor(
        sg.StateSensorOptions(
            key="x", delay=sg.Choice([0.0, 0.1, 0.3]), bias=[0.0, sg.Normal(0.0, 2.0)], shape=(2,)
        )
    )
    ramp = lambda t: {"x": torch.full((b, 2), float(t))}  # noqa: E731
    mgr.reset(ramp(0))
    r = s.read_randomization()
    assert set(r) == {"delay", "bias"}
    delays = r["delay"][:, 0]
    assert set(np.round(delays.numpy().astype(float), 6).tolist()) == {0.0, 0.1, 0.3}
    assert r["bias"].shape == (b, 1)  # only the randomized component
    assert r["bias"].std().item() == pytest.approx(2.0, rel=0.15)
    for t in range(1, 6):
        mgr.step(ramp(t))
    read0 = s.read()[:, 0]
    expected = (5 - torch.round(delays / 0.1)).clamp(min=0)
    assert torch.equal(read0, expected)
    # ring sized exactly for the largest delay the distribution can produce
    assert s._storage.measured.ring.depth == 4
    names = mgr.randomization_names()
    # only component 1 is randomized: it is labelled by its own index (issue 11.8)
    assert names == [f"{s.name}.delay", f"{s.name}.bias[1]"]
    assert mgr.read_randomization().shape == (b, 2)


def test_jitter_distribution_is_clamped_to_the_sampled_delay():
    b = 500
    mgr = sg.SensorManager(num_envs=b, dt=0.1, seed=5)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="x", delay=sg.Uniform(0.0, 0.3), jitter=sg.Uniform(0.0, 0.3))
    )
    mgr.reset(_zeros(b))
    r = s.read_randomization()
    md = mgr.metadata(sg.StateSensor)
    assert (r["jitter"] <= md.params.times.delay_seconds.float() + 1e-6).all()
    assert s._storage.measured.ring.depth == 3 + 3 + 1


def test_same_seed_same_numbers_different_seed_different():
    def trace(seed):
        mgr = sg.SensorManager(num_envs=8, dt=0.1, seed=seed)
        s = mgr.add_sensor(
            sg.StateSensorOptions(
                key="x", delay=sg.Uniform(0, 0.2), jitter=0.1, noise=sg.LogUniform(0.1, 1), random_walk=0.1
            )
        )
        mgr.reset(_zeros(8))
        out = []
        for t in range(20):
            mgr.step(_zeros(8), reset_mask=torch.arange(8) == t % 8)
            out.append(s.read().clone())
        return torch.stack(out)

    assert torch.equal(trace(7), trace(7))
    assert not torch.equal(trace(7), trace(8))
