"""The state of :class:`~sensorgym.wrappers.ActionLatency`, by responsibility (docs/action_latency.md):

* :class:`ActionLatencyConfig`: the wrapper's options as checked against its env, and what follows from them
  alone (the action's shape and dtype, the queue's depth, the autoreset mode); fixed once built;
* :class:`ActionQueue`: the actions in flight and the per-env bookkeeping the latency law reads (the
  episode step of the next action, the monotone bound, the first and the last applied action).

The wrapper keeps what is neither: the random stream, the per-env delay and jitter seconds it resamples at
each reset, and the autoreset mask.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from ..core.delay_law import delay_steps, jitter_extra_steps
from ..core.delay_line import FAR, DelayLine, DelaySteps, delay_line_bytes, device_memory, human_bytes
from ..core.metadata import STEP
from ..core.options import bounds_of, check_seconds, option_error
from ..core.randomization import Distribution
from ..core.ring import Clock
from ..core.rng import RandomSource
from .common import autoreset_mode_of, infer_dt

__all__ = ["ActionLatencyConfig", "ActionQueue", "upgrade_flat_state"]

_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def _check_time(name: str, value: Any) -> float | Distribution:
    """A delay/jitter option: seconds >= 0 or a bounded non-negative distribution (the sensors' check)."""
    return check_seconds("ActionLatency", name, value, " so the action queue can be sized")


def _zero_action(space: gym.Space) -> np.ndarray:
    """Zeros clipped into an array action space."""
    if isinstance(space, gym.spaces.Box):
        return np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
    if isinstance(space, gym.spaces.Discrete):
        return np.asarray(np.clip(0, space.start, space.start + space.n - 1), dtype=space.dtype)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.clip(np.zeros(space.shape), space.start, space.start + space.nvec - 1).astype(space.dtype)
    return np.zeros(space.shape, dtype=space.dtype)  # MultiBinary


def _check_memory(width: int, depth: int, device: torch.device, dt: float, name: str, value: Any) -> None:
    """Refuse, before allocating, an action queue of ``depth`` slots of ``width`` bytes larger than the
    device's memory (a delay given in steps or milliseconds), naming the option ``name`` instead of ending
    in an allocator error."""
    need = delay_line_bytes(depth, 1, width, torch.uint8)
    limit = device_memory(device)
    if limit is None or need <= limit:
        return
    raise option_error(
        "ActionLatency",
        name,
        value,
        f"at dt={dt:g} s it needs an action queue of {depth:,} steps: about {human_bytes(need)} "
        f"({need:,} bytes), more than the {human_bytes(limit)} of memory on {device}",
        f"give the {name} in seconds (e.g. {name}=0.04), not in steps or milliseconds, or lower it",
    )


def _check_initial(value: Any, space: gym.Space, shape: tuple[int, ...], dtype: np.dtype) -> str | np.ndarray:
    """The ``initial_action`` option: ``"zero"``, ``"first"`` or one action of ``space`` (in its dtype)."""
    if isinstance(value, str):
        if value not in ("zero", "first"):
            raise option_error(
                "ActionLatency",
                "initial_action",
                value,
                'it must be "zero", "first" or an array of one action\'s shape',
                f'use initial_action="zero" or an array of shape {shape}',
            )
        return value
    if torch.is_tensor(value):
        value = value.detach().cpu().numpy()
    if not isinstance(value, (np.ndarray, list, tuple, int, float, np.number)) or isinstance(value, bool):
        raise TypeError(
            f'ActionLatency.initial_action={value!r} is invalid: expected "zero", "first" or an array '
            f"of shape {shape}. Fix: pass e.g. initial_action=np.zeros({shape})."
        )
    arr = np.asarray(value)
    if arr.shape != shape:
        raise option_error(
            "ActionLatency",
            "initial_action",
            value,
            f"its shape {arr.shape} is not one action's shape {shape}",
            f"pass an array of shape {shape}",
        )
    cast = arr.astype(dtype)
    lossy = dtype.kind in "iub" and not np.array_equal(cast, arr)
    if lossy or not space.contains(cast):
        raise option_error(
            "ActionLatency",
            "initial_action",
            value,
            f"it is not an action of the action space {space}",
            'clip it into the action space (or pass initial_action="zero")',
        )
    return cast


@dataclass(frozen=True, eq=False)
class ActionLatencyConfig:
    """The resolved, cold configuration of an :class:`~sensorgym.wrappers.ActionLatency`: its options as
    checked (``delay``/``jitter`` in seconds or distributions, ``dt``, ``initial_action``), what it learnt
    from the env (autoreset mode, number of envs, device, one action's shape and dtype) and what follows
    from them alone (``max_shift``, the deepest shift any env can reach; the queue's ``depth``; ``col``, a
    ``(B,)`` mask's shape broadcast over one action). :meth:`resolve` builds it, raising the wrapper's errors.

    Example:
        >>> import gymnasium as gym
        >>> from sensorgym.wrappers._latency_state import ActionLatencyConfig
        >>> envs = gym.make_vec("Pendulum-v1", 2)  # dt = 0.05 s
        >>> cfg = ActionLatencyConfig.resolve(envs, 0.1, 0.05, None, "zero")
        >>> cfg.max_shift, cfg.depth, cfg.col, cfg.batch_shape, cfg.has_jitter
        (3, 4, (2, 1), (2, 1), True)
    """

    delay: float | Distribution
    jitter: float | Distribution
    dt: float
    initial_action: str | np.ndarray
    autoreset_mode: AutoresetMode
    num_envs: int
    device: torch.device
    action_shape: tuple[int, ...]
    np_dtype: np.dtype
    max_shift: int
    has_jitter: bool
    dtype: torch.dtype = field(init=False)  # the action's torch dtype (the queue's)
    depth: int = field(init=False)  # ring slots: max_shift + 1
    col: tuple[int, ...] = field(init=False)  # (B, 1, ...): a (B,) mask broadcast over one action
    batch_shape: tuple[int, ...] = field(init=False)  # (B, *action_shape): one step's actions
    pad_first: bool = field(init=False)  # initial_action == "first"
    on_host: bool = field(init=False)  # the device is the CPU

    def __post_init__(self) -> None:
        derived = {
            "dtype": torch.from_numpy(np.zeros(0, self.np_dtype)).dtype,
            "depth": self.max_shift + 1,
            "col": (self.num_envs,) + (1,) * len(self.action_shape),
            "batch_shape": (self.num_envs, *self.action_shape),
            "pad_first": isinstance(self.initial_action, str) and self.initial_action == "first",
            "on_host": self.device.type == "cpu",
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @classmethod
    def resolve(
        cls, env: VectorEnv, delay: Any, jitter: Any, dt: float | None, initial_action: Any
    ) -> ActionLatencyConfig:
        """Check the constructor's options against ``env`` (the wrapper's errors and its warning for a
        delay off the ``dt`` grid, pointing at the wrapper's caller) and resolve them."""
        space = env.single_action_space
        if not isinstance(space, _ARRAY_SPACES):
            raise TypeError(
                f"ActionLatency: action space {space} is not supported; it delays Box, Discrete, "
                "MultiDiscrete and MultiBinary actions. Fix: map the actions of the sub-envs to one Box with "
                "a gymnasium ActionWrapper, then wrap the vector env."
            )
        delay_s, jitter_s = _check_time("delay", delay), _check_time("jitter", jitter)
        delay_max, jitter_max = bounds_of(delay_s)[1], bounds_of(jitter_s)[1]
        if jitter_max > delay_max + 1e-12:
            raise option_error(
                "ActionLatency",
                "jitter",
                jitter,
                f"jitter is extra delay on top of `delay` and must satisfy 0 <= jitter <= delay ({delay!r})",
                f"lower jitter to at most {delay_max:g} or raise delay",
            )
        dt = infer_dt(env, dt)
        device = torch.device(getattr(env.unwrapped, "device", None) or "cpu")
        shape, np_dtype = tuple(space.shape), np.dtype(space.dtype)
        if not isinstance(delay_s, Distribution):
            steps = delay_s / dt
            if abs(steps - round(steps)) > 1e-6:
                rounded = delay_steps(delay_s, dt)
                warnings.warn(
                    f"ActionLatency: delay={delay_s:g} s is not a multiple of dt={dt:g} s; it is "
                    f"rounded to {rounded} step(s) = {rounded * dt:g} s.",
                    stacklevel=3,  # ActionLatency.__init__'s caller
                )
        autoreset_mode = autoreset_mode_of(env)
        max_shift = delay_steps(delay_max, dt) + jitter_extra_steps(min(jitter_max, delay_max), dt)
        name, value = ("jitter", jitter) if jitter_max > delay_max / 2 else ("delay", delay)
        width = env.num_envs * math.prod(shape) * np_dtype.itemsize
        _check_memory(width, max_shift + 1, device, dt, name, value)
        return cls(
            delay=delay_s,
            jitter=jitter_s,
            dt=dt,
            initial_action=_check_initial(initial_action, space, shape, np_dtype),
            autoreset_mode=autoreset_mode,
            num_envs=env.num_envs,
            device=device,
            action_shape=shape,
            np_dtype=np_dtype,
            max_shift=max_shift,
            has_jitter=jitter_max > 0,
        )

    def initial_actions(self, space: gym.Space) -> torch.Tensor:
        """``(B, *action_shape)`` on the device: what an env applies before its episode has produced the
        action a shift asks for (for ``"first"``: the zero action, until the episode's first action)."""
        if isinstance(self.initial_action, str):
            init = torch.from_numpy(_zero_action(space)).to(self.device)
        else:
            init = torch.from_numpy(self.initial_action).to(self.device)
        return init.expand(self.num_envs, *self.action_shape).clone()


class ActionQueue:
    """The actions in flight of every env and the per-env bookkeeping the latency law reads.

    The queue is the sensors' delay line (core/delay_line.py): one delayed stream per env whose snapshots
    are the chosen actions, in a ring of ``config.depth`` slots (slot ``clock % depth``: that step's
    actions); it draws the jitter from ``random``, applies the monotone rule (``prev``: each env's last
    effective shift, in place) and gathers the action chosen ``shift`` steps ago (``queued_action``). Beside
    it, per env: ``ep_t``, the episode step of the next action, ``first``, the episode's first action
    (``"first"``), and ``applied``, the action applied last. :meth:`set_seconds` sets each env's delay and
    jitter, :meth:`advance` is the step, :meth:`restart` starts new episodes, :meth:`in_flight` is the info
    entry. The delay line and the views of its buffers are made again on unpickling, never pickled: pickle
    stores each view as its own copy, which would silently stop sharing memory with the delay line.

    Example: a 2-step delay
        >>> import gymnasium as gym, torch
        >>> from sensorgym.wrappers._latency_state import ActionQueue, ActionLatencyConfig
        >>> cfg = ActionLatencyConfig.resolve(gym.make_vec("Pendulum-v1", 2), 0.1, 0.0, None, "zero")
        >>> queue = ActionQueue(cfg, torch.zeros(2, 1), random=None)  # no jitter: nothing is drawn
        >>> delay, jitter = torch.full((2,), 0.1, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
        >>> queue.set_seconds(delay, jitter).mul(1000).round().tolist()  # ms per env: D * dt, jitter
        [[100.0, 0.0], [100.0, 0.0]]
        >>> [queue.advance(torch.full((2, 1), float(t)))[0].item() for t in range(1, 5)]
        [0.0, 0.0, 1.0, 2.0]
        >>> queue.in_flight()[0].flatten().tolist()  # chosen, not yet applied, newest first
        [4.0, 3.0]
    """

    _VIEWS = ("line", "ring", "queued_action", "prev")

    def __init__(self, config: ActionLatencyConfig, init: torch.Tensor, random: RandomSource | None) -> None:
        b, device = config.num_envs, config.device
        self.config = config
        self.clock = Clock()  # global step count: the ring slot of this step's chosen actions
        self.init = init  # (B, *A): what padding shows (not for "first")
        self.ep_t = torch.zeros(b, dtype=torch.long, device=device)  # episode step of the next action
        self.first = init.clone()
        self.applied = init.clone()
        self.slots = torch.arange(1, config.max_shift + 1, device=device)  # in-flight slot k: k + 1 back
        self.k = torch.arange(config.max_shift, device=device)
        self.keep_shape = (b, config.max_shift, *config.col[1:])  # a (B, S) mask broadcast over one action
        self.steps = DelaySteps(b, 1, device, config.has_jitter)  # fixed_shift None: always sampled
        self._build(random)

    def _build(self, random: RandomSource | None) -> None:
        cfg = self.config
        b, shape, depth = cfg.num_envs, cfg.action_shape, cfg.depth
        queued = torch.zeros(b, math.prod(shape), dtype=cfg.dtype, device=cfg.device)
        self.line = DelayLine([queued.shape[1]], self.steps, queued, depth, random, self.clock)
        self.ring = self.line.ring.buffer.view(depth, b, *shape)  # slot clock % depth: that step's actions
        self.queued_action = queued.view(b, *shape)  # the action chosen `shift` steps ago, per env
        self.prev = self.line.prev_shift[:, 0]  # last effective shift

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in self._VIEWS}
        state["_line_state"] = (self.ring.clone(), self.prev.clone(), self.line.random)
        return state

    def __setstate__(self, state: dict) -> None:
        ring, prev, random = state.pop("_line_state")
        self.__dict__.update(state)
        self._build(random)
        self.ring.copy_(ring)
        self.prev.copy_(prev)

    def set_seconds(self, delay: torch.Tensor, jitter: torch.Tensor) -> torch.Tensor:
        """Per-env shifts from per-env ``delay`` and ``jitter`` seconds (float64 ``(B,)``; the delay line's
        law: ``D`` half to even, effective jitter, its ceiling); returns the ``(B, 2)`` float32
        ``[D * dt, min(jitter, delay)]`` seconds the info reports."""
        steps, dt = self.steps, self.config.dt
        steps.set_seconds(delay, jitter, dt)
        effective = torch.minimum(jitter, delay)
        return torch.stack([steps.delay_steps[:, 0].to(torch.float64) * dt, effective], 1).float()

    def advance(self, chosen: torch.Tensor) -> torch.Tensor:
        """Queue this step's ``chosen`` actions ``(B, *A)`` and return the actions applied (a new tensor,
        also ``applied``): the chosen action ``D + floor(j/dt + u)`` steps back, never older than the
        previous one, or the initial action before the episode has produced it."""
        cfg = self.config
        col, pad_first, ep_t = cfg.col, cfg.pad_first, self.ep_t
        self.ring[self.clock.t % cfg.depth] = chosen
        if pad_first:  # the episode's first action pads its start
            self.first = torch.where((ep_t == 0).view(col), chosen, self.first)
        # the delay line: this step's shift D + floor(j/dt + u), never older than the previous action
        # (it becomes self.prev, in place), and the action chosen that many steps ago
        self.line.sample_delay(STEP)
        padded = (ep_t - self.prev) < 0  # before the episode's first action: the initial one
        fill = self.first if pad_first else self.init
        applied = torch.where(padded.view(col), fill, self.queued_action)
        self.ep_t = ep_t + 1
        self.clock.tick()
        self.applied = applied
        return applied

    def restart(self, rows: torch.Tensor) -> None:
        """New episodes in ``rows`` (a ``(B,)`` bool mask): empty queue, the initial action applied."""
        self.ep_t.masked_fill_(rows, 0)
        self.prev.masked_fill_(rows, FAR)  # no previous action: the monotone bound never binds
        self.applied = torch.where(rows.view(self.config.col), self.init, self.applied)

    def in_flight(self) -> torch.Tensor:
        """``(B, S, *A)``: chosen, not yet applied actions newest first, then the last applied action."""
        slots = (self.clock.t - self.slots) % self.config.depth
        window = self.ring.index_select(0, slots).transpose(0, 1)  # (B, S, *A)
        pending = torch.minimum(self.prev, self.ep_t)  # how many chosen actions are not applied yet
        keep = (self.k[None, :] < pending[:, None]).view(self.keep_shape)
        return torch.where(keep, window, self.applied[:, None])


#: ActionLatencyConfig field -> the wrapper attribute it was in a flat pickle
_FLAT_CONFIG = {
    "delay": "delay", "jitter": "jitter", "dt": "dt", "initial_action": "initial_action",
    "autoreset_mode": "autoreset_mode", "device": "device", "action_shape": "action_shape",
    "np_dtype": "_np_dtype", "max_shift": "max_shift", "has_jitter": "has_jitter",
}  # fmt: skip
#: flat-pickle attributes that now follow from the config (or the queue) alone
_FLAT_DERIVED = ("_dtype", "_col", "_on_host", "_pad_first", "_slots", "_k")


def upgrade_flat_state(state: dict) -> dict:
    """The pickled state of an ``ActionLatency`` from before its config and queue were components (every
    value one attribute of the wrapper, the queue as ``_queue_state``), in today's layout, so a snapshot
    saved then (``SensorObservation.state_dict(include_envs=True)``) still loads. The caller converts the
    per-env seconds into the queue's steps again (:meth:`ActionQueue.set_seconds`)."""
    s = dict(state)
    ring, prev = s.pop("_queue_state")
    fields = {new: s.pop(old) for new, old in _FLAT_CONFIG.items()}
    config = ActionLatencyConfig(**fields, num_envs=len(s["_init"]))
    for name in _FLAT_DERIVED:
        s.pop(name)
    queue = ActionQueue(config, s.pop("_init"), s["_stream"])
    queue.clock.t = s.pop("_clock").t
    queue.ring.copy_(ring)
    queue.prev.copy_(prev)
    queue.ep_t, queue.first, queue.applied = s.pop("_ep_t"), s.pop("_first"), s.pop("_applied")
    return {**s, "_config": config, "_queue": queue}
