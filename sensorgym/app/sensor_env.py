"""The vector envs the commands run: a Gymnasium env observed through the config's sensors
(:func:`make_sensor_env`), with the config's action latency in front of it, and the same as an SB3
``VecEnv`` (:func:`make_training_env`); :func:`config_env_kwargs` is what a config sets of them.

Example:
    >>> import sensorgym as sg
    >>> env = make_training_env("Pendulum-v1", {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])},
    ...                         n_envs=2, seed=0)
    >>> env.observation_space["policy"].shape
    (2,)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..core.options import SensorOptions

__all__ = ["config_env_kwargs", "make_sensor_env", "make_training_env"]


def make_sensor_env(
    env_id: str,
    sensors: Mapping[str, SensorOptions],
    *,
    n_envs: int = 4,
    seed: int | None = 0,
    vectorization_mode: str = "sync",
    autoreset_mode: str = "SameStep",
    env_kwargs: dict | None = None,
    latency: Any = None,
    **sensor_kwargs: Any,
) -> Any:
    """``make_sensor_vec``, with the config's action latency (a :class:`~sensorgym.app.config.LatencyConfig`,
    or ``None`` for none) between the agent and the env: ``SensorObservation(ActionLatency(envs))``.

    With ``latency.critic_in_flight`` (and a delay > 0) the actions in flight, and with
    ``latency.critic_latency`` the episode's ``[delay, jitter]``, are added as sensors
    (:meth:`~sensorgym.wrappers.ActionLatency.critic_sensors`) whose ground truth only the critic reads:
    they join ``critic`` (when it lists sensors) and never ``policy`` (default: the config's sensors).

    Example:
        >>> import sensorgym as sg
        >>> from sensorgym.app.config import LatencyConfig
        >>> env = make_sensor_env("Pendulum-v1", {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])},
        ...                       n_envs=2, latency=LatencyConfig(delay=0.1, jitter=0.05))
        >>> obs, _ = env.reset(seed=0)
        >>> obs["policy"].shape, obs["critic"].shape   # critic: angle GT (2) + in flight (3) + env obs (3)
        ((2, 2), (2, 8))
    """
    from ..wrappers import make_sensor_vec

    if latency is None:
        return make_sensor_vec(
            env_id,
            n_envs,
            sensors,
            autoreset_mode=autoreset_mode,
            seed=seed,
            vectorization_mode=vectorization_mode,
            env_kwargs=env_kwargs,
            **sensor_kwargs,
        )
    return _through_latency(
        env_id,
        sensors,
        n_envs=n_envs,
        seed=seed,
        vectorization_mode=vectorization_mode,
        autoreset_mode=autoreset_mode,
        env_kwargs=env_kwargs,
        latency=latency,
        **sensor_kwargs,
    )


def _through_latency(
    env_id: str,
    sensors: Mapping[str, SensorOptions],
    *,
    n_envs: int,
    seed: int | None,
    vectorization_mode: str,
    autoreset_mode: str,
    env_kwargs: dict | None,
    latency: Any,
    **sensor_kwargs: Any,
) -> Any:
    """:func:`make_sensor_env` with an action latency: ``SensorObservation(ActionLatency(envs))``, the
    latency's critic sensors added (the envs closed again when a wrapper refuses them)."""
    import functools

    import gymnasium as gym

    from ..wrappers import ActionLatency, SensorObservation, SimStateExtractor
    from ..wrappers.common import needs_extraction

    wrappers = (
        [functools.partial(SimStateExtractor, sensors=dict(sensors))] if needs_extraction(sensors) else []
    )
    envs = gym.make_vec(
        env_id,
        num_envs=n_envs,
        vectorization_mode=vectorization_mode,
        vector_kwargs={"autoreset_mode": autoreset_mode},
        wrappers=wrappers or None,
        **(env_kwargs or {}),
    )
    try:
        initial = latency.initial_action
        lat = ActionLatency(
            envs,
            latency.delay,
            latency.jitter,
            dt=sensor_kwargs.get("dt"),
            initial_action=np.asarray(initial) if isinstance(initial, list) else initial,
            seed=seed,
        )
        extra = lat.critic_sensors(
            in_flight=bool(latency.critic_in_flight) and lat.config.max_shift > 0,
            latency=bool(latency.critic_latency),
        )
        kwargs = dict(sensor_kwargs)
        if kwargs.get("policy") is None:
            kwargs["policy"] = list(sensors)
        if kwargs.get("critic") is not None:
            kwargs["critic"] = [*kwargs["critic"], *extra]
        return SensorObservation(lat, {**sensors, **extra}, seed=seed, **kwargs)
    except BaseException:
        envs.close()
        raise


def config_env_kwargs(cfg: Any) -> dict[str, Any]:
    """The keyword arguments of :func:`make_sensor_env` a config sets, besides the env id, the sensors and
    the number of envs: env kwargs, action latency and what the policy and the critic read.

    Example:
        >>> from sensorgym.app.config import parse_config
        >>> cfg = parse_config({"env": {"id": "Pendulum-v1"},
        ...                     "sensors": {"angle": {"type": "StateSensorOptions", "key": "obs"}}})
        >>> sorted(config_env_kwargs(cfg))[:3]
        ['critic', 'critic_age', 'critic_env_obs']
    """
    return dict(
        env_kwargs=cfg.env.kwargs,
        **({"dt": cfg.env.dt} if cfg.env.dt is not None else {}),
        latency=cfg.latency,
        policy=cfg.policy,
        critic=cfg.critic.sensors,
        critic_env_obs=cfg.critic.env_obs,
        critic_randomization=cfg.critic.randomization,
        policy_age=cfg.policy_age,
        critic_age=cfg.critic_age,
    )


def make_training_env(
    env_id: str,
    sensors: Mapping[str, SensorOptions],
    *,
    n_envs: int = 4,
    seed: int = 0,
    vectorization_mode: str = "sync",
    env_kwargs: dict | None = None,
    latency: Any = None,
    **sensor_kwargs: Any,
) -> Any:
    """A SAME_STEP vector env with sensors (and the action ``latency`` of :func:`make_sensor_env`), as an
    SB3 ``VecEnv``."""
    from ..integrations.sb3 import SB3VecEnv

    venv = make_sensor_env(
        env_id,
        sensors,
        n_envs=n_envs,
        seed=seed,
        vectorization_mode=vectorization_mode,
        env_kwargs=env_kwargs,
        latency=latency,
        **sensor_kwargs,
    )
    env = SB3VecEnv(venv)
    env.seed(seed)
    return env
