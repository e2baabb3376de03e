"""``ActionLatency``: the actuator half of the control loop (docs/action_latency.md).

The action the inner env applies at step ``t`` of an episode is the action the agent chose at step
``t - shift``, with ``shift`` drawn exactly like a sensor's delay (docs/pipeline.md, "Delay and jitter"):
``D = round(delay / dt)``, ``shift = D + floor(j / dt + u)`` with ``j ~ U[0, jitter)`` and ``u ~ U[0, 1)``
drawn per env per step, and never older than the action applied at the previous step of that env
(monotone). ``delay`` and ``jitter`` may be numbers or :class:`~sensorgym.Distribution` objects resampled
per env at every reset of that env (like a sensor's randomized options). Queued actions never cross an
episode boundary: until an episode has produced the action a shift asks for, the env receives
``initial_action``.

What is still in flight is state the critic may read; every ``reset``/``step`` info carries, per env:

* ``info["action_in_flight"]`` ``(B, S, *action_shape)`` (``S = max_shift``): the actions chosen but not yet
  applied, newest first, followed by the action applied last (repeated). So the action the env applies
  at the next step is the new action itself (shift 0) or ``action_in_flight[:, shift - 1]``. Right after a
  reset every slot holds the initial action (``"zero"`` and ``"first"``: the zero action).
* ``info["action_applied"]`` ``(B, *action_shape)``: the action the env applied at this step (the initial
  action right after a reset).
* ``info["action_latency"]`` ``(B, 2)`` float32: this episode's delay ``D * dt`` and jitter (seconds).

In ``SAME_STEP`` mode ``info["final_info"]`` carries the same entries as they were at the terminal step.
Composed with :class:`~sensorgym.wrappers.SensorObservation`, :meth:`ActionLatency.critic_sensors` gives
sensors that read these entries, so the critic gets them as ground truth in ``"critic"``.

Example:
    >>> import gymnasium as gym, numpy as np, sensorgym as sg
    >>> from sensorgym.wrappers import ActionLatency, SensorObservation
    >>> envs = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    >>> lat = ActionLatency(envs, delay=0.1, jitter=sg.Uniform(0.0, 0.05), seed=0)  # dt = 0.05 s
    >>> lat.max_shift
    3
    >>> obs, info = lat.reset(seed=0)
    >>> obs, r, term, trunc, info = lat.step(np.full((2, 1), 1.5, np.float32))
    >>> info["action_applied"].tolist()   # still the initial (zero) action: the delay is 2 steps
    [[0.0], [0.0]]
    >>> info["action_in_flight"].shape
    (2, 3, 1)
    >>> env = SensorObservation(lat, {"angle": sg.StateSensorOptions(key="obs", index=[0, 1]),
    ...                               **lat.critic_sensors()}, policy=["angle"], seed=0)
    >>> obs, info = env.reset(seed=0)
    >>> obs["policy"].shape, obs["critic"].shape   # critic: angle GT (2) + in flight (3) + env obs (3)
    ((2, 2), (2, 8))
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from ..core.delay_line import (  # noqa: F401 - JITTER_CEIL_TOLERANCE: re-exported, the one law's tolerance
    FAR,
    JITTER_CEIL_TOLERANCE,
    DelayLine,
    DelaySteps,
    delay_line_bytes,
    device_memory,
    human_bytes,
)
from ..core.metadata import STEP
from ..core.options import bounds_of, check_seconds, option_error
from ..core.parameters import delay_steps, jitter_extra_steps
from ..core.randomization import Distribution
from ..core.ring import Clock
from ..core.rng import BatchRandom, RandomSource
from ..core.rows import folded_seed
from ..core.values import as_int
from ..sensors.state import StateSensorOptions
from .common import autoreset_mode_of, infer_dt
from .vector import _is_torch

__all__ = ["APPLIED_KEY", "IN_FLIGHT_KEY", "LATENCY_KEY", "ActionLatency"]

#: info key of the actions in flight, ``(B, max_shift, *action_shape)``, newest first
IN_FLIGHT_KEY = "action_in_flight"
#: info key of the action the env applied at this step, ``(B, *action_shape)``
APPLIED_KEY = "action_applied"
#: info key of this episode's ``[delay, jitter]`` in seconds, ``(B, 2)`` float32
LATENCY_KEY = "action_latency"

_STREAM_TAG = 0x41435445  # separates the latency stream from a SensorObservation seeded with the same int
_ARRAY_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def _stream_seed(seed: int) -> int:
    """The generator seed of the latency stream for a user seed (not the seed itself, so a
    ``SensorObservation`` given the same seed draws independent numbers)."""
    return int(np.random.SeedSequence([seed, _STREAM_TAG]).generate_state(1, np.uint64)[0])


def _check_seed(seed: Any, where: str) -> int | None:
    if seed is None:
        return None
    value = as_int(seed)
    if value is None or value < 0:
        raise (TypeError if value is None else ValueError)(
            f"ActionLatency.{where}={seed!r} is invalid: expected a non-negative int or None. "
            "Fix: pass e.g. seed=0."
        )
    return value


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


class ActionLatency(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Delay the actions of any vector env by ``delay`` (+ ``jitter``) seconds, per env
    (docs/action_latency.md).

    Args:
        env: any ``gymnasium.vector.VectorEnv`` (Sync, Async or natively batched, numpy or torch; all three
            autoreset modes) with a ``Box``, ``Discrete``, ``MultiDiscrete`` or ``MultiBinary`` action space.
        delay: seconds; ``D = round(delay / dt)`` steps (a warning when not a multiple of ``dt``). A number or
            a :class:`~sensorgym.Distribution` resampled per env at every reset of that env.
        jitter: extra random delay in seconds, ``0 <= jitter <= delay`` (a distribution: its upper bound at
            most that of ``delay``; per env the effective jitter is ``min(jitter, delay)``). Each step each
            env adds ``floor(j / dt + u)`` steps, ``j ~ U[0, jitter)``, ``u ~ U[0, 1)``; an applied action
            is never older than the previous one of that env.
        dt: control step in seconds; inferred from the env like ``SensorObservation`` does when None.
        initial_action: what an env applies before its episode has produced the action a shift asks for:
            ``"zero"`` (zeros clipped into the action space), ``"first"`` (the first action of the episode),
            or an array of one action's shape inside the action space.
        seed: seed of the latency's random stream (reseeded by ``reset(seed=...)``; a partial reset folds
            the seed into the stream, so the other envs' jitter never replays); derived from the
            seed, so it differs from the stream of a ``SensorObservation`` given the same number.

    An episode's step 0 is the first action after its reset observation; in ``NEXT_STEP`` mode the
    action passed with the autoreset call belongs to no episode and reaches the env unchanged (the env
    ignores it). Actions are returned to the inner env as the caller passed them: numpy arrays of the action
    space's dtype, or torch tensors on the caller's device. The step is batched (no per-env Python). See
    the module docstring for the info entries and a runnable example; :meth:`state_dict` /
    :meth:`load_state_dict` continue bit-identically.
    """

    def __init__(
        self,
        env: VectorEnv,
        delay: float | Distribution = 0.0,
        jitter: float | Distribution = 0.0,
        *,
        dt: float | None = None,
        initial_action: str | np.ndarray | torch.Tensor = "zero",
        seed: int | None = None,
    ) -> None:
        gym.utils.RecordConstructorArgs.__init__(
            self, delay=delay, jitter=jitter, dt=dt, initial_action=initial_action, seed=seed
        )
        if not isinstance(env, VectorEnv):
            raise TypeError(
                f"ActionLatency wraps a gymnasium VectorEnv, got {type(env).__name__}. Fix: use "
                "gym.make_vec(...) (or gym.vector.SyncVectorEnv) around the env."
            )
        VectorWrapper.__init__(self, env)
        space = env.single_action_space
        if not isinstance(space, _ARRAY_SPACES):
            raise TypeError(
                f"ActionLatency: action space {space} is not supported; it delays Box, Discrete, "
                "MultiDiscrete and MultiBinary actions. Fix: map the actions of the sub-envs to one Box with "
                "a gymnasium ActionWrapper, then wrap the vector env."
            )
        self.delay = _check_time("delay", delay)
        self.jitter = _check_time("jitter", jitter)
        delay_max, jitter_max = bounds_of(self.delay)[1], bounds_of(self.jitter)[1]
        if jitter_max > delay_max + 1e-12:
            raise option_error(
                "ActionLatency",
                "jitter",
                jitter,
                f"jitter is extra delay on top of `delay` and must satisfy 0 <= jitter <= delay ({delay!r})",
                f"lower jitter to at most {delay_max:g} or raise delay",
            )
        self.dt = infer_dt(env, dt)
        self.device = torch.device(getattr(env.unwrapped, "device", None) or "cpu")
        self.action_shape = tuple(space.shape)
        self._np_dtype = np.dtype(space.dtype)
        if not isinstance(self.delay, Distribution):
            steps = self.delay / self.dt
            if abs(steps - round(steps)) > 1e-6:
                rounded = delay_steps(self.delay, self.dt)
                warnings.warn(
                    f"ActionLatency: delay={self.delay:g} s is not a multiple of dt={self.dt:g} s; it is "
                    f"rounded to {rounded} step(s) = {rounded * self.dt:g} s.",
                    stacklevel=2,
                )
        self.autoreset_mode = autoreset_mode_of(env)
        #: the deepest shift any env can reach: the width of ``info["action_in_flight"]``
        self.max_shift = delay_steps(delay_max, self.dt) + jitter_extra_steps(
            min(jitter_max, delay_max), self.dt
        )
        self.has_jitter = jitter_max > 0
        self._check_memory(delay, jitter, jitter_max > delay_max / 2)
        self._dtype = torch.from_numpy(np.zeros(0, self._np_dtype)).dtype
        self.initial_action = self._check_initial(initial_action, space)
        seed = _check_seed(seed, "seed")
        self._random: RandomSource = BatchRandom(self.device, None if seed is None else _stream_seed(seed))

        num_envs, device = self.num_envs, self.device
        self._col = (num_envs,) + (1,) * len(self.action_shape)  # a (B,) mask broadcast over one action
        zero = torch.from_numpy(_zero_action(space)).to(device)
        init = (
            zero if isinstance(self.initial_action, str) else torch.from_numpy(self.initial_action).to(device)
        )
        self._init = init.expand(num_envs, *self.action_shape).clone()  # what padding shows (not for "first")
        self._clock = Clock()  # global step count: the ring slot of this step's chosen actions
        self._build_queue()
        self._ep_t = torch.zeros(num_envs, dtype=torch.long, device=device)  # episode step of the next action
        self._first = self._init.clone()  # the episode's first action ("first")
        self._applied = self._init.clone()
        self._autoreset = torch.zeros(num_envs, dtype=torch.bool, device=device)
        float64 = dict(dtype=torch.float64, device=device)
        self._delay_s = torch.full(
            (num_envs,), 0.0 if isinstance(self.delay, Distribution) else self.delay, **float64
        )
        self._jitter_s = torch.full(
            (num_envs,), 0.0 if isinstance(self.jitter, Distribution) else self.jitter, **float64
        )
        self._scratch = torch.zeros(num_envs, **float64)
        self._refresh()
        self._torch_env: bool | None = None  # learnt from the first reset observation
        self._on_host = self.device.type == "cpu"
        self._pad_first = isinstance(self.initial_action, str) and self.initial_action == "first"
        self._slots = torch.arange(1, self.max_shift + 1, device=device)  # in-flight slot k: k + 1 steps back
        self._k = torch.arange(self.max_shift, device=device)

    # The queue is the sensors' delay line (core/delay_line.py): one delayed stream per env whose snapshots
    # are the chosen actions; it draws the jitter, applies the monotone rule and gathers, by the one law.
    #: attributes that are the delay line or views of its buffers: made again, never pickled (pickle stores
    #: each view as its own copy, which would silently stop sharing memory with the delay line)
    _QUEUE_VIEWS = (
        "_steps", "_queued", "_line", "_ring", "_queued_action", "_prev", "_draw",
        "_delay_steps", "_jitter_steps", "_jitter_ceil",
    )  # fmt: skip

    def _build_queue(self) -> None:
        b, shape, depth = self.num_envs, self.action_shape, self.max_shift + 1
        self._steps = DelaySteps(b, 1, self.device, self.has_jitter)  # fixed_shift None: always sampled
        self._queued = torch.zeros(b, math.prod(shape), dtype=self._dtype, device=self.device)
        self._line = DelayLine(
            [self._queued.shape[1]], self._steps, self._queued, depth, self._random, self._clock
        )
        self._ring = self._line.ring.buffer.view(depth, b, *shape)  # slot clock % depth: that step's actions
        self._queued_action = self._queued.view(b, *shape)  # the action chosen `shift` steps ago, per env
        self._prev = self._line.prev_shift[:, 0]  # last effective shift
        self._draw = self._line.draw_target  # (2, B): this step's jitter uniforms
        # per env: D, the effective jitter in steps and its ceiling
        self._delay_steps, self._jitter_steps, self._jitter_ceil = (
            t[:, 0] for t in (self._steps.delay_steps, self._steps.jitter_steps_f32, self._steps.jitter_ceil)
        )

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in self._QUEUE_VIEWS}
        state["_queue_state"] = (self._ring.clone(), self._prev.clone())
        return state

    def __deepcopy__(self, memo: dict) -> ActionLatency:
        """``copy.deepcopy`` (through :meth:`__getstate__`); also over a ``gym.make_vec`` env of Gymnasium
        < 1.4, whose consumed ``env_fns`` generator cannot be copied."""
        from .checkpoint import picklable_env_fns

        new = object.__new__(type(self))
        memo[id(self)] = new
        with picklable_env_fns(self.env):
            new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return new

    def __setstate__(self, state: dict) -> None:
        ring, prev = state.pop("_queue_state")
        self.__dict__.update(state)
        self._build_queue()
        self._ring.copy_(ring)
        self._prev.copy_(prev)
        self._refresh()

    @property
    def _random(self) -> RandomSource:
        """The latency's random stream; the delay line draws its jitter from the same one."""
        return self.__dict__["_stream"]

    @_random.setter
    def _random(self, source: RandomSource) -> None:
        self.__dict__["_stream"] = source
        line = self.__dict__.get("_line")
        if line is not None:
            line.random = source

    # -- validation ------------------------------------------------------------------------------------
    def _check_memory(self, delay: Any, jitter: Any, by_jitter: bool) -> None:
        """Refuse, before allocating, an action queue larger than the device's memory (a delay given in
        steps or milliseconds), naming the option instead of ending in an allocator error."""
        width = self.num_envs * math.prod(self.action_shape) * self._np_dtype.itemsize
        depth = self.max_shift + 1
        need = delay_line_bytes(depth, 1, width, torch.uint8)
        limit = device_memory(self.device)
        if limit is None or need <= limit:
            return
        name, value = ("jitter", jitter) if by_jitter else ("delay", delay)
        raise option_error(
            "ActionLatency",
            name,
            value,
            f"at dt={self.dt:g} s it needs an action queue of {depth:,} steps: about {human_bytes(need)} "
            f"({need:,} bytes), more than the {human_bytes(limit)} of memory on {self.device}",
            f"give the {name} in seconds (e.g. {name}=0.04), not in steps or milliseconds, or lower it",
        )

    def _check_initial(self, value: Any, space: gym.Space) -> str | np.ndarray:
        if isinstance(value, str):
            if value not in ("zero", "first"):
                raise option_error(
                    "ActionLatency",
                    "initial_action",
                    value,
                    'it must be "zero", "first" or an array of one action\'s shape',
                    f'use initial_action="zero" or an array of shape {self.action_shape}',
                )
            return value
        if torch.is_tensor(value):
            value = value.detach().cpu().numpy()
        if not isinstance(value, (np.ndarray, list, tuple, int, float, np.number)) or isinstance(value, bool):
            raise TypeError(
                f'ActionLatency.initial_action={value!r} is invalid: expected "zero", "first" or an array '
                f"of shape {self.action_shape}. Fix: pass e.g. initial_action=np.zeros({self.action_shape})."
            )
        arr = np.asarray(value)
        if arr.shape != self.action_shape:
            raise option_error(
                "ActionLatency",
                "initial_action",
                value,
                f"its shape {arr.shape} is not one action's shape {self.action_shape}",
                f"pass an array of shape {self.action_shape}",
            )
        cast = arr.astype(self._np_dtype)
        lossy = self._np_dtype.kind in "iub" and not np.array_equal(cast, arr)
        if lossy or not space.contains(cast):
            raise option_error(
                "ActionLatency",
                "initial_action",
                value,
                f"it is not an action of the action space {space}",
                'clip it into the action space (or pass initial_action="zero")',
            )
        return cast

    def _mask(self, mask: Any) -> torch.Tensor:
        mask_tensor = mask if torch.is_tensor(mask) else torch.from_numpy(np.array(mask, copy=True))
        if mask_tensor.dtype != torch.bool or tuple(mask_tensor.shape) != (self.num_envs,):
            raise ValueError(
                "ActionLatency.reset: options['reset_mask'] must be a bool array of shape "
                f"({self.num_envs},), got shape {tuple(mask_tensor.shape)} dtype {mask_tensor.dtype}. Fix: "
                "pass e.g. options={'reset_mask': terminations | truncations}."
            )
        return mask_tensor.to(self.device)

    def _to_ring(self, actions: Any) -> torch.Tensor:
        if torch.is_tensor(actions):
            chosen = actions.detach().to(device=self.device, dtype=self._dtype)
        else:
            try:
                arr = np.array(actions, dtype=self._np_dtype, copy=True)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"ActionLatency.step: actions of type {type(actions).__name__} cannot be read as a "
                    f"{self._np_dtype} array ({e}). Fix: pass a numpy array or torch tensor of shape "
                    f"{(self.num_envs, *self.action_shape)}."
                ) from None
            chosen = torch.from_numpy(arr).to(self.device)
        if tuple(chosen.shape) != (self.num_envs, *self.action_shape):
            raise ValueError(
                f"ActionLatency.step: actions have shape {tuple(chosen.shape)}, expected "
                f"{(self.num_envs, *self.action_shape)} (num_envs, *action_shape). Fix: pass one action "
                "per env."
            )
        return chosen

    # -- the latency law -------------------------------------------------------------------------------
    def _refresh(self) -> None:
        """Per-env steps from the per-env seconds (the delay line's law: ``D`` half to even, effective
        jitter, its ceiling), and the ``[delay, jitter]`` seconds the info reports."""
        self._steps.set_seconds(self._delay_s, self._jitter_s, self.dt)
        jitter = torch.minimum(self._jitter_s, self._delay_s)
        delay = self._steps.delay_steps[:, 0].to(torch.float64) * self.dt
        self._latency = torch.stack([delay, jitter], 1).float()

    def _resample(self, rows: torch.Tensor) -> None:
        changed = False
        for name, target in (("delay", self._delay_s), ("jitter", self._jitter_s)):
            dist = getattr(self, name)
            if isinstance(dist, Distribution):
                self._random.sample_(dist, self._scratch, rows, 0)
                torch.where(rows, self._scratch, target, out=target)
                changed = True
        if changed:
            self._refresh()

    def _reset_rows(self, rows: torch.Tensor) -> None:
        """Start a new episode in ``rows``: empty queue, new delay/jitter, the initial action applied.

        On the host an empty mask is skipped (checking it costs nothing there; the random stream then
        depends only on which envs reset). On an accelerator the mask is applied as is: no device sync."""
        if self._on_host and not bool(rows.any()):
            return
        self._resample(rows)
        self._ep_t.masked_fill_(rows, 0)
        self._prev.masked_fill_(rows, FAR)  # no previous action: the monotone bound never binds
        self._applied = torch.where(rows.view(self._col), self._init, self._applied)

    def _shift(self) -> torch.Tensor:
        """The effective shift of every env's last applied action (steps; a new tensor)."""
        return self._prev.clone()

    def _in_flight(self) -> torch.Tensor:
        """``(B, S, *A)``: chosen, not yet applied actions newest first, then the last applied action."""
        slots = (self._clock.t - self._slots) % (self.max_shift + 1)
        window = self._ring.index_select(0, slots).transpose(0, 1)  # (B, S, *A)
        pending = torch.minimum(self._prev, self._ep_t)  # how many chosen actions are not applied yet
        keep = (self._k[None, :] < pending[:, None]).view(*window.shape[:2], *(1,) * len(self.action_shape))
        return torch.where(keep, window, self._applied[:, None])

    def _entries(self) -> dict[str, Any]:
        out = {
            IN_FLIGHT_KEY: self._in_flight(),
            APPLIED_KEY: self._applied.clone(),
            LATENCY_KEY: self._latency.clone(),
        }
        if self._torch_env:
            return out
        return {k: v.cpu().numpy() for k, v in out.items()}

    # -- gymnasium API -----------------------------------------------------------------------------------
    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        rows = None
        if options and "reset_mask" in options:
            rows = self._mask(options["reset_mask"])  # the inner env pops it from `options`
        first = seed[0] if isinstance(seed, (list, tuple)) and seed else seed
        first = _check_seed(first, "reset(seed)")
        obs, info = self.env.reset(seed=seed, options=options)
        self._torch_env = _is_torch(obs)
        if first is not None:
            if rows is None:
                self._random.seed(_stream_seed(first))
            else:
                # Gymnasium seeds only the masked sub-envs; reseeding the one jitter stream whole would
                # replay the other envs' jitter: the seed is folded into the stream instead
                reset = torch.nonzero(rows.cpu()).flatten().tolist()
                self._random.seed(folded_seed([_stream_seed(first)], reset, self._random.get_state()))
        if rows is None:
            rows = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._reset_rows(rows)
        self._autoreset &= ~rows
        return obs, {**info, **self._entries()}

    def step(self, actions: Any):
        if self._torch_env is None:
            raise RuntimeError("ActionLatency.step() before reset(). Fix: call reset() first.")
        chosen = self._to_ring(actions)
        self._ring[self._clock.t % (self.max_shift + 1)] = chosen
        if self._pad_first:  # the episode's first action pads its start
            self._first = torch.where((self._ep_t == 0).view(self._col), chosen, self._first)
        # the delay line: this step's shift D + floor(j/dt + u), never older than the previous action
        # (it becomes self._prev, in place), and the action chosen that many steps ago
        self._line.sample_delay(STEP)
        padded = (self._ep_t - self._prev) < 0  # before the episode's first action: the initial one
        fill = self._first if self._pad_first else self._init
        applied = torch.where(padded.view(self._col), fill, self._queued_action)
        self._ep_t = self._ep_t + 1
        self._clock.tick()
        self._applied = applied
        sent = applied
        restart = self._autoreset if self.autoreset_mode is AutoresetMode.NEXT_STEP else None
        if restart is not None:
            # The autoreset call: the action belongs to no episode and reaches the env unchanged.
            sent = torch.where(restart.view(self._col), chosen, applied)
            self._reset_rows(restart)
        obs, rewards, terminations, truncations, info = self.env.step(self._out(sent, actions))
        done = self._done(terminations, truncations)
        info = dict(info)
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:
            self._autoreset = done
        elif self.autoreset_mode is AutoresetMode.SAME_STEP:
            terminal = self._entries()
            self._reset_rows(done)
            final_info = info.get("final_info")
            if isinstance(final_info, Mapping):
                info["final_info"] = {**final_info, **terminal}
            elif final_info is None and bool(done.any()):
                info["final_info"] = terminal
        return obs, rewards, terminations, truncations, {**info, **self._entries()}

    def _done(self, terminations: Any, truncations: Any) -> torch.Tensor:
        done = terminations | truncations
        if torch.is_tensor(done):
            return done.to(device=self.device, dtype=torch.bool)
        return torch.from_numpy(np.array(done, dtype=bool, copy=True)).to(self.device)

    def _out(self, sent: torch.Tensor, actions: Any) -> Any:
        """The actions for the inner env, as the caller passed them (a new array/tensor)."""
        if torch.is_tensor(actions):
            return sent.to(actions.device, copy=True)
        return sent.cpu().numpy().copy()

    # -- composition with SensorObservation ---------------------------------------------------------------
    def critic_sensors(
        self, *, in_flight: bool = True, applied: bool = False, latency: bool = False
    ) -> dict[str, StateSensorOptions]:
        """Sensors reading this wrapper's info entries, named by their info keys, for a
        :class:`~sensorgym.wrappers.SensorObservation` wrapped around it: put them in its ``sensors``
        and leave them out of ``policy=[...]``, and their ground truth is appended to ``"critic"``.

        Example:
            >>> import gymnasium as gym
            >>> from sensorgym.wrappers import ActionLatency
            >>> lat = ActionLatency(gym.make_vec("Pendulum-v1", 2), delay=0.1)
            >>> {k: v.shape for k, v in lat.critic_sensors(latency=True).items()}
            {'action_in_flight': (2, 1), 'action_latency': (2,)}
        """
        out: dict[str, StateSensorOptions] = {}
        if in_flight:
            if self.max_shift == 0:
                raise ValueError(
                    "ActionLatency.critic_sensors(in_flight=True): with delay=0 no action is ever in flight "
                    "(max_shift is 0). Fix: pass in_flight=False, or give the wrapper a delay > 0."
                )
            out[IN_FLIGHT_KEY] = StateSensorOptions(
                key=IN_FLIGHT_KEY, shape=(self.max_shift, *self.action_shape)
            )
        if applied:
            out[APPLIED_KEY] = StateSensorOptions(key=APPLIED_KEY, shape=self.action_shape or (1,))
        if latency:
            out[LATENCY_KEY] = StateSensorOptions(key=LATENCY_KEY, shape=(2,))
        return out

    # -- persistence -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically: the action queue, the per-env episode clocks,
        monotone bounds, first/applied actions, the sampled delay/jitter, the autoreset mask and the RNG."""
        return {
            "version": 2,
            "options": self.checkpoint_options(),
            "num_envs": self.num_envs,
            "dt": self.dt,
            "max_shift": self.max_shift,
            "action_shape": self.action_shape,
            "action_dtype": str(self._np_dtype),
            "clock": self._clock.t,
            "ring": self._ring.clone(),
            "ep_t": self._ep_t.clone(),
            "prev": self._prev.clone(),
            "first": self._first.clone(),
            "applied": self._applied.clone(),
            "autoreset": self._autoreset.clone(),
            "delay_s": self._delay_s.clone(),
            "jitter_s": self._jitter_s.clone(),
            "torch_env": self._torch_env,
            "random": self._random.get_state(),
        }

    def checkpoint_options(self) -> dict[str, str]:
        """The options a checkpoint must have been saved with to load here, each as its exact ``repr``
        (``seed`` is not among them: the checkpoint's random state replaces it)."""
        init = self.initial_action
        return {
            "delay": repr(self.delay),
            "jitter": repr(self.jitter),
            "dt": repr(self.dt),
            "initial_action": repr(init) if isinstance(init, str) else f"{init.tolist()!r} ({init.dtype})",
            "autoreset_mode": repr(self.autoreset_mode.value),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` into a wrapper built with the same env shape and options; a checkpoint
        saved with any other option (``delay``, ``jitter``, ``dt``, ``initial_action``, the env's autoreset
        mode) is refused with a ``ValueError`` naming it. Checkpoints of format version 1 (before the
        options were saved) load with a warning: their options cannot be checked."""
        version = state.get("version") if isinstance(state, Mapping) else None
        if version not in (1, 2):
            raise ValueError(
                "ActionLatency.load_state_dict: not an ActionLatency state_dict (version 2). Fix: pass what "
                "ActionLatency.state_dict() returned."
            )
        mine = {
            "num_envs": self.num_envs,
            "dt": self.dt,
            "max_shift": self.max_shift,
            "action_shape": self.action_shape,
            "action_dtype": str(self._np_dtype),
        }
        for field, value in mine.items():
            theirs = state[field]
            if (tuple(theirs) if field == "action_shape" else theirs) != value:
                raise ValueError(
                    f"ActionLatency.load_state_dict: the checkpoint has {field}={theirs!r}, this wrapper "
                    f"{value!r}. Fix: build the wrapper with the same env and delay/jitter bounds."
                )
        if version == 1:
            warnings.warn(
                "ActionLatency.load_state_dict: a checkpoint of format version 1 does not record the "
                "wrapper's options (delay, jitter, initial_action); they are not checked. Save it again to "
                "have them checked.",
                stacklevel=2,
            )
        else:
            saved, options = state["options"], self.checkpoint_options()
            for field in sorted(set(saved) | set(options)):
                theirs, value = saved.get(field, "<absent>"), options.get(field, "<absent>")
                if theirs != value:
                    raise ValueError(
                        f"ActionLatency.load_state_dict: option {field!r} differs: the checkpoint was saved "
                        f"with {field}={theirs}, this wrapper has {field}={value}. Fix: build the wrapper "
                        "with the options of the one that saved the checkpoint."
                    )
        dev = self.device
        self._clock.t = int(state["clock"])
        self._ring.copy_(state["ring"])  # in place: the delay line reads these buffers
        self._ep_t = state["ep_t"].to(dev, copy=True)
        self._prev.copy_(state["prev"])
        self._first = state["first"].to(dev, copy=True)
        self._applied = state["applied"].to(dev, copy=True)
        self._autoreset = state["autoreset"].to(dev, copy=True)
        self._delay_s.copy_(state["delay_s"])
        self._jitter_s.copy_(state["jitter_s"])
        self._refresh()
        self._torch_env = state["torch_env"]
        self._random.set_state(state["random"])
