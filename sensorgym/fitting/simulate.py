"""The fitted config simulated through :class:`~sensorgym.SensorManager`, for the closed-loop check.

Each fitted sensor becomes a :class:`~sensorgym.StateSensorOptions` with exactly the options written to
``fitted.toml`` (the error-model terms, ``update_period``, ``dropout``, ``dropout_burst``), reading a constant
state: the log's mean in the static window, so that a quantization lattice sits where the log's does. A
manager with ``dt = T_s`` steps ``envs`` envs for as many steps as the log has sample slots; a sample
lost by the sampler is left out, as the log leaves it out, and every env's received samples give one
Allan deviation, pooled over envs, and the timing of its samples. ``delay`` is left out: it shifts
readings in time and changes neither the Allan deviation nor which samples arrive.

A long log (over ``LONG_LOG`` slots) is simulated as ``segments`` (at most 4) shorter runs of more
envs: a run of a quarter of the log still holds 2.5 times the longest ``tau`` of the check (a tenth of
the log), and every run starts from the model's stationary state (the reset draws the Gauss-Markov bias
and the filter from their stationary laws; a random walk's Allan deviation does not depend on its
start), so the pooled deviation estimates the same thing with the same number of samples, in a quarter
of the manager's steps. Memory caps the envs so that the stored readings stay under ``MAX_VALUES``.

Example:
    >>> import numpy as np
    >>> s = SimSensor("gyro", ["gx"], {"noise_density": [0.01]}, np.array([0.0]), 0.01, 4000)
    >>> out = simulate([s], {"gx": np.array([1, 4, 16])}, envs=8, seed=0)
    >>> ratio = out.adev["gx"] / (0.01 / np.sqrt(np.array([1, 4, 16]) * 0.01))
    >>> bool(np.all(np.abs(ratio - 1) < 0.05))
    True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.manager import SensorManager
from ..sensors.state import StateSensor, StateSensorOptions
from .allan import allan_variance_batch
from .timing import loss_runs

__all__ = ["LONG_LOG", "MAX_VALUES", "SimResult", "SimSensor", "simulate"]

LONG_LOG = 200_000
MAX_VALUES = 40_000_000
_MIN_ENVS = 8


@dataclass
class SimSensor:
    """One fitted sensor to simulate.

    Attributes:
        name: its table (``"gyro"``, or ``"imu.gyro"`` for an IMU field).
        channels: the log channels that are its components, in order.
        options: its fitted error-model and timing options as ``StateSensorOptions`` keywords
            (per-component lists).
        level: ``(components,)`` the constant value it reads (the log's static mean).
        sample_interval: ``T_s`` (s), the manager's ``dt``.
        steps: sample slots of the log (received + lost).
    """

    name: str
    channels: list[str]
    options: dict[str, Any]
    level: np.ndarray
    sample_interval: float
    steps: int


@dataclass
class SimTiming:
    """The simulated timing of one sensor: loss fraction, mean burst, loss runs and intervals (in ``T_s``)."""

    dropout: float
    burst: float | None
    runs: np.ndarray
    intervals: np.ndarray


@dataclass
class SimResult:
    """Allan deviation per channel (at the requested ``m``), timing per sensor, and how it was run."""

    m: dict[str, np.ndarray]
    adev: dict[str, np.ndarray]
    timing: dict[str, SimTiming]
    envs: dict[str, int] = field(default_factory=dict)
    segments: dict[str, int] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def _layout(steps: int, columns: int, envs: int, longest_m: int) -> tuple[int, int, int]:
    """``(segments, envs in all, steps per env)`` for a log of ``steps`` slots."""
    segments = 1
    if steps > LONG_LOG:
        # each run keeps at least 2.5 x the longest m (+ margin for lost samples)
        segments = int(max(1, min(4, steps // max(1, int(2.6 * longest_m)))))
    length = math.ceil(steps / segments)
    total = envs * segments
    cap = max(_MIN_ENVS, MAX_VALUES // max(1, length * columns))
    return segments, min(total, cap), length


def simulate(
    sensors: Sequence[SimSensor],
    m: dict[str, np.ndarray],
    envs: int = 64,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Simulate ``sensors`` and return each channel's Allan deviation at ``m[channel]`` and each sensor's
    timing. ``progress(done, total)`` is called every few thousand steps."""
    start = time.perf_counter()
    out = SimResult({}, {}, {})
    groups: dict[float, list[SimSensor]] = {}
    for s in sensors:
        groups.setdefault(s.sample_interval, []).append(s)
    total_steps = 0
    plans = {}
    for ts, group in groups.items():
        longest = max(int(np.max(m[c])) if len(m[c]) else 1 for s in group for c in s.channels)
        steps = max(s.steps for s in group)
        columns = sum(len(s.channels) for s in group)
        plans[ts] = _layout(steps, columns, envs, longest)
        total_steps += plans[ts][2]
    done = 0
    for ts, group in groups.items():
        segments, batch, length = plans[ts]
        mgr = SensorManager(num_envs=batch, dt=ts, seed=seed)
        handles = []
        for s in group:
            opts = StateSensorOptions(key=s.name, shape=(len(s.channels),), update_period=ts, **s.options)
            handles.append(mgr.add_sensor(opts, name=s.name))
        state = {s.name: np.tile(np.asarray(s.level, np.float32), (batch, 1)) for s in group}
        mgr.reset(state)
        storage = mgr.storage(StateSensor)
        cache = storage.measured_cache.numpy()
        columns = [h.return_slice for h in handles]
        values = {s.name: np.empty((length, batch, len(s.channels)), np.float32) for s in group}
        taken = np.ones((length, batch, len(group)), dtype=bool)
        sampler = storage.sampler
        order = [h.index for h in handles]
        for k, s in enumerate(group):
            values[s.name][0] = cache[:, columns[k]]
        for i in range(1, length):
            mgr.step(state)
            for k, s in enumerate(group):
                values[s.name][i] = cache[:, columns[k]]
            if sampler is not None:
                taken[i] = sampler.take.numpy()[:, order]
            if progress is not None and i % 4096 == 0:
                progress(done + i, total_steps)
        done += length
        for k, s in enumerate(group):
            keep = taken[:, :, k]
            rows = [values[s.name][keep[:, b], b, :] for b in range(batch)]
            common = min(len(r) for r in rows)
            stacked = np.stack([r[:common] for r in rows])  # (batch, samples, components)
            for c, channel in enumerate(s.channels):
                mm = np.asarray(m[channel], dtype=np.int64)
                mm = mm[mm <= (common - 1) // 2]
                out.m[channel] = mm
                out.adev[channel] = np.sqrt(allan_variance_batch(stacked[:, :, c], mm))
            runs = np.concatenate([loss_runs(np.diff(np.flatnonzero(keep[:, b]))) for b in range(batch)])
            intervals = np.concatenate([np.diff(np.flatnonzero(keep[:, b])) for b in range(batch)])
            lost = float((~keep[1:]).mean())
            out.timing[s.name] = SimTiming(lost, float(runs.mean()) if len(runs) else None, runs, intervals)
            out.envs[s.name], out.segments[s.name], out.steps[s.name] = batch, segments, length
    if progress is not None:
        progress(total_steps, total_steps)
    out.seconds = time.perf_counter() - start
    return out
