"""What ``sensorgym inspect`` records: one env stepped under random actions (or a policy), every sensor's
ground truth and measured reading per step, and for the sensors with their own rate or dropout the
sampler's decision at every step.

It reads the engine through its public surface only: the wrapper's sensors, ``Sensor.read_age`` and the
read-only :mod:`sensorgym.core.diagnostics` (the current reading in columns, the sampler's state).

Example:
    >>> _due(5, period=0.1, phase=0.0, dt=0.02), _due(6, period=0.1, phase=0.0, dt=0.02)
    (True, False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import diagnostics
from .config import Config
from .inspect_error_model import skips_samples

__all__ = ["Recording", "record_traces"]

#: what is kept per step of a sensor with its own rate or dropout (env 0)
_TRACE_KEYS = ("fresh", "due", "age", "step", "period", "phase", "dropout")


@dataclass
class Recording:
    """What :func:`record_traces` recorded: per step (``steps + 1`` rows, the reset first) env 0's
    traces."""

    times: np.ndarray
    names: list[str]
    gt: np.ndarray
    measured: np.ndarray
    sampling: dict[str, dict[str, Any]]
    resets: np.ndarray
    actions: dict[str, np.ndarray] | None
    #: per jittered sensor without a sampler, the age (s) of every reading
    ages: dict[str, np.ndarray] = field(default_factory=dict)
    #: per sensor that replays a recording, env 0's replay index per step ``(T, components)``
    replay: dict[str, np.ndarray] = field(default_factory=dict)


def _due(step: int, period: float, phase: float, dt: float) -> bool:
    """The sampler's due rule (docs/pipeline.md) at episode step ``step`` (the reset step always
    samples), in float64 as the sampler computes it."""
    if step == 0 or period <= dt:
        return True
    now = math.floor((step * dt - phase) / period + 1e-9)
    before = math.floor(((step - 1) * dt - phase) / period + 1e-9)
    return now > before


def channel_names(sensors: dict[str, Any]) -> list[str]:
    """One name per return column: ``"angle"`` for a one-column sensor, ``"angle[0]"``, ``"angle[1]"``
    for a wider one."""
    names = []
    for name, s in sensors.items():
        width = diagnostics.reading(s).shape[1]
        names += [name] if width == 1 else [f"{name}[{i}]" for i in range(width)]
    return names


class _Probe:
    """Per step, env 0's readings of every sensor; the sampler's decisions of the sensors with their own
    rate or dropout; and the age of every reading of the jittered sensors without a sampler (which sample
    the jitter showed)."""

    def __init__(self, sensors: dict[str, Any], dt: float) -> None:
        self.sensors, self.dt = sensors, dt
        self.sampled = {n: s for n, s in sensors.items() if diagnostics.sampler_state(s) is not None}
        self.trace = {name: {k: [] for k in _TRACE_KEYS} for name in self.sampled}
        self.jittered = {
            n: s for n, s in sensors.items() if n not in self.sampled and skips_samples(s.options)
        }
        self.ages: dict[str, list[float]] = {name: [] for name in self.jittered}
        replayed = [n for n, s in sensors.items() if diagnostics.replay_state(s) is not None]
        self.replay: dict[str, list[np.ndarray]] = {name: [] for name in replayed}
        self.gts: list[np.ndarray] = []
        self.ms: list[np.ndarray] = []

    def look(self) -> None:
        """Record this step (after the reset or a step)."""
        # env 0's current GT and measured return columns of every sensor (flat, whatever its fields)
        sensors = self.sensors.values()
        self.gts.append(np.concatenate([diagnostics.reading(s, True)[0].float().numpy() for s in sensors]))
        self.ms.append(np.concatenate([diagnostics.reading(s)[0].float().numpy() for s in sensors]))
        for name, s in self.jittered.items():
            self.ages[name].append(float(s.read_age()[0]))
        for name, trace in self.replay.items():
            trace.append(diagnostics.replay_state(self.sensors[name])["index"][0].numpy())
        for name, s in self.sampled.items():
            state, row = diagnostics.sampler_state(s), self.trace[name]
            step = int(state["episode_step"][0])
            period, phase = float(state["period"][0]), float(state["phase"][0])
            row["fresh"].append(bool(state["taken"][0]))
            row["due"].append(_due(step, period, phase, self.dt))
            row["age"].append(float(s.read_age()[0]))
            row["step"].append(step)
            row["period"].append(period)
            row["phase"].append(phase)
            row["dropout"].append(float(state["dropout"][0]))

    def sampling(self, names: list[str], gt: np.ndarray, measured: np.ndarray) -> dict[str, dict[str, Any]]:
        """Per sampled sensor: its first channel's traces and the sampler's decisions as arrays."""
        out: dict[str, dict[str, Any]] = {}
        for name, row in self.trace.items():
            c = names.index(name) if name in names else names.index(f"{name}[0]")
            fresh, due = np.array(row["fresh"]), np.array(row["due"])
            out[name] = {
                "channel": names[c],
                "gt": gt[:, c],
                "measured": measured[:, c],
                "fresh": fresh,
                "due": due,
                "dropped": due & ~fresh,
                "age": np.array(row["age"]),
                "step": np.array(row["step"]),
                "period": np.array(row["period"]),
                "phase": np.array(row["phase"]),
                "dropout": np.array(row["dropout"]),
                "delay": self.sensors[name].options.delay,
            }
        return out


def _step_through(envs: Any, steps: int, seed: int, model: Any, probe: _Probe) -> tuple[list, Any]:
    """Reset and step ``envs`` ``steps`` times, ``probe`` looking after each; returns the episode starts
    of env 0 and, under ``[latency]``, its commanded and applied actions (else None)."""
    obs, info = envs.reset(seed=seed)
    envs.action_space.seed(seed)
    probe.look()
    # episode starts of env 0 (NEXT_STEP autoreset: the step after a done is the reset step), and, under
    # [latency], the commanded and the applied action of every step (what the latency estimate compares)
    resets = [True]
    latency = "action_applied" in info
    commanded: list[np.ndarray] = []
    applied: list[np.ndarray] = []
    drawn: list[np.ndarray] = []
    done = False
    for _ in range(steps):
        if model is not None:
            action, _ = model.predict(obs, deterministic=True)
        else:
            action = envs.action_space.sample()
        obs, _, terminated, truncated, info = envs.step(action)
        resets.append(done)  # the step after a done is the next episode's reset step
        done = bool(np.asarray(terminated)[0] or np.asarray(truncated)[0])
        if latency:
            commanded.append(np.asarray(action, dtype=float)[0].reshape(-1))
            applied.append(np.asarray(info["action_applied"], dtype=float)[0].reshape(-1))
            drawn.append(np.asarray(info["action_latency"], dtype=float)[0])
        probe.look()
    actions = (
        {"commanded": np.array(commanded), "applied": np.array(applied), "latency": np.array(drawn)}
        if latency and commanded
        else None
    )
    return resets, actions


def record_traces(cfg: Config, steps: int, seed: int = 0, model: Any = None) -> Recording:
    """Step one env of ``cfg`` for ``steps`` steps (random actions, or ``model.predict``) and record env
    0's GT and measured reading of every sensor (the current read, no history), the sampler's decisions
    and the readings' ages."""
    from .sensor_env import config_env_kwargs, make_sensor_env

    envs = make_sensor_env(
        cfg.env.id, cfg.sensors, n_envs=1, seed=seed, autoreset_mode="NextStep", **config_env_kwargs(cfg)
    )
    sensors = {name: s for name, s in envs.sensors.items() if name in cfg.sensors}  # not [latency]'s
    names = channel_names(sensors)
    probe = _Probe(sensors, envs.dt)
    resets, actions = _step_through(envs, steps, seed, model, probe)
    envs.close()
    times = np.arange(steps + 1) * envs.dt
    gt, measured = np.stack(probe.gts), np.stack(probe.ms)
    sampling = probe.sampling(names, gt, measured)
    aged = {name: np.array(a) for name, a in probe.ages.items()}
    replay = {name: np.stack(trace) for name, trace in probe.replay.items()}
    return Recording(times, names, gt, measured, sampling, np.array(resets), actions, aged, replay)
