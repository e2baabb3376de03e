"""NaN policy (raise / hold / propagate) on the raw capture, and padding of rings at a reset."""

from __future__ import annotations

import pytest
import torch

import sensorgym as sg
from sensorgym.core.metadata import STEP, CaptureContext
from sensorgym.core.ring import Clock, Ring
from sensorgym.core.stages import NanPolicy, Padding

from .helpers import class_plan, sensors

NAN = float("nan")


def _timelines(b=2, cols=2):
    clock = Clock()
    return Ring(1, b, cols, torch.float32, "cpu", clock), Ring(1, b, cols, torch.float32, "cpu", clock)


def test_propagate_builds_no_policy():
    assert NanPolicy.build(class_plan(sensors(dict(width=2))), torch.zeros(2, 2), Clock()) is None


def test_hold_keeps_the_last_finite_value_per_env_and_component():
    gt, measured = _timelines()
    policy = NanPolicy.build(class_plan(sensors(dict(nan_policy="hold", width=2))), gt.at(0), Clock())
    reset = CaptureContext(torch.tensor([True, True]), None, False)
    for ring in (gt, measured):
        ring.at(0).copy_(torch.tensor([[1.0, 2.0], [NAN, 4.0]]))
    policy(gt, measured, reset)
    assert measured.at(0).tolist() == [[1.0, 2.0], [0.0, 4.0]]  # nothing to hold yet: 0
    for ring in (gt, measured):
        ring.at(0).copy_(torch.tensor([[NAN, 5.0], [6.0, float("inf")]]))
    policy(gt, measured, STEP)
    assert gt.at(0).tolist() == [[1.0, 5.0], [6.0, 4.0]]
    for ring in (gt, measured):
        ring.at(0).copy_(torch.tensor([[NAN, NAN], [NAN, NAN]]))
    policy(gt, measured, CaptureContext(torch.tensor([False, True]), None, True))
    assert measured.at(0).tolist() == [[1.0, 5.0], [0.0, 0.0]]  # a reset forgets the held values


def test_raise_names_sensor_envs_and_step_and_ignores_rows_not_captured():
    gt, measured = _timelines(b=3, cols=1)
    clock = Clock()
    policy = NanPolicy.build(class_plan(sensors(dict(nan_policy="raise"))), gt.at(0), clock)
    gt.at(0).copy_(torch.tensor([[0.0], [NAN], [1.0]]))
    measured.at(0).copy_(gt.at(0))
    policy(
        gt,
        measured,
        CaptureContext(torch.tensor([True, False, False]), torch.tensor([True, False, False]), False),
    )
    clock.t = 7
    with pytest.raises(ValueError, match=r"sensor 's0'.*envs \[1\] at step 7 \(nan_policy='raise'\)"):
        policy(gt, measured, STEP)


@pytest.mark.parametrize("zero", [False, True])
def test_padding_repeats_the_first_snapshot_or_zeros(zero):
    ring = Ring(3, 2, 2, torch.float32, "cpu", Clock())
    ring.buffer.fill_(9.0)
    ring.at(0).copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    Padding([False, zero], ring.at(0)).fill(ring, torch.tensor([True, False]))
    pad = 0.0 if zero else 2.0
    assert [ring.at(k)[0].tolist() for k in range(3)] == [[1.0, 2.0], [1.0, pad], [1.0, pad]]
    assert [ring.at(k)[1].tolist() for k in range(3)] == [[3.0, 4.0], [9.0, 9.0], [9.0, 9.0]]  # not reset


@pytest.mark.parametrize(("padding", "expect"), [("reset", [5, 5, 5, 6, 7]), ("zero", [0, 0, 5, 6, 7])])
def test_delayed_and_history_reads_show_padding_exactly(padding, expect):
    mgr = sg.SensorManager(num_envs=1, dt=0.1)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="x", shape=(1,), delay=0.2, history_length=3, padding_type=padding)
    )
    mgr.reset({"x": torch.full((1, 1), 5.0)})
    seen = [s.read(0).item()]
    for t in range(1, 5):
        mgr.step({"x": torch.full((1, 1), 5.0 + t)})
        seen.append(s.read(0).item())
    assert seen == expect
    assert s.read()[0, :, 0].tolist() == [7.0, 6.0, 5.0]  # causal history: the last three reads
