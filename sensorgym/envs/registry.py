"""Registering sensor-observed reference envs with Gymnasium, in a single and a vector form.

``register_sensor_env(id, base_id, sensors, policy=..., critic=...)`` registers ``id`` twice over:

* ``gym.make(id)`` gives a :class:`~sensorgym.wrappers.SingleEnvSensorObservation` over ``base_id``;
* ``gym.make_vec(id, num_envs=N)`` (vector entry point) gives a :class:`~sensorgym.wrappers.SensorObservation`
  over ``N`` sub-envs of ``base_id`` with the simulator state measured inside each sub-env; pass
  ``vectorization="async"`` to run the sub-envs in worker processes and ``autoreset_mode="SameStep"`` for SB3.

Either form takes the sensor wrapper's own keyword arguments (:data:`WRAPPER_KWARGS`: ``seed``, ``device``,
``executor``, ``per_env_rng``, ...); every other keyword goes to the base env.

When ``base_id`` is a MuJoCo env that takes ``xml_file=`` (Gymnasium's MuJoCo envs) and the caller passes
none, the base env is built from a copy of its model with MuJoCo's native sensors added for the catalog
sensors that have them (:func:`~sensorgym.sensors.mujoco.native.native_model_xml`): the IMU and the contact
switches then read ``data.sensordata`` instead of computing in Python. The physics and the readings are
the same (within float32 rounding); ``native=False`` at registration turns it off.

Example:
    >>> import gymnasium as gym, sensorgym.envs
    >>> envs = gym.make_vec("sensorgym/AntSensors-v0", num_envs=2)
    >>> obs, _ = envs.reset(seed=0)
    >>> obs["policy"].shape[0], "critic" in obs
    (2, True)
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

__all__ = ["WRAPPER_KWARGS", "native_env_kwargs", "register_sensor_env"]


def native_env_kwargs(base_id: str, sensors: Mapping[str, Any], kwargs: Mapping[str, Any]) -> dict:
    """``kwargs`` plus ``xml_file=`` a copy of ``base_id``'s model with the native sensors of ``sensors``
    added, when ``base_id`` is an env whose constructor takes ``xml_file`` (Gymnasium's MuJoCo envs), the
    caller gave none and some sensor can read native sensors; else ``kwargs`` unchanged.

    Example:
        >>> import gymnasium as gym
        >>> from sensorgym.envs.ant import ant_sensors
        >>> kw = native_env_kwargs("Ant-v5", ant_sensors(), {})
        >>> gym.make("Ant-v5", **kw).unwrapped.model.nsensor  # IMU (3) + 4 feet x (all, torso)
        11
    """
    from ..sensors.mujoco.native import native_model_xml, supports_native

    out = dict(kwargs)
    if "xml_file" in out or not any(supports_native(o) for o in sensors.values()):
        return out
    spec = gym.spec(base_id)
    entry = spec.entry_point
    if entry is None:
        return out
    creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    try:
        param = inspect.signature(creator).parameters.get("xml_file")
    except (TypeError, ValueError):
        return out
    xml = (spec.kwargs or {}).get("xml_file", None if param is None else param.default)
    if not isinstance(xml, str):
        return out
    from gymnasium.envs.mujoco.mujoco_env import expand_model_path

    # a model it cannot patch (e.g. bodies declared in included files) keeps the Python path
    with contextlib.suppress(OSError, ValueError):
        out["xml_file"] = native_model_xml(expand_model_path(xml), sensors)
    return out


#: the sensor wrappers' keyword arguments a caller may pass through ``gym.make``/``gym.make_vec`` (the
#: registration fixes ``sensors``, ``policy`` and ``critic``); every other keyword goes to the base env,
#: ``dt`` too (the wrapper reads the control step from the env, which may take its own ``dt``)
WRAPPER_KWARGS = (
    "device",
    "seed",
    "critic_env_obs",
    "critic_randomization",
    "per_env_rng",
    "policy_age",
    "critic_age",
    "executor",
)


def _sensor_kwargs(kwargs: dict) -> dict:
    """Pop the sensor wrapper's keyword arguments out of ``kwargs`` (edited in place)."""
    return {k: kwargs.pop(k) for k in WRAPPER_KWARGS if k in kwargs}


def _single(
    base_id: str,
    sensors: Callable[[], dict],
    policy: Sequence[str] | None,
    critic: Sequence[str] | None,
    native: bool = True,
    **kwargs: Any,
) -> gym.Env:
    from ..wrappers import SingleEnvSensorObservation

    sensor_kwargs = _sensor_kwargs(kwargs)
    chosen = sensors()
    if native:
        kwargs = native_env_kwargs(base_id, chosen, kwargs)
    return SingleEnvSensorObservation(
        gym.make(base_id, **kwargs), chosen, policy=policy, critic=critic, **sensor_kwargs
    )


def _vector(
    base_id: str,
    sensors: Callable[[], dict],
    policy: Sequence[str] | None,
    critic: Sequence[str] | None,
    native: bool = True,
    num_envs: int = 1,
    vectorization: str = "sync",
    autoreset_mode: str | None = None,
    **kwargs: Any,
):
    from ..wrappers import make_sensor_vec

    sensor_kwargs = _sensor_kwargs(kwargs)
    chosen = sensors()
    if native:  # the patched model is written here once; Async workers load it by path
        kwargs = native_env_kwargs(base_id, chosen, kwargs)
    return make_sensor_vec(
        base_id,
        num_envs,
        chosen,
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
    native: bool = True,
    base_kwargs: Mapping[str, Any] | None = None,
) -> None:
    """Register ``env_id`` (single and vector forms) as ``base_id`` observed through ``sensors()``;
    ``native``: build a MuJoCo base env from its model with native sensors added (see the module
    docstring); ``base_kwargs``: the base env's keyword arguments by default (a caller's win)."""
    if env_id in gym.registry:
        return
    base = dict(base_kwargs or {})
    gym.register(
        env_id,
        entry_point=lambda **kw: _single(base_id, sensors, policy, critic, native, **{**base, **kw}),
        vector_entry_point=lambda **kw: _vector(base_id, sensors, policy, critic, native, **{**base, **kw}),
        max_episode_steps=max_episode_steps,
        disable_env_checker=True,
    )
