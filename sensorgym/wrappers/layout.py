"""The observation a wrapper returns: ``{"policy": measured, "critic": ground truth + env obs}``.

``policy`` holds the measured reading of every policy sensor, in mapping order, history flattened
newest first, as float32, then optionally the age (seconds, :meth:`~sensorgym.Sensor.read_age`) of the
readings of the sensors named in ``policy_age``. ``critic`` holds the ground truth of every critic sensor
at the current step, then the env's own observation (flattened), then optionally the per-env randomized
sensor parameters, then optionally the ages of the sensors named in ``critic_age``.
Bounds are honest: a component is bounded only when nothing (noise, drift, bias, quantization, padding)
can take it out of the range the env declares.

Example:
    >>> import numpy as np, gymnasium as gym, sensorgym as sg
    >>> from sensorgym.wrappers.layout import ObservationLayout
    >>> mgr = sg.SensorManager(num_envs=1, dt=0.05)
    >>> s = mgr.add_sensor(sg.StateSensorOptions(key="obs", index=[0], history_length=2), name="cos")
    >>> mgr.build({"obs": np.zeros((1, 3))})
    >>> space = gym.spaces.Box(-1.0, 1.0, (3,))
    >>> layout = ObservationLayout(mgr, {"cos": s}, ["cos"], ["cos"], space)
    >>> layout.policy_space.shape, layout.critic_space.shape, layout.policy_space.high.tolist()
    ((2,), (4,), [1.0, 1.0])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ..core.manager import SensorManager
from ..core.options import SimpleSensorOptions, bounds_of
from ..core.sensor import Sensor
from ..sensors.state import StateSensorOptions
from .spaces import Flattener, entry_bounds, flat_bounds, space_at

__all__ = ["ObservationLayout", "gt_bounds", "measured_bounds"]

_EPS32 = float(np.finfo(np.float32).eps)


def gt_bounds(sensor: Sensor, obs_space: gym.Space | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-component bounds of a sensor's ground truth (return space, flat)."""
    width = sensor.return_slice.stop - sensor.return_slice.start
    dtype = type(sensor)._get_cache_dtype()
    if dtype == torch.bool:
        return np.zeros(width), np.ones(width)
    lo, hi = np.full(width, -np.inf), np.full(width, np.inf)
    o = sensor.options
    space = space_at(o.key, obs_space) if isinstance(o, StateSensorOptions) else None
    bounds = entry_bounds(space) if space is not None else None
    if bounds is not None:
        shape = space.shape if space.shape else (1,)
        slo, shi = (b.reshape(shape) for b in bounds)
        if o.index is not None:
            slo, shi = slo[..., list(o.index)], shi[..., list(o.index)]
        if slo.size == width:
            lo, hi = slo.ravel(), shi.ravel()
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        lo, hi = np.maximum(lo, info.min), np.minimum(hi, info.max)
    return lo, hi


def measured_bounds(sensor: Sensor, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Widen GT bounds by what the imperfections and the padding can add (per component)."""
    lo, hi = lo.copy(), hi.copy()
    o = sensor.options
    dtype = type(sensor)._get_cache_dtype()
    same_space = sensor.cache_slice.stop - sensor.cache_slice.start == lo.size
    if isinstance(o, SimpleSensorOptions) and dtype.is_floating_point and same_space:

        def per_comp(value: Any) -> list[tuple[float, float]]:
            vals = value if isinstance(value, tuple) else (value,)
            vals = vals * lo.size if len(vals) == 1 else vals
            return [bounds_of(v) for v in vals]

        for i, ((_, n_hi), (_, w_hi), (b_lo, b_hi), (_, r_hi)) in enumerate(
            zip(
                per_comp(o.noise),
                per_comp(o.random_walk),
                per_comp(o.bias),
                per_comp(o.resolution),
                strict=True,
            )
        ):
            if n_hi > 0 or w_hi > 0 or not (math.isfinite(b_lo) and math.isfinite(b_hi)):
                lo[i], hi[i] = -np.inf, np.inf
                continue
            # the pipeline computes in float32: each add, divide, round and multiply may move the reading
            # by an ulp of its operands, so widen by a few ulps of the largest of them
            arithmetic = b_lo != 0 or b_hi != 0 or r_hi > 0
            slack = 8 * _EPS32 * (max(abs(lo[i]), abs(hi[i])) + max(abs(b_lo), abs(b_hi)) + r_hi)
            slack = slack if arithmetic else 0.0
            lo[i] += b_lo - r_hi / 2 - slack
            hi[i] += b_hi + r_hi / 2 + slack
    if o.padding_type == "zero":
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
    return lo, hi


class ObservationLayout:
    """Spaces and packing of the ``{"policy", "critic"}`` observation for a built manager."""

    def __init__(
        self,
        manager: SensorManager,
        sensors: Mapping[str, Sensor],
        policy: Sequence[str],
        critic: Sequence[str],
        env_obs_space: gym.Space | None,
        include_env_obs: bool = True,
        include_randomization: bool = False,
        policy_age: Sequence[str] = (),
        critic_age: Sequence[str] = (),
    ) -> None:
        self.manager = manager
        self.policy = [sensors[n] for n in policy]
        self.critic = [sensors[n] for n in critic]
        for what, names in (("policy_age", policy_age), ("critic_age", critic_age)):
            unknown = [n for n in names if n not in sensors]
            if isinstance(names, str) or unknown:
                raise ValueError(
                    f"{what}={names!r}: expected a list of sensor names; unknown: {unknown or names!r}. "
                    f"Fix: pass names among {list(sensors)}, e.g. {what}=[{next(iter(sensors))!r}]."
                )
        self.policy_age = [sensors[n] for n in policy_age]
        self.critic_age = [sensors[n] for n in critic_age]
        self.include_env_obs = include_env_obs and env_obs_space is not None
        self.include_randomization = include_randomization
        p_lo, p_hi, c_lo, c_hi = [], [], [], []
        self._policy_cols = []
        col = 0
        for s in self.policy:
            lo, hi = measured_bounds(s, *gt_bounds(s, env_obs_space))
            n = max(s.options.history_length, 1)
            width = lo.size * n
            self._policy_cols.append((s, slice(col, col + width), s.options.history_length))
            p_lo.append(np.tile(lo, n))
            p_hi.append(np.tile(hi, n))
            col += width
        self._policy_age_cols = slice(col, col + len(self.policy_age))
        p_lo.append(np.zeros(len(self.policy_age)))
        p_hi.append(np.full(len(self.policy_age), np.inf))
        self._critic_cols = []
        col = 0
        for s in self.critic:
            lo, hi = gt_bounds(s, env_obs_space)
            self._critic_cols.append((s, slice(col, col + lo.size)))
            c_lo.append(lo)
            c_hi.append(hi)
            col += lo.size
        self._env_cols = slice(col, col)
        self._flatten: Flattener | None = None
        if self.include_env_obs:
            self._flatten = Flattener(env_obs_space)
            lo, hi = flat_bounds(env_obs_space)
            self._env_cols = slice(col, col + lo.size)
            c_lo.append(lo)
            c_hi.append(hi)
            col += lo.size
        self._random_cols = slice(col, col)
        if include_randomization:
            n = len(manager.randomization_names())
            self._random_cols = slice(col, col + n)
            c_lo.append(np.full(n, -np.inf))
            c_hi.append(np.full(n, np.inf))
            col += n
        self._critic_age_cols = slice(col, col + len(self.critic_age))
        c_lo.append(np.zeros(len(self.critic_age)))
        c_hi.append(np.full(len(self.critic_age), np.inf))
        self.policy_space = _box(p_lo, p_hi)
        self.critic_space = _box(c_lo, c_hi)
        self.space = gym.spaces.Dict({"policy": self.policy_space, "critic": self.critic_space})
        self._runs()
        self._plan: tuple[list, list] | None = None  # views for `pack`, made at its first call
        self._np_plan: tuple[list, list] | None = None  # numpy views for `pack_numpy`

    def _runs(self) -> None:
        """Merge consecutive sensors of one class with adjacent columns (and equal history length and
        width) into runs: packing then costs a few copies per class, not per sensor and history slot."""
        self._policy_runs: list[list] = []
        for s, cols, hist in self._policy_cols:
            st, w = s._storage, s.return_slice.stop - s.return_slice.start
            last = self._policy_runs[-1] if self._policy_runs else None
            if (
                last
                and last[0] is st
                and last[3] == hist
                and last[5] == w
                and last[1].stop == s.return_slice.start
            ):
                last[1] = slice(last[1].start, s.return_slice.stop)
                last[2] = slice(last[2].start, cols.stop)
                last[4] += 1
            else:
                self._policy_runs.append([st, s.return_slice, cols, hist, 1, w])
        self._critic_runs: list[list] = []
        for s, cols in self._critic_cols:
            st = s._storage
            last = self._critic_runs[-1] if self._critic_runs else None
            if last and last[0] is st and last[1].stop == s.return_slice.start:
                last[1] = slice(last[1].start, s.return_slice.stop)
                last[2] = slice(last[2].start, cols.stop)
            else:
                self._critic_runs.append([st, s.return_slice, cols])

    def pack(self, env_obs: Any) -> dict[str, torch.Tensor]:
        """New float32 tensors ``{"policy": (B, P), "critic": (B, C)}`` from the current readings and
        the env's observation batch ``env_obs`` (flattened into the critic as ``spaces.flatten`` does)."""
        if self._plan is None:
            self._plan = self._make_plan()
        b, device = self.manager.num_envs, self.manager.device
        policy = torch.empty(b, self.policy_space.shape[0], dtype=torch.float32, device=device)
        for ring, hist_src, src, start, width, shape in self._plan[0]:
            dst = policy.narrow(1, start, width)
            if ring is None:
                dst.copy_(src)
            else:
                # (H, B, n*w) newest first -> per sensor (B, H, w) blocks, flattened newest first
                h, n, w = shape
                snaps = hist_src.index_select(0, ring.order(h))
                dst.view(b, n, h, w).copy_(snaps.view(h, b, n, w).permute(1, 2, 0, 3))
        critic = torch.empty(b, self.critic_space.shape[0], dtype=torch.float32, device=device)
        for src, start, width in self._plan[1]:
            critic.narrow(1, start, width).copy_(src)
        if self._flatten is not None:
            self._flatten(env_obs, critic[:, self._env_cols])
        if self.include_randomization:
            critic[:, self._random_cols] = self.manager.read_randomization()
        for sensors, cols, out in (
            (self.policy_age, self._policy_age_cols, policy),
            (self.critic_age, self._critic_age_cols, critic),
        ):
            for i, s in enumerate(sensors):
                out[:, cols.start + i] = s.read_age()
        return {"policy": policy, "critic": critic}

    def pack_numpy(self, env_obs: Any) -> dict[str, np.ndarray]:
        """:meth:`pack` for a CPU manager and a numpy env: new float32 arrays, filled through numpy views
        of the sensor buffers. The same values as ``pack``; for the small arrays of a few sensors a numpy
        copy costs a fraction of a torch op's dispatch, and this runs once per env step."""
        if self._np_plan is None:
            self._np_plan = self._make_numpy_plan()
        b = self.manager.num_envs
        policy = np.empty((b, self.policy_space.shape[0]), np.float32)
        for clock, depth, hist_src, src, dst, shape in self._np_plan[0]:
            if hist_src is None:
                policy[:, dst] = src
            else:
                # (H, B, n*w) newest first -> per sensor (B, H, w) blocks, flattened newest first
                h, n, w = shape
                t = clock.t
                snaps = hist_src[[(t - k) % depth for k in range(h)]]
                policy[:, dst] = snaps.reshape(h, b, n, w).transpose(1, 2, 0, 3).reshape(b, n * h * w)
        critic = np.empty((b, self.critic_space.shape[0]), np.float32)
        for src, dst in self._np_plan[1]:
            critic[:, dst] = src
        if self._flatten is not None:
            self._flatten(env_obs, critic[:, self._env_cols])
        if self.include_randomization:
            critic[:, self._random_cols] = self.manager.read_randomization().numpy()
        for sensors, cols, out in (
            (self.policy_age, self._policy_age_cols, policy),
            (self.critic_age, self._critic_age_cols, critic),
        ):
            for i, s in enumerate(sensors):
                out[:, cols.start + i] = s.read_age().numpy()
        return {"policy": policy, "critic": critic}

    def _make_plan(self) -> tuple[list, list]:
        """The views ``pack`` copies from, made once (the buffers behind them live as long as the
        manager; loading a state copies into them)."""
        policy = []
        for st, src, dst, hist, n, w in self._policy_runs:
            if hist:
                policy.append(
                    (st.hist, st.hist.buffer[:, :, src], None, dst.start, dst.stop - dst.start, (hist, n, w))
                )
            else:
                policy.append((None, None, st.m_cache[:, src], dst.start, dst.stop - dst.start, None))
        critic = [
            (st.gt_cache[:, src], dst.start, dst.stop - dst.start) for st, src, dst in self._critic_runs
        ]
        return policy, critic

    def numpy_packable(self) -> bool:
        """Whether :meth:`pack_numpy` can run: a CPU manager whose sensor buffers numpy can view (a
        custom sensor with e.g. a bfloat16 return dtype cannot)."""
        if self.manager.device.type != "cpu":
            return False
        try:
            self._np_plan = self._np_plan or self._make_numpy_plan()
        except TypeError:
            return False
        return True

    def _make_numpy_plan(self) -> tuple[list, list]:
        """:meth:`_make_plan`'s views as numpy arrays sharing their memory (CPU managers only)."""
        policy, critic = self._plan = self._plan or self._make_plan()
        np_policy = [
            (
                None if ring is None else ring.clock,
                None if ring is None else ring.depth,
                None if hist_src is None else hist_src.numpy(),
                None if src is None else src.numpy(),
                slice(start, start + width),
                shape,
            )
            for ring, hist_src, src, start, width, shape in policy
        ]
        np_critic = [(src.numpy(), slice(start, start + width)) for src, start, width in critic]
        return np_policy, np_critic


def _box(lows: list[np.ndarray], highs: list[np.ndarray]) -> gym.spaces.Box:
    """A float32 Box holding every float32 value in the float64 bounds (rounded outward)."""
    lo = np.concatenate(lows) if lows else np.zeros(0)
    hi = np.concatenate(highs) if highs else np.zeros(0)
    lo32, hi32 = lo.astype(np.float32), hi.astype(np.float32)
    lo32 = np.where(lo32 > lo, np.nextafter(lo32, np.float32(-np.inf)), lo32)
    hi32 = np.where(hi32 < hi, np.nextafter(hi32, np.float32(np.inf)), hi32)
    return gym.spaces.Box(lo32, hi32, dtype=np.float32)
