"""Property test: random sensor sets, options, resets and step counts through the batched manager and
through the slow per-env reference (tests/core/reference.py) must give identical readings."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sensorgym as sg

from ..helpers import ByteOptions, FilterOptions, ThresholdOptions, as_np
from .reference import ReferenceManager

DT = 0.1


def _options(draw, kind: str):
    d_steps = draw(st.integers(0, 3))
    delay = d_steps * DT
    if draw(st.booleans()) and d_steps:
        delay = draw(st.sampled_from([sg.Uniform(0.0, d_steps * DT), sg.Choice([0.0, d_steps * DT])]))
    j_hi = draw(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0])) * DT
    jitter = min(j_hi, d_steps * DT)
    common = dict(
        delay=delay,
        jitter=jitter,
        history_length=draw(st.integers(0, 4)),
        padding_type=draw(st.sampled_from(["reset", "zero"])),
        noise=draw(st.sampled_from([0.0, 0.5, sg.Uniform(0.0, 1.0)])),
        bias=draw(st.sampled_from([0.0, 1.5, [0.25, -0.75], sg.Normal(0.0, 1.0)])),
        random_walk=draw(st.sampled_from([0.0, 0.3])),
        resolution=draw(st.sampled_from([0.0, 0.25, [0.0, 0.5]])),
        max_delay=draw(st.sampled_from([None, 0.5])),
    )
    if kind == "state":
        return sg.StateSensorOptions(key="x", index=[0, 1], **common)
    if kind == "filter":
        return FilterOptions(
            width=2,
            alpha=draw(st.sampled_from([0.0, 0.5])),
            physics_offset=draw(st.sampled_from([0.0, 3.0])),
            **common,
        )
    if kind == "threshold":
        return ThresholdOptions(width=2, threshold=draw(st.sampled_from([0.0, 5.0])), **common)
    return ByteOptions(width=2, **common)


def _mask(draw, b: int) -> np.ndarray:
    return np.array(draw(st.lists(st.booleans(), min_size=b, max_size=b)), dtype=bool)


def _compare(mgr, ref) -> None:
    for s in mgr.sensors:
        for gt in (False, True):
            got = s.read_ground_truth(0) if gt else s.read(0)
            np.testing.assert_array_equal(as_np(got), ref.read(s, gt, 0), err_msg=f"{s.name} gt={gt}")
            if s.options.history_length:
                got = s.read_ground_truth() if gt else s.read()
                np.testing.assert_array_equal(as_np(got), ref.read(s, gt), err_msg=f"{s.name} hist gt={gt}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_manager_matches_reference(data):
    draw = data.draw
    b = draw(st.integers(1, 4))
    executor = draw(st.sampled_from(["torch", "numpy"]), label="executor")  # both against the oracle
    mgr = sg.SensorManager(num_envs=b, dt=DT, seed=draw(st.integers(0, 1000)), executor=executor)
    for i in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["state", "filter", "threshold", "byte"]))
        mgr.add_sensor(_options(draw, kind), name=f"s{i}")
    g = torch.Generator().manual_seed(draw(st.integers(0, 1000)))

    def state(t):
        return {"x": torch.randint(0, 40, (b, 3), generator=g).float() * 0.5 + 100.0 * t % 200.0}

    ref = ReferenceManager(mgr)
    s0 = state(0)
    mgr.reset(s0)
    ref.reset(s0, np.ones(b, bool))
    _compare(mgr, ref)
    for t in range(1, draw(st.integers(1, 25))):
        action = draw(st.sampled_from(["step", "step", "step", "step_reset", "reset", "set_delay"]))
        x = state(t)
        if action == "step":
            mgr.step(x)
            ref.step(x)
        elif action == "step_reset":
            m = _mask(draw, b)
            mgr.step(x, reset_mask=m)
            ref.step(x, m)
        elif action == "reset":
            m = _mask(draw, b)
            mgr.reset(x, envs_idx=m)
            ref.reset(x, m)
        else:
            s = mgr.sensors[draw(st.integers(0, len(mgr.sensors) - 1))]
            if s.options.max_delay is None:
                continue
            envs = np.flatnonzero(_mask(draw, b))
            d = draw(st.integers(0, 3)) * DT
            s.set_jitter(0.0, envs)
            s.set_delay(d, envs)
            mgr.step(x)
            ref.step(x)
        _compare(mgr, ref)
