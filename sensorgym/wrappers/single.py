"""``SingleEnvSensorObservation``: the same sensors for one plain ``gym.Env``.

It passes ``gymnasium.utils.env_checker.check_env`` and Stable-Baselines3's ``check_env``, and it is the
per-env reference the vector wrapper is tested against.

Example:
    >>> import gymnasium as gym, sensorgym as sg
    >>> from sensorgym.wrappers import SingleEnvSensorObservation
    >>> env = SingleEnvSensorObservation(gym.make("Pendulum-v1"), {
    ...     "angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, noise=0.01)})
    >>> obs, info = env.reset(seed=0)
    >>> obs["policy"].shape, obs["critic"].shape
    ((2,), (5,))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ..core.options import SensorOptions
from .common import (
    ExtractionPlan,
    check_checkpoint_options,
    checkpoint_options,
    clean_info,
    constructor_arguments,
    init_sensor_wrapper,
    needs_extraction,
)
from .state_mapping import EXTRACTOR_KEY, build_state

__all__ = ["SingleEnvSensorObservation"]


def _batch1(value: Any) -> Any:
    """Add a leading env axis of size 1 (recursively for dicts)."""
    if isinstance(value, Mapping):
        return {k: _batch1(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_batch1(v) for v in value)
    if torch.is_tensor(value):
        return value.unsqueeze(0)
    if isinstance(value, (np.ndarray, np.number, int, float, bool)):
        return np.asarray(value)[None]
    return value


def _leaves(value: Any) -> list:
    if isinstance(value, Mapping):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, tuple):
        return [x for v in value for x in _leaves(v)]
    return [value]


class SingleEnvSensorObservation(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Observe one env through sensors: ``{"policy": measured, "critic": GT + env obs}``.

    Takes the same arguments as :class:`~sensorgym.wrappers.SensorObservation` (the manager has one env).
    Sensors that read simulator state (``_extract_state``) are extracted from this env directly.
    Observations are new float32 numpy arrays without a batch axis.

    See the module docstring for a runnable example.
    """

    def __init__(
        self,
        env: gym.Env,
        sensors: Mapping[str, SensorOptions],
        *,
        dt: float | None = None,
        device: str | torch.device = "cpu",
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
        gym.Wrapper.__init__(self, env)
        sensors = init_sensor_wrapper(self, env, 1, env.observation_space, arguments, device)
        self._extract = ExtractionPlan(sensors) if needs_extraction(sensors) else None
        self._layout: tuple | None = None  # of the flat extraction, from the last reset
        self._numpy_pack = self.layout.numpy_packable()
        self.observation_space = self.layout.space

    def _state(self, obs: Any, info: Mapping, reset: bool = False) -> dict:
        info = dict(info)
        if self._extract is not None:
            if reset:  # the layout never changes: learnt at every reset, as the vector wrapper does
                info[EXTRACTOR_KEY], self._layout = self._extract.packed_with_layout(self.env)
            else:
                info[EXTRACTOR_KEY] = self._extract.packed(self.env)
        return build_state(_batch1(obs), _batch1(info), self._layout)

    def _observation(self, obs: Any) -> dict[str, np.ndarray]:
        batched = _batch1(obs)
        if self._numpy_pack and not any(torch.is_tensor(x) for x in _leaves(batched)):
            packed = self.layout.pack_numpy(batched)  # the same values, without torch dispatches
            return {k: v[0] for k, v in packed.items()}
        return {k: v[0].cpu().numpy() for k, v in self.layout.pack(batched).items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if seed is not None:
            self.manager.seed(seed)
        self.manager.reset(self._state(obs, info, reset=True))
        return self._observation(obs), clean_info(info)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.manager.step(self._state(obs, info))
        return self._observation(obs), reward, terminated, truncated, clean_info(info)

    def state_dict(self) -> dict[str, Any]:
        """The sensors' state (the manager's) and the wrapper's options, checked on load."""
        return {"manager": self.manager.state_dict(), "options": checkpoint_options(self)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; a checkpoint saved with other options (or sensors) is refused with a
        ``ValueError`` naming the option (see :func:`~sensorgym.wrappers.common.checkpoint_options`)."""
        check_checkpoint_options(type(self).__name__, state.get("options"), checkpoint_options(self))
        self.manager.load_state_dict(state["manager"])
