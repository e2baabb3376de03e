"""``make_sensor_vec``: one call from an env id to a vector env observed through sensors.

Example:
    >>> import sensorgym as sg
    >>> from sensorgym.wrappers import make_sensor_vec
    >>> envs = make_sensor_vec("Pendulum-v1", 2, {
    ...     "angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.01),
    ...     "theta_dot": sg.EnvAttributeOptions(attr="state", shape=(2,), index=[1]),
    ... }, policy=["angle"], critic=["theta_dot"], seed=0)
    >>> obs, _ = envs.reset(seed=0)
    >>> obs["policy"].shape, obs["critic"].shape
    ((2, 2), (2, 4))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from ..core.options import SensorOptions
from .common import needs_extraction
from .extract import SimStateExtractor
from .vector import SensorObservation

__all__ = ["make_sensor_vec"]


def make_sensor_vec(
    env_id: str | gym.envs.registration.EnvSpec,
    num_envs: int,
    sensors: Mapping[str, SensorOptions],
    *,
    vectorization_mode: str = "sync",
    autoreset_mode: str | gym.vector.AutoresetMode | None = None,
    vector_kwargs: dict | None = None,
    wrappers: Sequence[Callable[[gym.Env], gym.Wrapper]] | None = None,
    env_kwargs: dict | None = None,
    **sensor_kwargs: Any,
) -> SensorObservation:
    """``gym.make_vec`` + a :class:`SimStateExtractor` in every sub-env (when a sensor needs one) +
    :class:`SensorObservation`. ``sensor_kwargs`` go to :class:`SensorObservation`."""
    vector_kwargs = dict(vector_kwargs or {})
    if autoreset_mode is not None:
        vector_kwargs["autoreset_mode"] = autoreset_mode
    wrappers = list(wrappers or [])
    if needs_extraction(sensors):
        wrappers.append(functools.partial(SimStateExtractor, sensors=dict(sensors)))
    envs = gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=vectorization_mode,
        vector_kwargs=vector_kwargs,
        wrappers=wrappers or None,
        **(env_kwargs or {}),
    )
    return SensorObservation(envs, sensors, **sensor_kwargs)
