"""The read-only diagnostics surface (sensorgym.core.diagnostics): a sensor's reading in columns and its
sampler's decisions, checked against the public reads and a slow reference of the documented due rule."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

import sensorgym as sg
from sensorgym.core import diagnostics


def _due(step: int, period: float, phase: float, dt: float) -> bool:
    """docs/pipeline.md's due rule, in Python floats (float64), one env and step at a time."""
    if step == 0 or period <= dt:
        return True
    now = math.floor((step * dt - phase) / period + 1e-9)
    before = math.floor(((step - 1) * dt - phase) / period + 1e-9)
    return now > before


def _x(t: float, b: int = 3) -> dict[str, torch.Tensor]:
    return {"x": torch.full((b, 1), float(t)) + torch.arange(b, dtype=torch.float32)[:, None] / 10}


def test_the_sampler_takes_exactly_the_due_steps_without_dropout():
    dt, b = 0.02, 3
    mgr = sg.SensorManager(num_envs=b, dt=dt, seed=1)
    cam = mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=1 / 30), name="cam")  # phase drawn
    mgr.reset(_x(0, b))
    state = diagnostics.sampler_state(cam)
    assert set(state) == set(diagnostics.SAMPLER_STATE_KEYS)
    assert state["taken"].all() and (state["last_sample"] == 0).all() and (state["episode_step"] == 0).all()
    phase = state["phase"]
    assert ((phase >= 0) & (phase < 1 / 30)).all() and len(set(phase.tolist())) == b  # one phase per env
    last = [0] * b
    for t in range(1, 40):
        mgr.step(_x(t, b))
        state = diagnostics.sampler_state(cam)
        for i in range(b):
            due = _due(t, float(state["period"][i]), float(state["phase"][i]), dt)
            assert bool(state["taken"][i]) == due, (t, i)
            last[i] = t if due else last[i]
        assert state["last_sample"].tolist() == last
        assert state["episode_step"].tolist() == [t] * b
        # the read shows the last sample (no delay), and read_age says how old it is
        assert torch.allclose(
            diagnostics.reading(cam)[:, 0], torch.tensor([float(s) for s in last]) + _x(0, b)["x"][:, 0]
        )
        ages = (state["episode_step"] - state["last_sample"]).to(torch.float64) * dt
        assert torch.equal(cam.read_age(), ages.to(torch.float32))


def test_lost_samples_are_due_steps_not_taken_at_the_configured_rate():
    dt, b, steps, p = 0.02, 256, 60, 0.3
    mgr = sg.SensorManager(num_envs=b, dt=dt, seed=7)
    gps = mgr.add_sensor(
        sg.StateSensorOptions(key="x", update_period=0.04, update_phase=0.0, dropout=p), name="gps"
    )
    mgr.reset(_x(0, b))
    due = lost = 0
    for t in range(1, steps + 1):
        mgr.step(_x(t, b))
        state = diagnostics.sampler_state(gps)
        assert (state["dropout"] == p).all() and (state["burst"] == 0).all()
        is_due = _due(t, 0.04, 0.0, dt)
        taken = state["taken"]
        if not is_due:
            assert not taken.any(), t  # never a sample between due steps
            continue
        due += b
        lost += int((~taken).sum())
    # 30 due steps x 256 envs = 7680 independent losses of p = 0.3: sd of the fraction 0.0052; 5 sd
    assert due == 30 * b
    assert abs(lost / due - p) < 5 * math.sqrt(p * (1 - p) / due)


def test_a_sensor_that_samples_every_step_has_no_sampler_state_even_beside_one_that_does():
    mgr = sg.SensorManager(num_envs=2, dt=0.02)
    slow = mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=0.1), name="slow")
    fast = mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=0.01, noise=0.1), name="fast")
    mgr.reset(_x(0, 2))
    assert type(slow) is type(fast)  # one class, one sampler for both
    assert diagnostics.sampler_state(slow) is not None
    assert diagnostics.sampler_state(fast) is None
    plain = sg.SensorManager(num_envs=2, dt=0.02)
    alone = plain.add_sensor(sg.StateSensorOptions(key="x"))
    plain.reset(_x(0, 2))
    assert diagnostics.sampler_state(alone) is None


def test_randomized_sampler_values_are_this_episodes_draws():
    mgr = sg.SensorManager(num_envs=64, dt=0.02, seed=3)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="x", update_period=sg.Uniform(0.05, 0.2), dropout=sg.Uniform(0.0, 0.5)),
        name="s",
    )
    mgr.reset(_x(0, 64))
    state = diagnostics.sampler_state(s)
    drawn = s.read_randomization()
    assert torch.equal(state["period"].float(), drawn["update_period"][:, 0])
    assert torch.equal(state["dropout"].float(), drawn["dropout"][:, 0])
    assert state["period"].dtype == torch.float64 and state["taken"].dtype == torch.bool
    assert ((state["period"] >= 0.05) & (state["period"] < 0.2)).all()
    assert len(set(state["period"].tolist())) == 64
    # a partial reset draws again for the reset env only, and restarts its episode
    for t in range(1, 4):
        mgr.step(_x(t, 64))
    before = diagnostics.sampler_state(s)
    mask = torch.zeros(64, dtype=torch.bool)
    mask[5] = True
    mgr.reset(_x(0, 64), envs_idx=mask)
    after = diagnostics.sampler_state(s)
    assert after["episode_step"][5] == 0 and (after["episode_step"][~mask] == 3).all()
    assert after["period"][5] != before["period"][5]
    assert torch.equal(after["period"][~mask], before["period"][~mask])


def test_reading_is_the_public_read_flattened_and_a_copy():
    @dataclass(frozen=True, kw_only=True)
    class TwoFieldOptions(sg.SimpleSensorOptions):
        pass

    class TwoField(sg.SimpleSensor):
        options_cls = TwoFieldOptions
        return_format = ((1,), (2,))
        cache_dtype = torch.float32

        @classmethod
        def _update_raw_data(cls, state, md, raw):
            raw.copy_(torch.as_tensor(state["y"]))

    mgr = sg.SensorManager(num_envs=2, dt=0.1, seed=0)
    pair = mgr.add_sensor(TwoFieldOptions(noise=0.5, delay=0.1))
    angle = mgr.add_sensor(sg.StateSensorOptions(key="x", noise=0.1, history_length=3))
    state = {"y": torch.arange(6.0).reshape(2, 3), **_x(0, 2)}
    mgr.reset(state)
    for t in range(1, 4):
        mgr.step({"y": torch.arange(6.0).reshape(2, 3) + t, **_x(t, 2)})
    first, second = pair.read()
    assert torch.equal(diagnostics.reading(pair), torch.cat([first, second], dim=1))
    gt_first, gt_second = pair.read_ground_truth()
    assert torch.equal(diagnostics.reading(pair, ground_truth=True), torch.cat([gt_first, gt_second], 1))
    assert torch.equal(diagnostics.reading(angle), angle.read(0))  # the current read, not its history
    assert angle.read().shape == (2, 3, 1)
    copy = diagnostics.reading(angle)
    copy.fill_(99.0)
    assert not torch.equal(angle.read(0), copy)


def test_diagnostics_change_no_random_stream():
    def run(look: bool) -> list[torch.Tensor]:
        mgr = sg.SensorManager(num_envs=4, dt=0.02, seed=11)
        s = mgr.add_sensor(
            sg.StateSensorOptions(key="x", update_period=0.05, dropout=0.2, dropout_burst=2.0, noise=0.1)
        )
        mgr.reset(_x(0, 4))
        out = []
        for t in range(1, 30):
            mgr.step(_x(t, 4))
            if look:
                diagnostics.sampler_state(s)
                diagnostics.reading(s, ground_truth=True)
            out.append(s.read().clone())
        return out

    for a, b in zip(run(False), run(True), strict=True):
        assert torch.equal(a, b)


def test_a_sensor_of_an_unbuilt_manager_is_one_clear_error():
    mgr = sg.SensorManager(num_envs=1, dt=0.02)
    s = mgr.add_sensor(sg.StateSensorOptions(key="x", update_period=0.1), name="gps")
    with pytest.raises(RuntimeError, match=r"sampler_state\('gps'\).*Fix: call reset\(\)"):
        diagnostics.sampler_state(s)
    with pytest.raises(RuntimeError, match=r"reading\('gps'\)"):
        diagnostics.reading(s)
