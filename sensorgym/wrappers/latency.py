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
    >>> lat.config.max_shift
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
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from ..core.delay_line import JITTER_CEIL_TOLERANCE  # noqa: F401 - re-exported, the one law's tolerance
from ..core.randomization import Distribution
from ..core.rng import BatchRandom, RandomSource
from ..core.rows import folded_seed
from ..core.values import as_int
from ..sensors.state import StateSensorOptions
from ._latency_state import ActionLatencyConfig, ActionQueue, upgrade_flat_state
from ._latency_state import _check_time as _check_time  # re-exported: app/config.py checks [latency] with it
from .vector import _is_torch

__all__ = ["APPLIED_KEY", "IN_FLIGHT_KEY", "LATENCY_KEY", "ActionLatency"]

#: info key of the actions in flight, ``(B, max_shift, *action_shape)``, newest first
IN_FLIGHT_KEY = "action_in_flight"
#: info key of the action the env applied at this step, ``(B, *action_shape)``
APPLIED_KEY = "action_applied"
#: info key of this episode's ``[delay, jitter]`` in seconds, ``(B, 2)`` float32
LATENCY_KEY = "action_latency"

_STREAM_TAG = 0x41435445  # separates the latency stream from a SensorObservation seeded with the same int


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


def _done(terminations: Any, truncations: Any, device: torch.device) -> torch.Tensor:
    done = terminations | truncations
    if torch.is_tensor(done):
        return done.to(device=device, dtype=torch.bool)
    return torch.from_numpy(np.array(done, dtype=bool, copy=True)).to(device)


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
        #: the options as checked and what follows from them alone (an :class:`ActionLatencyConfig`:
        #: ``delay``, ``jitter``, ``dt``, ``initial_action``, ``max_shift``, ``device``, ...), fixed from then
        self.config = cfg = ActionLatencyConfig.resolve(env, delay, jitter, dt, initial_action)
        seed = _check_seed(seed, "seed")
        random: RandomSource = BatchRandom(cfg.device, None if seed is None else _stream_seed(seed))
        # the actions in flight: the delay line (which holds the latency's random stream: it draws the
        # jitter from it, and a reset draws the randomized delays), the episode clocks, the applied actions
        self._queue = ActionQueue(cfg, cfg.initial_actions(env.single_action_space), random)
        num_envs, float64 = cfg.num_envs, dict(dtype=torch.float64, device=cfg.device)
        self._autoreset = torch.zeros(num_envs, dtype=torch.bool, device=cfg.device)
        # this episode's delay and jitter (seconds) per env, resampled at every reset of a distribution
        self._delay_s = torch.full(
            (num_envs,), 0.0 if isinstance(cfg.delay, Distribution) else cfg.delay, **float64
        )
        self._jitter_s = torch.full(
            (num_envs,), 0.0 if isinstance(cfg.jitter, Distribution) else cfg.jitter, **float64
        )
        self._scratch = torch.zeros(num_envs, **float64)
        self._refresh()
        self._torch_env: bool | None = None  # learnt from the first reset observation

    @property
    def dt(self) -> float:
        """The control step in seconds (given or inferred from the env), as every sensorgym wrapper has it
        (``config.dt``: the one forwarding name of the wrapper)."""
        return self.config.dt

    def __deepcopy__(self, memo: dict) -> ActionLatency:
        """``copy.deepcopy`` (the queue makes its delay line again); also over a ``gym.make_vec`` env of
        Gymnasium < 1.4, whose consumed ``env_fns`` generator cannot be copied."""
        from .checkpoint import picklable_env_fns

        new = object.__new__(type(self))
        memo[id(self)] = new
        with picklable_env_fns(self.env):
            new.__setstate__(copy.deepcopy(self.__dict__, memo))
        return new

    def __setstate__(self, state: dict) -> None:
        flat = "_queue_state" in state  # pickled before the config and the queue were components
        self.__dict__.update(upgrade_flat_state(state) if flat else state)
        if flat:
            self._refresh()

    # -- validation ------------------------------------------------------------------------------------
    def _mask(self, mask: Any) -> torch.Tensor:
        mask_tensor = mask if torch.is_tensor(mask) else torch.from_numpy(np.array(mask, copy=True))
        if mask_tensor.dtype != torch.bool or tuple(mask_tensor.shape) != (self.num_envs,):
            raise ValueError(
                "ActionLatency.reset: options['reset_mask'] must be a bool array of shape "
                f"({self.num_envs},), got shape {tuple(mask_tensor.shape)} dtype {mask_tensor.dtype}. Fix: "
                "pass e.g. options={'reset_mask': terminations | truncations}."
            )
        return mask_tensor.to(self.config.device)

    def _to_ring(self, actions: Any, cfg: ActionLatencyConfig) -> torch.Tensor:
        if torch.is_tensor(actions):
            chosen = actions.detach().to(device=cfg.device, dtype=cfg.dtype)
        else:
            try:
                arr = np.array(actions, dtype=cfg.np_dtype, copy=True)
            except (TypeError, ValueError) as e:
                raise TypeError(
                    f"ActionLatency.step: actions of type {type(actions).__name__} cannot be read as a "
                    f"{cfg.np_dtype} array ({e}). Fix: pass a numpy array or torch tensor of shape "
                    f"{cfg.batch_shape}."
                ) from None
            chosen = torch.from_numpy(arr).to(cfg.device)
        if tuple(chosen.shape) != cfg.batch_shape:
            raise ValueError(
                f"ActionLatency.step: actions have shape {tuple(chosen.shape)}, expected "
                f"{cfg.batch_shape} (num_envs, *action_shape). Fix: pass one action per env."
            )
        return chosen

    # -- the latency law -------------------------------------------------------------------------------
    def _refresh(self) -> None:
        """The queue's per-env steps from the per-env seconds (the delay line's law: ``D`` half to even,
        effective jitter, its ceiling), and the ``[delay, jitter]`` seconds the info reports."""
        self._latency = self._queue.set_seconds(self._delay_s, self._jitter_s)

    def _resample(self, rows: torch.Tensor) -> None:
        changed = False
        cfg = self.config
        for dist, target in ((cfg.delay, self._delay_s), (cfg.jitter, self._jitter_s)):
            if isinstance(dist, Distribution):
                self._queue.line.random.sample_(dist, self._scratch, rows, 0)
                torch.where(rows, self._scratch, target, out=target)
                changed = True
        if changed:
            self._refresh()

    def _reset_rows(self, rows: torch.Tensor) -> None:
        """Start a new episode in ``rows``: empty queue, new delay/jitter, the initial action applied.

        On the host an empty mask is skipped (checking it costs nothing there; the random stream then
        depends only on which envs reset). On an accelerator the mask is applied as is: no device sync."""
        if self.config.on_host and not bool(rows.any()):
            return
        self._resample(rows)
        self._queue.restart(rows)

    def _shift(self) -> torch.Tensor:
        """The effective shift of every env's last applied action (steps; a new tensor)."""
        return self._queue.prev.clone()

    def _entries(self) -> dict[str, Any]:
        queue = self._queue
        out = {
            IN_FLIGHT_KEY: queue.in_flight(),
            APPLIED_KEY: queue.applied.clone(),
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
                self._queue.line.random.seed(_stream_seed(first))
            else:
                # Gymnasium seeds only the masked sub-envs; reseeding the one jitter stream whole would
                # replay the other envs' jitter: the seed is folded into the stream instead
                reset = torch.nonzero(rows.cpu()).flatten().tolist()
                random = self._queue.line.random
                random.seed(folded_seed([_stream_seed(first)], reset, random.get_state()))
        if rows is None:
            rows = torch.ones(self.num_envs, dtype=torch.bool, device=self.config.device)
        self._reset_rows(rows)
        self._autoreset &= ~rows
        return obs, {**info, **self._entries()}

    def step(self, actions: Any):
        if self._torch_env is None:
            raise RuntimeError("ActionLatency.step() before reset(). Fix: call reset() first.")
        cfg = self.config
        chosen = self._to_ring(actions, cfg)
        sent = applied = self._queue.advance(chosen)  # the action chosen `shift` steps ago (or the initial)
        mode = cfg.autoreset_mode
        next_step = mode is AutoresetMode.NEXT_STEP
        if next_step:
            restart = self._autoreset
            # The autoreset call: the action belongs to no episode and reaches the env unchanged.
            sent = torch.where(restart.view(cfg.col), chosen, applied)
            self._reset_rows(restart)
        obs, rewards, terminations, truncations, info = self.env.step(self._out(sent, actions))
        done = _done(terminations, truncations, cfg.device)
        info = dict(info)
        if next_step:
            self._autoreset = done
        elif mode is AutoresetMode.SAME_STEP:
            terminal = self._entries()
            self._reset_rows(done)
            final_info = info.get("final_info")
            if isinstance(final_info, Mapping):
                info["final_info"] = {**final_info, **terminal}
            elif final_info is None and bool(done.any()):
                info["final_info"] = terminal
        return obs, rewards, terminations, truncations, {**info, **self._entries()}

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
        cfg = self.config
        if in_flight:
            if cfg.max_shift == 0:
                raise ValueError(
                    "ActionLatency.critic_sensors(in_flight=True): with delay=0 no action is ever in flight "
                    "(max_shift is 0). Fix: pass in_flight=False, or give the wrapper a delay > 0."
                )
            out[IN_FLIGHT_KEY] = StateSensorOptions(
                key=IN_FLIGHT_KEY, shape=(cfg.max_shift, *cfg.action_shape)
            )
        if applied:
            out[APPLIED_KEY] = StateSensorOptions(key=APPLIED_KEY, shape=cfg.action_shape or (1,))
        if latency:
            out[LATENCY_KEY] = StateSensorOptions(key=LATENCY_KEY, shape=(2,))
        return out

    # -- persistence -----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically: the action queue, the per-env episode clocks,
        monotone bounds, first/applied actions, the sampled delay/jitter, the autoreset mask and the RNG."""
        cfg, queue = self.config, self._queue
        return {
            "version": 2,
            "options": self.checkpoint_options(),
            "num_envs": self.num_envs,
            "dt": cfg.dt,
            "max_shift": cfg.max_shift,
            "action_shape": cfg.action_shape,
            "action_dtype": str(cfg.np_dtype),
            "clock": queue.clock.t,
            "ring": queue.ring.clone(),
            "ep_t": queue.ep_t.clone(),
            "prev": queue.prev.clone(),
            "first": queue.first.clone(),
            "applied": queue.applied.clone(),
            "autoreset": self._autoreset.clone(),
            "delay_s": self._delay_s.clone(),
            "jitter_s": self._jitter_s.clone(),
            "torch_env": self._torch_env,
            "random": self._queue.line.random.get_state(),
        }

    def checkpoint_options(self) -> dict[str, str]:
        """The options a checkpoint must have been saved with to load here, each as its exact ``repr``
        (``seed`` is not among them: the checkpoint's random state replaces it)."""
        cfg = self.config
        init = cfg.initial_action
        return {
            "delay": repr(cfg.delay),
            "jitter": repr(cfg.jitter),
            "dt": repr(cfg.dt),
            "initial_action": repr(init) if isinstance(init, str) else f"{init.tolist()!r} ({init.dtype})",
            "autoreset_mode": repr(cfg.autoreset_mode.value),
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
        cfg, queue = self.config, self._queue
        mine = {
            "num_envs": self.num_envs,
            "dt": cfg.dt,
            "max_shift": cfg.max_shift,
            "action_shape": cfg.action_shape,
            "action_dtype": str(cfg.np_dtype),
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
        dev = cfg.device
        queue.clock.t = int(state["clock"])
        queue.ring.copy_(state["ring"])  # in place: the delay line reads these buffers
        queue.ep_t = state["ep_t"].to(dev, copy=True)
        queue.prev.copy_(state["prev"])
        queue.first = state["first"].to(dev, copy=True)
        queue.applied = state["applied"].to(dev, copy=True)
        self._autoreset = state["autoreset"].to(dev, copy=True)
        self._delay_s.copy_(state["delay_s"])
        self._jitter_s.copy_(state["jitter_s"])
        self._refresh()
        self._torch_env = state["torch_env"]
        self._queue.line.random.set_state(state["random"])
