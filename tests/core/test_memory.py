"""Memory: sensor state grows linearly in the batch and in what delay, jitter and history can reach, and
nothing more (ring depths themselves are pinned exactly in test_pipeline / test_manager)."""

from __future__ import annotations

import pytest
import torch

import sensorgym as sg


def _report(b: int, **options) -> sg.MemoryReport:
    mgr = sg.SensorManager(num_envs=b, dt=0.02, seed=0)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), **options))
    mgr.reset({"x": torch.zeros(b, 3)})
    return sg.memory_report(mgr)


@pytest.mark.parametrize("options", [{}, {"history_length": 3}, {"delay": 0.04, "jitter": 0.02}])
def test_memory_is_linear_in_the_batch(options):
    small, large, larger = (_report(b, **options) for b in (16, 256, 4096))
    slope = (larger.total - large.total) / (4096 - 256)
    assert slope == (large.total - small.total) / (256 - 16)  # exactly linear: a fixed part + B * slope
    assert slope == pytest.approx(larger.per_env, rel=0.02)


def _per_env(**options) -> float:
    """Bytes per env of the sensor class (the slope between two batch sizes: fixed tables cancel)."""
    return (
        _report(64, **options).per_class["StateSensor"] - _report(32, **options).per_class["StateSensor"]
    ) / 32


def test_history_and_delay_cost_exactly_what_they_reach():
    row = 3 * 4  # one float32 (3,) reading per env
    by_h = [_per_env(history_length=h) for h in range(1, 6)]
    # each extra history slot: one measured and one ground-truth slot of the reading
    assert {by_h[i + 1] - by_h[i] for i in range(4)} == {2 * row}
    by_d = [_per_env(delay=0.02 * d, max_delay=0.2) for d in range(1, 5)]
    assert len(set(by_d)) == 1, "the ring is sized by max_delay, not the current delay"
    tight = [_per_env(delay=0.02 * d) for d in range(1, 5)]
    assert {tight[i + 1] - tight[i] for i in range(3)} == {row}  # one measured slot per delay step
    jit = [_per_env(delay=0.1, jitter=0.02 * j) for j in range(0, 4)]
    assert {jit[i + 1] - jit[i] for i in range(1, 3)} == {row}  # one slot per reachable jitter step


def test_standard_suite_bytes_per_env_is_reported():
    mgr = sg.SensorManager(num_envs=32, dt=0.02)
    mgr.add_sensor(sg.StateSensorOptions(key="imu", shape=(6,), delay=0.04, noise=0.01, history_length=4))
    mgr.add_sensor(sg.StateSensorOptions(key="joints", shape=(12,), resolution=0.01))
    mgr.reset({"imu": torch.zeros(32, 6), "joints": torch.zeros(32, 12)})
    report = sg.memory_report(mgr)
    assert "B/env" in str(report) and report.total > 32 * (6 + 12) * 4
    with pytest.raises(RuntimeError, match="reset"):
        sg.memory_report(sg.SensorManager(num_envs=1, dt=0.1))
