"""The step's intra-op threading (issue 16.1): chosen by the work size, applied only for the duration of a
reset/step, the user's global torch setting restored after it (errors included), numbers unchanged."""

from __future__ import annotations

import pytest
import torch

import sensorgym as sg
import sensorgym.core.manager as manager_module
from sensorgym.sensors.state import StateSensor


def _manager(b: int, **kwargs) -> sg.SensorManager:
    mgr = sg.SensorManager(num_envs=b, dt=0.02, seed=3, **kwargs)
    mgr.add_sensor(
        sg.StateSensorOptions(key="x", shape=(8,), noise=0.1, random_walk=0.01, resolution=0.01, delay=0.04)
    )
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(8,), bias=sg.Normal(0, 1), history_length=3))
    return mgr


def _ramp(b: int, t: int) -> dict:
    return {"x": torch.arange(b * 8, dtype=torch.float32).reshape(b, 8) * 0.001 + t}


@pytest.fixture
def global_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


def _threads_seen(monkeypatch, mgr: sg.SensorManager, b: int) -> list[int]:
    seen: list[int] = []
    original = StateSensor._update_raw_data.__func__

    def spy(cls, state, md, raw):
        seen.append(torch.get_num_threads())
        original(cls, state, md, raw)

    monkeypatch.setattr(StateSensor, "_update_raw_data", classmethod(spy))
    mgr.reset(_ramp(b, 0))
    mgr.step(_ramp(b, 1))
    return seen


@pytest.mark.parametrize(
    ("num_threads", "elements", "expected"),
    [(None, 1 << 22, 1), (None, 8, 2), (0, 1 << 22, 2), (1, 8, 1), (2, 1 << 22, 2)],
)
def test_the_step_runs_with_the_chosen_threads_and_restores_the_global_setting(
    monkeypatch, global_threads, num_threads, elements, expected
):
    monkeypatch.setattr(manager_module, "MULTITHREAD_ELEMENTS", elements)  # 4 envs x 16 columns = 64
    mgr = _manager(4, num_threads=num_threads)
    seen = _threads_seen(monkeypatch, mgr, 4)
    assert seen == [expected, expected]  # reset and step
    assert torch.get_num_threads() == global_threads


def test_the_global_setting_is_restored_when_a_step_raises(global_threads):
    mgr = sg.SensorManager(num_envs=2, dt=0.02, seed=0)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(1,), nan_policy="raise"))
    mgr.reset({"x": torch.zeros(2, 1)})
    assert mgr._step_threads == 1
    with pytest.raises(ValueError, match="non-finite"):
        mgr.step({"x": torch.full((2, 1), float("nan"))})
    assert torch.get_num_threads() == global_threads


def test_numbers_are_bit_identical_whatever_the_threads(global_threads):
    b = 2048
    readings = []
    for threads in (None, 0, 1, 2):
        mgr = _manager(b, num_threads=threads)
        mgr.reset(_ramp(b, 0))
        for t in range(1, 6):
            mgr.step(_ramp(b, t))
        readings.append([s.read(history_length=s.options.history_length or 0).clone() for s in mgr.sensors])
    for other in readings[1:]:
        for a, c in zip(readings[0], other, strict=True):
            assert torch.equal(a, c)


@pytest.mark.parametrize("bad", [-1, 1.5, "2"])
def test_bad_num_threads_names_the_option_and_the_fix(bad):
    with pytest.raises(ValueError, match=r"num_threads=.*Fix:"):
        sg.SensorManager(num_envs=2, dt=0.02, num_threads=bad)
