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
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from ..core.manager import SensorManager
from ..core.options import SimpleSensorOptions, bounds_of
from ..core.sensor import Sensor
from ..core.terms import STAGES, TERMS
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
    options = sensor.options
    space = space_at(options.key, obs_space) if isinstance(options, StateSensorOptions) else None
    bounds = entry_bounds(space) if space is not None else None
    if bounds is not None:
        shape = space.shape if space.shape else (1,)
        space_lo, space_hi = (b.reshape(shape) for b in bounds)
        if options.index is not None:
            space_lo, space_hi = space_lo[..., list(options.index)], space_hi[..., list(options.index)]
        if space_lo.size == width:
            lo, hi = space_lo.ravel(), space_hi.ravel()
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        lo, hi = np.maximum(lo, info.min), np.minimum(hi, info.max)
    return lo, hi


def measured_bounds(sensor: Sensor, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Widen GT bounds by what the error terms and the padding can add (per component), each term as its
    record says (:attr:`~sensorgym.core.terms.Term.widen`), in their order: the scale factor multiplies,
    a random term makes the component unbounded, the filter keeps a noise-free value between its inputs,
    the bias adds and the resolution rounds by up to half a step."""
    lo, hi = lo.copy(), hi.copy()
    options = sensor.options
    dtype = type(sensor)._get_cache_dtype()
    same_space = sensor.cache_slice.stop - sensor.cache_slice.start == lo.size
    if isinstance(options, SimpleSensorOptions) and dtype.is_floating_point and same_space:
        comps: dict[str, list[tuple[float, float]]] = {}

        def per_comp(name: str) -> list[tuple[float, float]]:
            if name not in comps:
                value = getattr(options, name, 0.0)
                vals = value if isinstance(value, tuple) else (value,)
                vals = vals * lo.size if len(vals) == 1 else vals
                # a non-numeric setting (a term's `settings`: a replay's path) reads (1, 1) where given
                given = lambda v: (1.0, 1.0) if v is not None else (0.0, 0.0)  # noqa: E731
                comps[name] = [given(v) if name in settings else bounds_of(v) for v in vals]
            return comps[name]

        settings = {f for t in (*TERMS, *STAGES) for f in t.settings}
        terms = [t for t in (*TERMS, *STAGES) if all(hasattr(options, f) for f in (*t.options, *t.settings))]
        for i in range(lo.size):
            lo[i], hi[i] = _component_bounds(terms, float(lo[i]), float(hi[i]), lambda f, i=i: per_comp(f)[i])
    if options.padding_type == "zero":
        lo, hi = np.minimum(lo, 0.0), np.maximum(hi, 0.0)
    return lo, hi


def _component_bounds(terms: list, lo: float, hi: float, option: Any) -> tuple[float, float]:
    """One component's range through the terms. The pipeline computes in float32: each multiply, filter
    step, add, divide, round and multiply may move the reading by an ulp of its operands, so the range is
    widened by a few ulps of the largest of them (the range before the additive terms, and their sizes)."""
    base, sizes, touched = max(abs(lo), abs(hi)), 0.0, False
    for term in terms:
        if term.widen is not None:
            out = term.widen(lo, hi, option)
        else:  # a random term (or a replayed recording): unbounded wherever it can be non-zero
            fields = (*term.options, *term.settings[:1])
            can = any(option(f) != (0.0, 0.0) for f in fields if f not in term.follows)
            out = (-math.inf, math.inf, 0.0) if can else None
        if out is None:
            continue
        lo, hi, size = out
        touched = True
        if size:
            sizes += size
        else:
            base = max(abs(lo), abs(hi))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return -math.inf, math.inf
    slack = 8 * _EPS32 * (base + sizes) if touched else 0.0
    return lo - slack, hi + slack


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
        policy_lo, policy_hi, critic_lo, critic_hi = [], [], [], []
        self._policy_cols = []
        col = 0
        for sensor in self.policy:
            lo, hi = measured_bounds(sensor, *gt_bounds(sensor, env_obs_space))
            count = max(sensor.options.history_length, 1)
            width = lo.size * count
            self._policy_cols.append((sensor, slice(col, col + width), sensor.options.history_length))
            policy_lo.append(np.tile(lo, count))
            policy_hi.append(np.tile(hi, count))
            col += width
        self._policy_age_cols = slice(col, col + len(self.policy_age))
        policy_lo.append(np.zeros(len(self.policy_age)))
        policy_hi.append(np.full(len(self.policy_age), np.inf))
        self._critic_cols = []
        col = 0
        for sensor in self.critic:
            lo, hi = gt_bounds(sensor, env_obs_space)
            self._critic_cols.append((sensor, slice(col, col + lo.size)))
            critic_lo.append(lo)
            critic_hi.append(hi)
            col += lo.size
        self._env_cols = slice(col, col)
        self._flatten: Flattener | None = None
        if self.include_env_obs:
            self._flatten = Flattener(env_obs_space)
            lo, hi = flat_bounds(env_obs_space)
            self._env_cols = slice(col, col + lo.size)
            critic_lo.append(lo)
            critic_hi.append(hi)
            col += lo.size
        self._random_cols = slice(col, col)
        if include_randomization:
            count = len(manager.randomization_names())
            self._random_cols = slice(col, col + count)
            critic_lo.append(np.full(count, -np.inf))
            critic_hi.append(np.full(count, np.inf))
            col += count
        self._critic_age_cols = slice(col, col + len(self.critic_age))
        critic_lo.append(np.zeros(len(self.critic_age)))
        critic_hi.append(np.full(len(self.critic_age), np.inf))
        self.policy_space = _box(policy_lo, policy_hi)
        self.critic_space = _box(critic_lo, critic_hi)
        self.space = gym.spaces.Dict({"policy": self.policy_space, "critic": self.critic_space})
        b = manager.num_envs
        self._shapes = ((b, self.policy_space.shape[0]), (b, self.critic_space.shape[0]))  # of pack_numpy
        self._plan = self._make_plan()
        # numpy views of the plan's sources (policy, critic), made when numpy packing is first asked for,
        # through the manager (`numpy_view`), with the id of the manager's views they belong to: a copied
        # manager has views of its own, so a copied layout makes its sources again (see _sources)
        self._numpy_sources: tuple[int, tuple[list[tuple], list[tuple]]] | None = None

    def _make_plan(self) -> tuple[list[_Copy], list[_Copy]]:
        """The packing plan, built once: the copies that fill ``"policy"`` and the GT part of ``"critic"``.

        Consecutive sensors of one class with adjacent columns (and equal history length and width) are
        merged into one copy: packing then costs a few copies per class, not per sensor and history slot.
        The sources are views of the manager's buffers, which live as long as the manager (loading a
        state copies into them). :meth:`pack` (torch) and :meth:`pack_numpy` (numpy) execute this plan.
        """
        policy: list[_Copy] = []
        for sensor, destination, history_length in self._policy_cols:
            sensor_cls, src = type(sensor), sensor.return_slice
            width = src.stop - src.start
            last = policy[-1] if policy else None
            if (
                last is not None
                and last.sensor_cls is sensor_cls
                and last.history_length == history_length
                and last.width == width
                and last.return_cols.stop == src.start
            ):
                last.merge(src, destination)
            else:
                policy.append(_Copy(sensor_cls, src, destination, history_length, width))
        critic: list[_Copy] = []
        for sensor, destination in self._critic_cols:
            sensor_cls, src = type(sensor), sensor.return_slice
            last = critic[-1] if critic else None
            if last is not None and last.sensor_cls is sensor_cls and last.return_cols.stop == src.start:
                last.merge(src, destination)
            else:
                critic.append(_Copy(sensor_cls, src, destination, 0, src.stop - src.start))
        for copy in policy:
            copy.bind(_sources(self.manager, copy.sensor_cls), ground_truth=False)
        for copy in critic:
            copy.bind(_sources(self.manager, copy.sensor_cls), ground_truth=True)
        return policy, critic

    def pack(self, env_obs: Any) -> dict[str, torch.Tensor]:
        """New float32 tensors ``{"policy": (B, P), "critic": (B, C)}`` from the current readings and
        the env's observation batch ``env_obs`` (flattened into the critic as ``spaces.flatten`` does)."""
        num_envs, device = self.manager.num_envs, self.manager.device
        policy = torch.empty(num_envs, self.policy_space.shape[0], dtype=torch.float32, device=device)
        critic = torch.empty(num_envs, self.critic_space.shape[0], dtype=torch.float32, device=device)
        policy_copies, critic_copies = self._plan
        for copies, out in ((policy_copies, policy), (critic_copies, critic)):
            for copy in copies:
                destination = out[:, copy.destination]
                if copy.history is None:
                    destination.copy_(copy.source)
                else:
                    # (history, B, sensors*width) newest first -> per sensor (B, history, width), flattened
                    slots = copy.source.index_select(0, copy.history.order(copy.history_length))
                    destination.view(copy.blocks(num_envs)).copy_(_per_sensor(slots, copy, num_envs))
        self._fill_rest(env_obs, policy, critic, _same)
        return {"policy": policy, "critic": critic}

    def pack_numpy(self, env_obs: Any) -> dict[str, np.ndarray]:
        """:meth:`pack` for a CPU manager and a numpy env: new float32 arrays, filled through numpy views
        of the sensor buffers by the same plan. The same values as ``pack``; for the small arrays of a few
        sensors a numpy copy costs a fraction of a torch op's dispatch, and this runs once per env step."""
        num_envs = self.manager.num_envs
        policy = np.empty(self._shapes[0], np.float32)
        critic = np.empty(self._shapes[1], np.float32)
        (policy_copies, critic_copies), (policy_sources, critic_sources) = self._plan, self._sources()
        for copies, sources, out in (
            (policy_copies, policy_sources, policy),
            (critic_copies, critic_sources, critic),
        ):
            for copy, (source, newest_first) in zip(copies, sources, strict=True):
                if newest_first is None:
                    out[:, copy.destination] = source
                else:
                    # (history, B, sensors*width) newest first -> per sensor (B, history, width), flattened;
                    # the destination columns viewed as (B, sensors, history, width) (splitting the last,
                    # contiguous axis: always a view) take the permuted slots in one copy
                    slots = source.take(newest_first[copy.history.slot(0)], axis=0)
                    destination = out[:, copy.destination].reshape(copy.blocks(num_envs))
                    np.copyto(destination, _per_sensor(slots, copy, num_envs))
        self._fill_rest(env_obs, policy, critic, torch.Tensor.numpy)
        return {"policy": policy, "critic": critic}

    def _fill_rest(self, env_obs: Any, policy: Any, critic: Any, convert: Any) -> None:
        """The columns after the sensors' copies: the env's observation, the randomized parameters and the
        reading ages (``convert`` turns the manager's tensors into ``policy``'s array type)."""
        if self._flatten is not None:
            self._flatten(env_obs, critic[:, self._env_cols])
        if self.include_randomization:
            critic[:, self._random_cols] = convert(self.manager.read_randomization())
        for sensors, cols, out in (
            (self.policy_age, self._policy_age_cols, policy),
            (self.critic_age, self._critic_age_cols, critic),
        ):
            for i, sensor in enumerate(sensors):
                out[:, cols.start + i] = convert(sensor.read_age())

    def numpy_packable(self) -> bool:
        """Whether :meth:`pack_numpy` can run: a CPU manager whose sensor buffers numpy can view (a
        custom sensor with e.g. a bfloat16 return dtype cannot)."""
        if self.manager.device.type != "cpu":
            return False
        try:
            self._sources()
        except TypeError:
            return False
        return True

    def _sources(self) -> tuple[list[tuple], list[tuple]]:
        """The numpy sources of this manager's buffers (made again for a copied manager's own)."""
        owner = self.manager.views_id()
        if self._numpy_sources is None or self._numpy_sources[0] != owner:
            self._numpy_sources = (owner, self._make_numpy_sources())
        return self._numpy_sources[1]

    def _make_numpy_sources(self) -> tuple[list[tuple], list[tuple]]:
        """Per copy of the plan: its source as a numpy array sharing its memory (CPU managers only), and for
        a copy with history the table ``(depth, history)`` of the ring's slots newest first for each phase
        of its clock (row ``ring.slot(0)``: the slots ``ring.order(history)`` gives the torch executor; a
        numpy row lookup costs less than that torch index)."""

        def numpy_source(copy: _Copy) -> tuple[np.ndarray, np.ndarray | None]:
            view = self.manager.numpy_view(copy.source)
            if view is None:
                raise TypeError(f"numpy cannot view a {copy.source.dtype} buffer")
            if copy.history is None:
                return view, None
            depth = copy.history.depth
            newest_first = (np.arange(depth)[:, None] - np.arange(copy.history_length)[None, :]) % depth
            return view, newest_first

        policy, critic = self._plan
        return [numpy_source(copy) for copy in policy], [numpy_source(copy) for copy in critic]


class _Sources(NamedTuple):
    """What the layout copies from for one sensor class (views of the engine's buffers, return space)."""

    measured: torch.Tensor  #: ``(B, cols)`` the current measured readings
    ground_truth: torch.Tensor  #: ``(B, cols)`` the current ground truth
    #: the ring of the last measured readings (``buffer``: ``(depth, B, cols)``; ``order(n)``: the slots
    #: of the newest ``n``, newest first), None without history
    history: Any


def _sources(manager: SensorManager, sensor_cls: type[Sensor]) -> _Sources:
    """The one place the layout reads the engine's storage of a sensor class."""
    storage = manager.storage(sensor_cls)
    return _Sources(storage.measured.cache, storage.gt.cache, storage.measured.history)


class _Copy:
    """One step of the packing plan: return columns of one sensor class (``n`` merged sensors of
    ``width`` columns each) into output columns, from the current readings or, for the policy of sensors
    with history, from their history ring (``history_length`` newest snapshots, newest first)."""

    def __init__(
        self,
        sensor_cls: type[Sensor],
        return_cols: slice,
        destination: slice,
        history_length: int,
        width: int,
    ) -> None:
        self.sensor_cls = sensor_cls
        self.return_cols = return_cols
        self.destination = destination
        self.history_length = history_length
        self.width = width
        self.sensors = 1
        self.source: torch.Tensor | None = None  # (B, cols), or the ring buffer (depth, B, cols)
        self.history: Any = None  # the ring, for a copy with history

    def merge(self, return_cols: slice, destination: slice) -> None:
        """Extend the copy by the next sensor (adjacent return and output columns)."""
        self.return_cols = slice(self.return_cols.start, return_cols.stop)
        self.destination = slice(self.destination.start, destination.stop)
        self.sensors += 1

    def bind(self, sources: _Sources, *, ground_truth: bool) -> None:
        """Point the copy at its source view."""
        if ground_truth:
            self.source = sources.ground_truth[:, self.return_cols]
        elif self.history_length:
            self.history = sources.history
            self.source = sources.history.buffer[:, :, self.return_cols]
        else:
            self.source = sources.measured[:, self.return_cols]

    def blocks(self, num_envs: int) -> tuple[int, int, int, int]:
        """The output columns as ``(B, sensors, history, width)``."""
        return (num_envs, self.sensors, self.history_length, self.width)


def _same(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _per_sensor(slots: Any, copy: _Copy, num_envs: int) -> Any:
    """History slots ``(history, B, sensors*width)`` (torch or numpy) as ``(B, sensors, history,
    width)``: per sensor, newest first."""
    history, sensors, width = copy.history_length, copy.sensors, copy.width
    slots = slots.reshape(history, num_envs, sensors, width)
    return slots.permute(1, 2, 0, 3) if torch.is_tensor(slots) else slots.transpose(1, 2, 0, 3)


def _box(lows: list[np.ndarray], highs: list[np.ndarray]) -> gym.spaces.Box:
    """A float32 Box holding every float32 value in the float64 bounds (rounded outward)."""
    lo = np.concatenate(lows) if lows else np.zeros(0)
    hi = np.concatenate(highs) if highs else np.zeros(0)
    lo32, hi32 = lo.astype(np.float32), hi.astype(np.float32)
    lo32 = np.where(lo32 > lo, np.nextafter(lo32, np.float32(-np.inf)), lo32)
    hi32 = np.where(hi32 < hi, np.nextafter(hi32, np.float32(np.inf)), hi32)
    return gym.spaces.Box(lo32, hi32, dtype=np.float32)
