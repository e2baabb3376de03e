"""Declared bounds hold every reading the pipeline can produce (float32 arithmetic included)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sensorgym as sg
from sensorgym.wrappers.layout import ObservationLayout

finite = st.floats(-1e3, 1e3, allow_nan=False, width=32)


@settings(max_examples=300, deadline=None)
@given(
    a=finite,
    b=finite,
    resolution=st.sampled_from([0.0, 0.3, 0.1, 2 / 3, 0.7, 1e-3, 0.25, 5.0]),
    bias=st.floats(-2.0, 2.0, allow_nan=False),
)
def test_quantized_biased_readings_at_the_bounds_stay_in_the_space(a, b, resolution, bias) -> None:
    """Regression (issue 11.7): bounds widened by r/2 in float64 and cast to float32 could be 1 ulp
    inside a reading the float32 pipeline produces."""
    lo, hi = min(a, b), max(a, b)
    space = gym.spaces.Box(np.float32(lo), np.float32(hi), (1,), np.float32)
    mgr = sg.SensorManager(num_envs=4, dt=0.1, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="obs", resolution=resolution, bias=bias), name="x")
    below_hi = max(np.float32(lo), np.nextafter(np.float32(hi), np.float32(-np.inf)))
    values = np.array([[lo], [hi], [below_hi], [(lo + hi) / 2]])
    state = {"obs": values.astype(np.float32)}
    mgr.build(state)
    layout = ObservationLayout(mgr, {"x": s}, ["x"], ["x"], space)
    mgr.reset(state)
    packed = layout.pack_numpy(state["obs"])
    for i in range(4):
        assert packed["policy"][i] in layout.policy_space, (packed["policy"][i], layout.policy_space)
        assert packed["critic"][i] in layout.critic_space


@pytest.mark.parametrize(
    ("high", "bias"),
    [(-3.822852849960327, 2.18), (2.044783592224121, -2.57), (9.99002742767334, 1.98)],
)
def test_biased_reading_at_the_high_bound_stays_in_the_space(high, bias) -> None:
    """Regression (issue 11.7), found by search: the float32 sum high + bias lands 1 ulp above the bound
    computed in float64 and rounded to float32, so the reading left ``policy_space``."""
    space = gym.spaces.Box(np.float32(-20.0), np.float32(high), (1,), np.float32)
    mgr = sg.SensorManager(num_envs=1, dt=0.1, seed=0)
    s = mgr.add_sensor(sg.StateSensorOptions(key="obs", bias=bias), name="x")
    state = {"obs": np.array([[high]], np.float32)}
    mgr.build(state)
    layout = ObservationLayout(mgr, {"x": s}, ["x"], ["x"], space)
    mgr.reset(state)
    reading = layout.pack_numpy(state["obs"])["policy"][0]
    assert reading[0] > np.float32(np.float64(high) + bias)  # the float32 sum really is above
    assert reading in layout.policy_space
