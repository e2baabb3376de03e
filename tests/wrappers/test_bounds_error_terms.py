"""Issue 33 item 2: every reading lies in its declared observation space, for every error term of SPEC 5.1.

A component with a random term (noise, noise density, random walk, its density, a bias instability) is
unbounded; the scale factor multiplies the bounds; the filter keeps a noise-free reading between its
inputs (float32 rounding included); bias and resolution widen as before. Checked on random
configurations (hypothesis) through the manager and the layout, on both executors, and through the real
wrapper on Pendulum-v1 with Gymnasium's own ``check_env``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import sensorgym as sg
from sensorgym.wrappers import SensorObservation
from sensorgym.wrappers.layout import ObservationLayout

COLS = 3


def _maybe(value_strategy):
    return st.one_of(st.just(0.0), value_strategy)


positive = st.floats(1e-3, 2.0, allow_nan=False)
options_strategy = st.fixed_dictionaries(
    {},
    optional={
        "noise": _maybe(positive),
        "noise_density": _maybe(positive),
        "random_walk": _maybe(positive),
        "random_walk_density": _maybe(positive),
        "scale_factor": st.one_of(
            st.floats(-0.9, 2.0, allow_nan=False),
            st.just(sg.Uniform(-0.5, 0.5)),
            st.just(sg.Choice([0.0, 1.0])),
        ),
        "bandwidth": st.one_of(
            st.sampled_from([0.01, 0.05, 0.3, 3.0, 4.9]), st.just(sg.LogUniform(0.01, 4.5)), st.just(0.0)
        ),
        "bias": st.one_of(st.floats(-3.0, 3.0, allow_nan=False), st.just(sg.Uniform(-1.0, 1.0))),
        "resolution": st.sampled_from([0.0, 0.1, 0.3, 2 / 3]),
        "update_period": st.sampled_from([0.0, 0.01, 0.1]),
        "padding_type": st.sampled_from(["reset", "zero"]),
        "delay": st.sampled_from([0.0, 0.1]),
    },
)


def _drop_exclusive(opts: dict) -> dict:
    """noise/noise_density and random_walk/random_walk_density are exclusive: keep the first."""
    if opts.get("noise") and opts.get("noise_density"):
        opts.pop("noise_density")
    if opts.get("random_walk") and opts.get("random_walk_density"):
        opts.pop("random_walk_density")
    return opts


@settings(max_examples=150, deadline=None)
@given(
    opts=options_strategy,
    bias_instability=st.sampled_from([0.0, 0.2]),
    lo=st.floats(-50.0, 10.0, allow_nan=False, width=32),
    width=st.floats(0.001, 100.0, allow_nan=False),
    executor=st.sampled_from(["numpy", "torch"]),
    seed=st.integers(0, 2**16),
)
def test_every_reading_lies_in_its_declared_space(opts, bias_instability, lo, width, executor, seed) -> None:
    opts = _drop_exclusive(dict(opts))
    if bias_instability:
        opts.update(bias_instability=bias_instability, bias_correlation_time=5.0)
    hi = np.float32(lo + width)
    lo = np.float32(lo)
    space = gym.spaces.Box(lo, max(hi, np.nextafter(lo, np.float32(np.inf))), (COLS,), np.float32)
    b = 8
    mgr = sg.SensorManager(num_envs=b, dt=0.05, seed=seed, executor=executor)
    sensor = mgr.add_sensor(sg.StateSensorOptions(key="obs", **opts), name="x")
    rng = np.random.default_rng(seed)

    def state(t: int) -> dict:
        # long runs held at a bound (a slow filter creeps towards it) and random values inside
        held = np.where(np.arange(b)[:, None] % 2 == 0, space.high, space.low)
        inside = rng.uniform(space.low, space.high, (b, COLS))
        return {"obs": (held if (t // 40) % 2 == 0 else inside).astype(np.float32)}

    first = state(0)
    mgr.build(first)
    layout = ObservationLayout(mgr, {"x": sensor}, ["x"], ["x"], space)
    mgr.reset(first)
    for t in range(160):
        if t == 90:
            mgr.reset(state(t), envs_idx=np.arange(b) % 3 == 0)
        else:
            mgr.step(state(t))
        packed = layout.pack_numpy(np.asarray(state(t)["obs"]))
        for i in range(b):
            assert packed["policy"][i] in layout.policy_space, (
                t,
                opts,
                packed["policy"][i],
                layout.policy_space,
            )


def test_a_slow_filter_at_a_bound_stays_in_it() -> None:
    """The filter's float32 arithmetic: a^m y + (1 - a^m) x crept up to 50 ulps past a bound held by the
    input when 1 - a^m is small; y + (1 - a^m)(x - y) stays within it."""
    hi = np.array([3.3, 0.7, 0.7], np.float32)  # (0.5 Hz, 3.3) and (1 Hz, 0.7) crept 1 ulp past the bound
    space = gym.spaces.Box(-hi, hi, (COLS,), np.float32)
    for executor in ("numpy", "torch"):
        mgr = sg.SensorManager(num_envs=4, dt=0.05, seed=0, executor=executor)
        sensor = mgr.add_sensor(sg.StateSensorOptions(key="obs", bandwidth=[0.5, 1.0, 0.01]), name="x")
        low = {"obs": np.tile(-hi, (4, 1))}
        high = {"obs": np.tile(hi, (4, 1))}
        mgr.build(low)
        layout = ObservationLayout(mgr, {"x": sensor}, ["x"], ["x"], space)
        mgr.reset(low)
        for _ in range(3000):
            mgr.step(high)
            reading = np.asarray(sensor.read())
            assert (reading <= layout.policy_space.high).all() and (reading >= layout.policy_space.low).all()
        assert np.abs(reading - hi)[:, :2].max() < 1e-6  # it did get there


@pytest.mark.parametrize(
    "term",
    [
        {"noise_density": 0.02},
        {"random_walk_density": 0.05},
        {"bias_instability": 0.05, "bias_correlation_time": 10.0},
        {"scale_factor": 0.3},
        {"scale_factor": sg.Uniform(-0.2, 0.4)},
        {"bandwidth": 0.5},
    ],
    ids=lambda t: next(iter(t)),
)
def test_pendulum_through_the_wrapper_passes_gymnasium_check_env(term) -> None:
    """The reported route: Pendulum's cos/sin, whose Box is [-1, 1], through a term of SPEC 5.1."""
    envs = gym.make_vec("Pendulum-v1", num_envs=4, vectorization_mode="sync")
    env = SensorObservation(envs, {"cs": sg.StateSensorOptions(key="obs", index=[0, 1], **term)})
    obs, _ = env.reset(seed=0)
    space = env.single_observation_space["policy"]
    rng = np.random.default_rng(0)
    outside = 0
    for _ in range(300):
        obs, *_ = env.step(rng.uniform(-2, 2, (4, 1)).astype(np.float32))
        outside += sum(obs["policy"][i] not in space for i in range(4))
    env.close()
    assert outside == 0
    single = sg.wrappers.SingleEnvSensorObservation(
        gym.make("Pendulum-v1"), {"cs": sg.StateSensorOptions(key="obs", index=[0, 1], **term)}
    )
    check_env(single, skip_render_check=True)
