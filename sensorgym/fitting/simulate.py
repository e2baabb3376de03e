"""The fitted config simulated through :class:`~sensorgym.SensorManager`, for the closed-loop check.

Each fitted table becomes one :class:`~sensorgym.StateSensorOptions` with exactly the options written to
``fitted.toml`` (the error-model terms, ``update_period``, ``dropout``, ``dropout_burst``; an IMU's fields
are components of the one sensor, so one sampler loses them together, as an IMU's does), reading a
constant state: the log's mean in the static window, so that a quantization lattice sits where the log's
does. A manager with ``dt = T_s`` steps ``envs`` envs for as many steps as the log has sample slots; a
sample lost by the sampler is left out, as the log leaves it out, and every env's received samples give
one Allan deviation (at ``m`` received samples, as the log's), pooled over envs, and the timing of its
samples. ``delay`` is left out: it shifts readings in time and changes neither the Allan deviation nor
which samples arrive.

A long log (over ``LONG_LOG`` slots) is simulated as ``segments`` (at most 4) shorter runs of more
envs: a run of a quarter of the log still holds 2.5 times the longest ``tau`` of the check (a tenth of
the log), and every run starts from the model's stationary state (the reset draws the Gauss-Markov bias
and the filter from their stationary laws; a random walk's Allan deviation does not depend on its
start), so the pooled deviation estimates the same thing with the same number of samples, in a quarter
of the manager's steps. Memory caps the envs so that the stored readings stay under ``MAX_VALUES``.
Where such a log also loses few samples (``dropout`` at most 5%), the long runs step the manager without
its sampler's losses (a sampler that may drop samples costs twice as much per step: 33 s against 14 s of
CPU for the hour of benchmarks/bench_fit.py), and the samples they leave out are drawn afterwards from
the sampler's own law (:func:`loss_mask`: the two-state chain of docs/error_model.md with the fitted
``dropout`` and ``dropout_burst``, the first sample kept), which is the same thing, since a lost sample
is still computed (docs/error_model.md); a run of 64 envs x 10,000 steps with every option, through the
manager's sampler, gives the timing.

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

__all__ = ["LONG_LOG", "MAX_VALUES", "SimResult", "SimSensor", "loss_mask", "simulate"]

LONG_LOG = 200_000
MAX_VALUES = 40_000_000
_MIN_ENVS = 8
_LOSSES = ("dropout", "dropout_burst")
_FEW_LOSSES = 0.05  # a loss fraction under which losses barely change the Allan deviation
_TIMING_STEPS = 10_000


@dataclass
class SimSensor:
    """One fitted sensor to simulate.

    Attributes:
        name: its table (``"gyro"``; an IMU's fields are all components of ``"imu"``).
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
    #: per sensor, ``(envs, steps)`` of the run its timing came from when that was a run of its own
    timing_run: dict[str, tuple[int, int] | None] = field(default_factory=dict)
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


def _run(
    group: Sequence[SimSensor],
    ts: float,
    batch: int,
    length: int,
    seed: int,
    with_losses: bool,
    progress: Callable[[int], None] | None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Step one manager of ``batch`` envs for ``length`` steps; the readings ``(length, batch, components)``
    per sensor and which samples arrived ``(length, batch, sensors)``."""
    mgr = SensorManager(num_envs=batch, dt=ts, seed=seed)
    handles = []
    for s in group:
        options = s.options if with_losses else {k: v for k, v in s.options.items() if k not in _LOSSES}
        opts = StateSensorOptions(key=s.name, shape=(len(s.channels),), update_period=ts, **options)
        handles.append(mgr.add_sensor(opts, name=s.name))
    state = {s.name: np.tile(np.asarray(s.level, np.float32), (batch, 1)) for s in group}
    mgr.reset(state)
    storage = mgr.storage(StateSensor)
    cache = storage.measured.cache.numpy()  # a view: read after every step
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
            progress(i)
    return values, taken


def loss_mask(
    rng: np.random.Generator, steps: int, envs: int, dropout: float, burst: float | None
) -> np.ndarray:
    """``(steps, envs)``: ``True`` where a sample arrives, from the sampler's law (docs/error_model.md):
    after a kept sample the next is lost with ``q = p / (L (1 - p))``, after a lost one with ``1 - 1 / L``;
    without ``burst`` the losses are independent (``L = 1 / (1 - p)``); the first sample is kept.

    Example:
        >>> keep = loss_mask(np.random.default_rng(0), 200_000, 2, 0.1, 3.0)
        >>> round(float(1 - keep.mean()), 2)
        0.1
    """
    keep = np.ones((steps, envs), dtype=bool)
    p = float(dropout)
    if p <= 0:
        return keep
    length = float(burst) if burst is not None else 1.0 / (1.0 - p)
    q = min(1.0, p / (length * (1.0 - p)))
    pairs = int(steps * q * 1.5 + 64)
    for b in range(envs):
        kept = rng.geometric(q, pairs)  # the run of kept samples that starts with a kept one
        lost = rng.geometric(1.0 / length, pairs)
        before = np.concatenate([[0], np.cumsum(lost)[:-1]])
        starts = np.cumsum(kept) + before  # the first lost sample of each run
        within = np.arange(int(lost.sum())) - np.repeat(before, lost)
        where = np.repeat(starts, lost) + within
        keep[where[where < steps], b] = False
    return keep


def _timing(keep: np.ndarray) -> SimTiming:
    """Loss fraction, mean burst, loss runs and intervals of the arrivals ``keep`` ``(steps, envs)``."""
    arrived = [np.flatnonzero(keep[:, b]) for b in range(keep.shape[1])]
    runs = np.concatenate([loss_runs(np.diff(a)) for a in arrived])
    intervals = np.concatenate([np.diff(a) for a in arrived])
    lost = float((~keep[1:]).mean())
    return SimTiming(lost, float(runs.mean()) if len(runs) else None, runs, intervals)


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
    plans = {}
    for ts, group in groups.items():
        longest = max(int(np.max(m[c])) if len(m[c]) else 1 for s in group for c in s.channels)
        steps = max(s.steps for s in group)
        columns = sum(len(s.channels) for s in group)
        segments, batch, length = _layout(steps, columns, envs, longest)
        # a long log with few losses: the losses' timing from a shorter run of its own (below)
        split = segments > 1 and all(float(s.options.get("dropout", 0.0)) <= _FEW_LOSSES for s in group)
        timing_steps = min(length, _TIMING_STEPS) if split else 0
        plans[ts] = (segments, batch, length, split, timing_steps)
    total = sum(p[2] + p[4] for p in plans.values())
    done = 0
    for ts, group in groups.items():
        segments, batch, length, split, timing_steps = plans[ts]
        tick = None if progress is None else (lambda i, base=done: progress(base + i, total))
        values, taken = _run(group, ts, batch, length, seed, not split, tick)
        done += length
        if split:
            tick = None if progress is None else (lambda i, base=done: progress(base + i, total))
            _, arrivals = _run(group, ts, envs, timing_steps, seed + 1, True, tick)
            done += timing_steps
        if split:  # the long runs' losses, from the sampler's law (module docstring)
            rng = np.random.default_rng(seed + 2)
            for k, s in enumerate(group):
                p, burst = float(s.options.get("dropout", 0.0)), s.options.get("dropout_burst")
                taken[:, :, k] = loss_mask(rng, length, batch, p, burst)
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
            out.timing[s.name] = _timing(arrivals[:, :, k] if split else keep)
            out.envs[s.name], out.segments[s.name], out.steps[s.name] = batch, segments, length
            out.timing_run[s.name] = (envs, timing_steps) if split else None
    if progress is not None:
        progress(total, total)
    out.seconds = time.perf_counter() - start
    return out
