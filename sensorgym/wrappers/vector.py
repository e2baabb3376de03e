"""``SensorObservation``: sensors for any Gymnasium ``VectorEnv``.

Example:
    >>> import gymnasium as gym, sensorgym as sg
    >>> from sensorgym.wrappers import SensorObservation
    >>> envs = gym.make_vec("Pendulum-v1", num_envs=4, vectorization_mode="sync")
    >>> envs = SensorObservation(envs, {
    ...     "angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, noise=0.01,
    ...                                    history_length=2),
    ... }, seed=0)
    >>> obs, info = envs.reset(seed=0)
    >>> obs["policy"].shape, obs["critic"].shape   # 2 readings x 2 history; GT (2) + env obs (3)
    ((4, 4), (4, 5))
    >>> obs, *_ = envs.step(envs.action_space.sample())
    >>> obs in envs.observation_space
    True
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from ..core.options import SensorOptions
from ..sensors.state import StateSensorOptions
from .common import (
    autoreset_mode_of,
    check_checkpoint_options,
    checkpoint_options,
    clean_info,
    constructor_arguments,
    init_sensor_wrapper,
)
from .faults import DEAD_PIPE, annotate_env_error, dead_workers, missing_info_rows
from .spaces import with_rows
from .state_mapping import LAYOUT_KEY, build_state, merge_rows

__all__ = ["SensorObservation"]


def _first_leaf(obs: Any) -> Any:
    """The first array of a (nested) Dict/Tuple observation, or the observation itself."""
    while isinstance(obs, (Mapping, tuple)):
        obs = next(iter(obs.values())) if isinstance(obs, Mapping) else obs[0]
    return obs


def _is_torch(obs: Any) -> bool:
    return torch.is_tensor(_first_leaf(obs))


def _missing_info(key: str, names: list[str], envs: list[int], call: str) -> ValueError:
    return ValueError(
        f"sensor(s) {names} read info[{key!r}], which sub-env(s) {envs} did not return from {call}(); their "
        "rows would hold zeros or another episode's value. The sensors did not advance. Fix: return "
        f"{key!r} in the info of every reset() and step() of the env (the last step of an episode "
        "included), or drop the sensor."
    )


def _copy_mask(mask: Any) -> Any:
    return mask.clone().bool() if torch.is_tensor(mask) else np.array(mask, dtype=bool, copy=True)


def _done_mask(terminations: Any, truncations: Any) -> Any:
    """``terminations | truncations`` as a new bool mask of the same kind (numpy or torch)."""
    if isinstance(terminations, np.ndarray) and isinstance(truncations, np.ndarray):
        return np.logical_or(terminations, truncations)  # a new bool array, whatever the inputs' dtypes
    return _copy_mask(terminations | truncations)


def _like(mask: Any, ref: Any) -> Any:
    """``mask`` as the same kind of array as ``ref`` (numpy or a torch tensor on its device)."""
    if torch.is_tensor(ref):
        return torch.as_tensor(
            np.asarray(mask) if not torch.is_tensor(mask) else mask, device=ref.device
        ).bool()
    return mask.detach().cpu().numpy().astype(bool) if torch.is_tensor(mask) else np.asarray(mask, bool)


def _host_mask(mask: Any) -> np.ndarray:
    """A numpy bool copy of a mask that may be a torch tensor on any device (moved to the host first)."""
    if torch.is_tensor(mask):
        return mask.detach().to("cpu").numpy().astype(bool)
    return np.array(mask, dtype=bool, copy=True)


def _batched_final_obs(info: Mapping) -> bool:
    """Whether ``info["final_obs"]`` is a natively batched env's batched observation (not Gymnasium's
    object array of per-env observations)."""
    final = info.get("final_obs")
    return final is not None and not (isinstance(final, np.ndarray) and final.dtype == object)


def _copy_obs(obs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.clone() if torch.is_tensor(v) else np.array(v, copy=True) for k, v in obs.items()}


class SensorObservation(VectorWrapper, gym.utils.RecordConstructorArgs):
    """Observe a vector env through sensors: ``{"policy": measured, "critic": GT + env obs}``.

    Args:
        env: any ``gymnasium.vector.VectorEnv`` (Sync, Async, or natively batched, numpy or torch).
        sensors: mapping name -> sensor options; names order the observation.
        dt: control step in seconds; inferred from the env (``dt`` of the env or its sub-envs, or
            ``metadata["dt"]``) when None.
        device: where the sensor buffers live; default: the env's device for torch envs, else CPU.
        seed: seed of the sensor random numbers (reseeded by ``reset(seed=...)``).
        policy: names of the sensors in ``"policy"`` (default: all).
        critic: names of the sensors whose ground truth is in ``"critic"`` (default: all).
        critic_env_obs: append the env's own observation to ``"critic"``.
        critic_randomization: append the per-env randomized sensor parameters to ``"critic"``.
        per_env_rng: one random stream per env (env ``b`` seeded ``seed + b``): results then do not depend
            on the batch, at the cost of a loop over envs (see :mod:`sensorgym.core.rng`).
        policy_age: names of sensors whose reading's age (seconds since the sample behind it was taken,
            :meth:`~sensorgym.Sensor.read_age`; a driver's time stamp) is appended to ``"policy"``, one
            column each, in this order.
        critic_age: the same for ``"critic"`` (after the randomized parameters).
        executor: how the sensor step runs, ``"auto"`` (numpy on numpy views of the buffers for small
            CPU batches, torch otherwise), ``"torch"`` or ``"numpy"``; the same bits either way (see
            :class:`~sensorgym.SensorManager` and docs/performance.md).

    State handed to the sensors: ``"obs"`` (``"obs.<key>"`` for Dict observations), every numeric info
    entry under its key, and what a :class:`~sensorgym.wrappers.SimStateExtractor` computed inside the
    sub-envs. All three autoreset modes are supported; numpy envs give numpy observations, torch envs
    torch tensors on their device; every returned array is new.

    See the module docstring for a runnable example.
    """

    def __init__(
        self,
        env: VectorEnv,
        sensors: Mapping[str, SensorOptions],
        *,
        dt: float | None = None,
        device: str | torch.device | None = None,
        seed: int | None = None,
        policy: Sequence[str] | None = None,
        critic: Sequence[str] | None = None,
        critic_env_obs: bool = True,
        critic_randomization: bool = False,
        per_env_rng: bool = False,
        policy_age: Sequence[str] = (),
        critic_age: Sequence[str] = (),
        executor: str = "auto",
    ) -> None:
        arguments = constructor_arguments(locals())
        if not isinstance(env, VectorEnv):
            raise TypeError(
                f"SensorObservation wraps a gymnasium VectorEnv, got {type(env).__name__}. Fix: use "
                "gym.make_vec(...), or SingleEnvSensorObservation for a single gym.Env."
            )
        VectorWrapper.__init__(self, env)
        if device is None:
            device = getattr(env.unwrapped, "device", None) or "cpu"
        space = env.single_observation_space
        sensors = init_sensor_wrapper(self, env, self.num_envs, space, arguments, device)
        self.autoreset_mode = autoreset_mode_of(env)
        self.single_observation_space = self.layout.space
        self._numpy_pack = self.layout.numpy_packable()  # numpy envs: pack with numpy (same values)
        self.observation_space = batch_space(self.layout.space, self.num_envs)
        self._autoreset = np.zeros(self.num_envs, dtype=bool)
        self._layout: tuple | None = None  # of the flat simulator state from the sub-envs
        self._last_obs: Any = None  # the inner env's last observation (for checkpoints)
        # info entries read by sensors -> their names (checked for rows Gymnasium zero-filled)
        self._info_keys: dict[str, list[str]] = {}
        for name, opts in sensors.items():
            key = getattr(opts, "key", None)
            if isinstance(opts, StateSensorOptions) and key != "obs" and not key.startswith("obs."):
                self._info_keys.setdefault(key, []).append(name)

    def _learn_layout(self, info: Mapping) -> None:
        layouts = info.get(LAYOUT_KEY)
        if layouts is None:
            return
        mask = info.get("_" + LAYOUT_KEY)
        rows = range(len(layouts)) if mask is None else np.flatnonzero(mask)
        for i in rows:
            if layouts[i] is not None:
                self._layout = tuple((k, tuple(s)) for k, s in layouts[i])
                return

    # -- gymnasium API -----------------------------------------------------------------------------------
    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        mask = None
        if options and "reset_mask" in options:
            mask = _copy_mask(options["reset_mask"])  # the inner env pops it from `options`
        try:
            obs, info = self.env.reset(seed=seed, options=options)
        except Exception as e:
            if (err := annotate_env_error(e, self.env, "reset")) is e:
                raise
            raise err from e
        self._learn_layout(info)
        self._check_info(info, "reset", None if mask is None else _like(mask, np.zeros(0)))
        if seed is not None:
            # a list: env b's stream gets seed[b] with per_env_rng (as its env); a partial reset reseeds
            # only the masked envs' streams, as Gymnasium seeds only the masked sub-envs
            self.manager.seed(seed, envs_idx=mask)
        self.manager.reset(build_state(obs, info, self._layout), envs_idx=mask)
        if mask is None:
            self._autoreset = self._autoreset & False
        else:
            self._autoreset = self._autoreset & ~_like(mask, self._autoreset)
        return self._observation(obs), clean_info(info)

    def step(self, actions: Any):
        try:
            obs, rewards, terminations, truncations, info = self.env.step(actions)
        except Exception as e:
            if (err := annotate_env_error(e, self.env, "step")) is e:
                raise
            raise err from e
        self._check_info(info, "step")
        state = build_state(obs, info, self._layout)
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:
            # Envs that finished last step return their reset observation now. The mask is passed
            # even when empty: the random stream then does not depend on whether anything reset (and a
            # torch mask needs no device sync), so numpy and torch envs give the same numbers.
            self.manager.step(state, reset_mask=self._autoreset)
            self._autoreset = _done_mask(terminations, truncations)
        elif self.autoreset_mode is AutoresetMode.SAME_STEP:
            done = self._done(terminations, truncations)
            if done.any():
                info = self._same_step_boundary(obs, info, state, done)
            else:
                self.manager.step(state)
                if _batched_final_obs(info):
                    # a batched env's final_obs on a step where nothing finished: the sensor Dict too (one
                    # type on every step; its rows are the observation, as on boundary steps)
                    observation = self._observation(obs)
                    info = {**info, "final_obs": _copy_obs(observation)}
                    return observation, rewards, terminations, truncations, clean_info(info)
        else:
            self.manager.step(state)
        return self._observation(obs), rewards, terminations, truncations, clean_info(info)

    def close(self, **kwargs: Any) -> None:
        processes = getattr(self.env.unwrapped, "processes", None)
        if processes is not None and dead_workers(processes):
            # A dead Async worker cannot answer a polite close (which would wait for it forever).
            kwargs["terminate"] = True
        try:
            self.env.close(**kwargs)
        except DEAD_PIPE:
            self.env.close(terminate=True)

    # -- internals -------------------------------------------------------------------------------------
    def _check_info(self, info: Mapping | None, call: str, rows: np.ndarray | None = None) -> None:
        """Refuse info entries that sensors read but some sub-envs did not return (zero-filled rows)."""
        for key, names in self._info_keys.items():
            missing = missing_info_rows(info, key, rows)
            if missing:
                raise _missing_info(key, names, missing, call)

    @staticmethod
    def _done(terminations: Any, truncations: Any) -> np.ndarray:
        done = terminations | truncations
        return done.detach().cpu().numpy().astype(bool) if torch.is_tensor(done) else np.asarray(done, bool)

    def _observation(self, obs: Any) -> dict[str, Any]:
        self._last_obs = obs
        is_torch = _is_torch(obs)
        if not is_torch and self._numpy_pack:
            return self.layout.pack_numpy(obs)
        packed = self.layout.pack(obs)
        if is_torch:
            device = _first_leaf(obs).device
            return {k: v.to(device) for k, v in packed.items()}
        return {k: v.cpu().numpy() for k, v in packed.items()}

    def _same_step_boundary(self, obs: Any, info: dict, state: dict, done: np.ndarray) -> dict:
        """SAME_STEP: feed the terminal reading, export it as ``final_obs``, restart with the reset obs."""
        final_obs = info.get("final_obs")
        has_final = _host_mask(info.get("_final_obs", done))  # a device tensor never reaches numpy
        terminal_obs = self._terminal_obs(obs, final_obs, has_final)
        terminal_state = build_state(terminal_obs, info, self._layout)
        final_info = info.get("final_info")
        self._check_info(final_info, "step (final_info)", has_final)
        if isinstance(final_info, Mapping):
            final_state = build_state(None, final_info, self._layout)
            for key, names in self._info_keys.items():
                if key not in final_state and bool(has_final.any()):
                    # no finished env returned it: its rows would keep the next episode's reset value
                    rows = has_final.cpu().numpy() if torch.is_tensor(has_final) else has_final
                    raise _missing_info(key, names, np.flatnonzero(rows).tolist(), "step (final_info)")
            terminal_state = merge_rows(terminal_state, final_state, has_final)
        self.manager.step(terminal_state)
        terminal = self._observation(terminal_obs)
        info = dict(info)
        if isinstance(final_obs, np.ndarray) and final_obs.dtype == object:
            rewritten = final_obs.copy()
            for i in np.flatnonzero(has_final):
                rewritten[i] = {k: v[i].copy() for k, v in terminal.items()}
            info["final_obs"] = rewritten
        else:  # a natively batched env: batched final observations with a `_final_obs` mask
            info["final_obs"] = terminal
        self.manager.reset(state, envs_idx=has_final)
        return info

    @staticmethod
    def _terminal_obs(obs: Any, final_obs: Any, rows: np.ndarray) -> Any:
        return with_rows(obs, final_obs, rows)

    # -- persistence -----------------------------------------------------------------------------------
    def __deepcopy__(self, memo: dict) -> SensorObservation:
        """``copy.deepcopy``: an independent wrapper that continues exactly like this one (the manager
        copies itself, see :class:`~sensorgym.core.persistence.ManagerPersistence`); also over a
        ``gym.make_vec`` env of Gymnasium < 1.4, whose consumed ``env_fns`` generator cannot be copied."""
        from .checkpoint import picklable_env_fns

        new = object.__new__(type(self))
        memo[id(self)] = new
        self.manager.exclude_views(memo)  # the layout's views of the manager's buffers are not copied
        with picklable_env_fns(self.env):
            new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    def state_dict(self, include_envs: bool = False) -> dict[str, Any]:
        """Everything the wrapper needs to continue exactly: the manager (rings, randomization, RNG), the
        autoreset bookkeeping, the last observation; with ``include_envs`` also a snapshot of the
        wrapped vector env (Sync or natively batched; see :mod:`sensorgym.wrappers.checkpoint`), so a run can
        stop mid-episode and resume bit-identically in a fresh process."""
        state = {
            "manager": self.manager.state_dict(),
            "options": checkpoint_options(self),
            "autoreset": _copy_mask(self._autoreset),
            "layout": self._layout,
            "last_obs": copy.deepcopy(self._last_obs),
        }
        if include_envs:
            from .checkpoint import snapshot_vector_env

            state["envs"] = snapshot_vector_env(self.env)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` into a wrapper built with the same env, sensors and options. A
        checkpoint saved with any other option (see :func:`~sensorgym.wrappers.common.checkpoint_options`),
        sensor, or (with ``include_envs``) vector env or vector wrapper option, such as an
        ``ActionLatency``'s ``delay``, is refused with a ``ValueError`` naming it, before anything
        changes."""
        check_checkpoint_options(type(self).__name__, state.get("options"), checkpoint_options(self))
        restored = None
        if "envs" in state:
            from .checkpoint import check_same_vector_env, restore_vector_env

            restored = restore_vector_env(state["envs"])
            try:
                if restored.num_envs != self.num_envs:
                    raise ValueError(
                        f"load_state_dict: the snapshot has {restored.num_envs} envs, this wrapper "
                        f"{self.num_envs}. Fix: build the wrapper with the same number of envs."
                    )
                check_same_vector_env(restored, self.env)
                self.manager.load_state_dict(state["manager"])
            except BaseException:
                restored.close()
                raise
            self.env.close()
            self.env = restored
        else:
            self.manager.load_state_dict(state["manager"])
        self._autoreset = _like(_copy_mask(state["autoreset"]), self._autoreset)
        self._layout = state.get("layout", self._layout)
        self._last_obs = copy.deepcopy(state.get("last_obs"))

    def current_observation(self) -> dict[str, Any]:
        """The observation of the current step again (new arrays), without stepping."""
        if self._last_obs is None:
            raise RuntimeError("current_observation() before the first reset. Fix: call reset() first.")
        return self._observation(self._last_obs)
