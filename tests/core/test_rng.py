"""Per-env random streams: a batched manager equals one single-env manager per env, exactly,
with noise, random walk, jitter, randomization and partial resets."""

from __future__ import annotations

import torch

import sensorgym as sg

from ..helpers import FilterOptions


def _sensors(mgr):
    return [
        mgr.add_sensor(
            sg.StateSensorOptions(
                key="x",
                index=[0, 1],
                delay=sg.Choice([0.1, 0.2]),
                jitter=0.1,
                noise=sg.LogUniform(0.1, 1.0),
                random_walk=0.05,
                bias=sg.Normal(0, 1),
                resolution=0.01,
                history_length=3,
            )
        ),
        mgr.add_sensor(FilterOptions(width=2, alpha=0.5, noise=0.3, delay=0.1, physics_offset=1.0)),
    ]


def test_batched_equals_single_env_managers():
    b, seed = 4, 100
    batched = sg.SensorManager(num_envs=b, dt=0.1, seed=seed, per_env_rng=True)
    bs = _sensors(batched)
    singles = [sg.SensorManager(num_envs=1, dt=0.1, seed=seed + i, per_env_rng=True) for i in range(b)]
    ss = [_sensors(m) for m in singles]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(b, 3, generator=g)
    batched.reset({"x": x})
    for i, m in enumerate(singles):
        m.reset({"x": x[i : i + 1]})
    for t in range(40):
        x = torch.randn(b, 3, generator=g)
        done = torch.rand(b, generator=g) < 0.2
        if t % 5 == 4:  # a non-advancing partial reset of some envs
            batched.reset({"x": x}, envs_idx=done)
            for i in torch.nonzero(done).flatten().tolist():
                singles[i].reset({"x": x[i : i + 1]})
        else:  # a step with autoresets folded in
            batched.step({"x": x}, reset_mask=done)
            for i, m in enumerate(singles):
                m.step({"x": x[i : i + 1]}, reset_mask=done[i : i + 1])
        for j, s in enumerate(bs):
            for i in range(b):
                assert torch.equal(s.read()[i], ss[i][j].read()[0]), (t, j, i)
                assert torch.equal(s.read_ground_truth()[i], ss[i][j].read_ground_truth()[0])


def test_per_env_rng_wide_sensor_batched_equals_single():
    # 10 noisy columns: 20 normals per env and step, past torch's 16-element switch to a vectorized
    # kernel for contiguous tensors (an env's row is strided in a batch, contiguous alone)
    def make(num_envs, seed):
        mgr = sg.SensorManager(num_envs=num_envs, dt=0.1, seed=seed, per_env_rng=True)
        opts = sg.StateSensorOptions(key="x", shape=(10,), noise=1.0, random_walk=0.1, bias=sg.Normal(0, 1))
        return mgr, mgr.add_sensor(opts)

    b, seed = 3, 5
    batched, s = make(b, seed)
    singles = [make(1, seed + i) for i in range(b)]
    x = torch.zeros(b, 10)
    batched.reset({"x": x})
    for i, (m, _) in enumerate(singles):
        m.reset({"x": x[i : i + 1]})
    for _ in range(3):
        batched.step({"x": x})
        for i, (m, si) in enumerate(singles):
            m.step({"x": x[i : i + 1]})
            assert torch.equal(s.read()[i], si.read()[0])


def test_per_env_rng_state_dict_round_trip():
    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=1, per_env_rng=True)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), noise=1.0))
    mgr.reset({"x": torch.zeros(2, 1)})
    saved = mgr.state_dict()
    mgr.step({"x": torch.zeros(2, 1)})
    first = s.read().clone()
    mgr.load_state_dict(saved)
    mgr.step({"x": torch.zeros(2, 1)})
    assert torch.equal(s.read(), first)
