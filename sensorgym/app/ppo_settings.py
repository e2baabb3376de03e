"""PPO's settings: the defaults sensorgym trains with (:data:`DEFAULT_PPO`), the check of what a config
may set of them (:func:`check_ppo_kwargs`), and the steps a budget trains (PPO trains whole rollouts:
:func:`rollout_steps`, :func:`planned_timesteps`).

Example:
    >>> planned_timesteps(50_000, rollout_steps({"n_steps": 1024}, 4))
    53248
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["CRITIC_TYPES", "DEFAULT_PPO", "check_ppo_kwargs", "planned_timesteps", "rollout_steps"]

#: critic types: what the value function reads
CRITIC_TYPES = ("symmetric", "asymmetric")

#: PPO settings for Pendulum-like continuous control (after rl-zoo's tuned Pendulum-v1 entry)
DEFAULT_PPO: dict[str, Any] = dict(
    n_steps=1024,
    batch_size=64,
    gae_lambda=0.95,
    gamma=0.9,
    n_epochs=10,
    ent_coef=0.0,
    learning_rate=1e-3,
    clip_range=0.2,
    use_sde=True,
    sde_sample_freq=4,
)


def rollout_steps(ppo_kwargs: Mapping[str, Any] | None, n_envs: int) -> int:
    """Steps per PPO rollout: ``n_steps`` (per env) x ``n_envs``; PPO trains whole rollouts only.

    Example:
        >>> rollout_steps(None, 4)   # DEFAULT_PPO's n_steps = 1024
        4096
    """
    return int({**DEFAULT_PPO, **dict(ppo_kwargs or {})}["n_steps"]) * int(n_envs)


def planned_timesteps(budget: int, rollout: int, start: int = 0) -> int:
    """The steps PPO actually trains for a ``budget``: from ``start``, whole rollouts until >= budget.

    Example:
        >>> planned_timesteps(50_000, 4096)   # 13 rollouts
        53248
        >>> planned_timesteps(50_000, 4096, start=8)   # resumed mid-rollout at step 8
        53256
    """
    if start >= budget:
        return int(start)
    return int(start + math.ceil((budget - start) / rollout) * rollout)


#: PPO arguments sensorgym sets itself (``algorithm.kwargs`` may not)
_RESERVED_PPO = {
    "policy",
    "env",
    "seed",
    "device",
    "verbose",
    "tensorboard_log",
    "policy_kwargs",
    "_init_setup_model",
}
#: PPO arguments that must be whole numbers >= 1 (batch_size >= 2: advantages are normalized per batch)
_POSITIVE_INT_PPO = {"n_steps": 1, "batch_size": 2, "n_epochs": 1}
#: PPO arguments a config can only give as numbers (SB3 also takes callables, which a config cannot hold)
_NUMBER_PPO = {"learning_rate", "gamma", "gae_lambda", "clip_range", "ent_coef", "vf_coef", "max_grad_norm"}


def check_ppo_kwargs(kwargs: Mapping[str, Any], n_envs: int, source: str) -> None:
    """Raise a :class:`~sensorgym.app.config.ConfigError` naming ``source`` (the config file), the key, the
    value and the fix for an ``algorithm.kwargs`` entry that PPO would reject or that sensorgym sets.

    Example:
        >>> from sensorgym.app.config import ConfigError
        >>> try:
        ...     check_ppo_kwargs({"n_stepz": 64}, 4, "my.toml")
        ... except ConfigError as e:
        ...     print(e)  # doctest: +ELLIPSIS
        my.toml: config algorithm.kwargs.n_stepz = 64: PPO has no such argument. Fix: did you mean ...
    """
    import difflib
    import inspect

    from stable_baselines3 import PPO

    from .config import ConfigError

    accepted = [
        name
        for name, p in inspect.signature(PPO.__init__).parameters.items()
        if name != "self" and p.kind is not p.VAR_KEYWORD and name not in _RESERVED_PPO
    ]
    for key, value in kwargs.items():
        where = f"{source}: config algorithm.kwargs.{key} = {value!r}"
        if key in _RESERVED_PPO:
            raise ConfigError(
                f"{where}: sensorgym sets {key} itself. Fix: remove it (the seed is algorithm.seed)."
            )
        if key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"{where}: PPO has no such argument. Fix: {hint}see the arguments of "
                "stable_baselines3.PPO (e.g. n_steps, batch_size, learning_rate, gamma)."
            )
        low = _POSITIVE_INT_PPO.get(key)
        if low is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ConfigError(f"{where}: must be a whole number >= {low}. Fix: write e.g. {key} = 64.")
        if key in _NUMBER_PPO and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{where}: must be a number. Fix: write e.g. {key} = 0.0003.")
    n_steps = kwargs.get("n_steps", 2048)
    if isinstance(n_steps, int) and n_steps * n_envs <= 1:  # SB3 asserts: advantages need 2 samples
        raise ConfigError(
            f"{source}: config algorithm.kwargs.n_steps = {n_steps!r} with env.n_envs = {n_envs}: a PPO "
            "rollout (n_steps x n_envs) must hold more than 1 step. Fix: write e.g. n_steps = 64."
        )
