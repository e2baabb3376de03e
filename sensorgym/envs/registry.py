"""Registering sensor-observed reference envs with Gymnasium, in a single and a vector form.

``register_sensor_env(id, base_id, sensors, policy=..., critic=...)`` registers ``id`` twice over:

* ``gym.make(id)`` gives a :class:`~sensorgym.wrappers.SingleEnvSensorObservation` over ``base_id``;
* ``gym.make_vec(id, num_envs=N)`` (vector entry point) gives a :class:`~sensorgym.wrappers.SensorObservation`
  over ``N`` sub-envs of ``base_id`` with the simulator state measured inside each sub-env; pass
  ``vectorization="async"`` to run the sub-envs in worker processes and ``autoreset_mode="SameStep"`` for SB3.

Example:
    >>> import gymnasium as gym, sensorgym.envs
    >>> envs = gym.make_vec("sensorgym/AntSensors-v0", num_envs=2)
    >>> obs, _ = envs.reset(seed=0)
    >>> obs["policy"].shape[0], "critic" in obs
    (2, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

__all__ = ["register_sensor_env"]


def _single(
    base_id: str,
    sensors: Callable[[], dict],
    policy: Sequence[str] | None,
    critic: Sequence[str] | None,
    **kwargs: Any,
) -> gym.Env:
    from ..wrappers import SingleEnvSensorObservation

    sensor_kwargs = {
        k: kwargs.pop(k) for k in ("seed", "per_env_rng", "critic_randomization", "device") if k in kwargs
    }
    return SingleEnvSensorObservation(
        gym.make(base_id, **kwargs), sensors(), policy=policy, critic=critic, **sensor_kwargs
    )


def _vector(
    base_id: str,
    sensors: Callable[[], dict],
    policy: Sequence[str] | None,
    critic: Sequence[str] | None,
    num_envs: int = 1,
    vectorization: str = "sync",
    autoreset_mode: str | None = None,
    **kwargs: Any,
):
    from ..wrappers import make_sensor_vec

    sensor_kwargs = {
        k: kwargs.pop(k) for k in ("seed", "per_env_rng", "critic_randomization", "device") if k in kwargs
    }
    return make_sensor_vec(
        base_id,
        num_envs,
        sensors(),
        vectorization_mode=vectorization,
        autoreset_mode=autoreset_mode,
        env_kwargs=kwargs,
        policy=policy,
        critic=critic,
        **sensor_kwargs,
    )


def register_sensor_env(
    env_id: str,
    base_id: str,
    sensors: Callable[[], dict],
    policy: Sequence[str] | None = None,
    critic: Sequence[str] | None = None,
    max_episode_steps: int | None = None,
) -> None:
    """Register ``env_id`` (single and vector forms) as ``base_id`` observed through ``sensors()``."""
    if env_id in gym.registry:
        return
    gym.register(
        env_id,
        entry_point=lambda **kw: _single(base_id, sensors, policy, critic, **kw),
        vector_entry_point=lambda **kw: _vector(base_id, sensors, policy, critic, **kw),
        max_episode_steps=max_episode_steps,
        disable_env_checker=True,
    )
