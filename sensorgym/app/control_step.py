"""The control step an env gives itself: what a config's ``[env] dt`` must agree with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["own_control_step"]


def own_control_step(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> float | None:
    """The control step (s) the env ``env_id`` built with ``env_kwargs`` gives itself (its ``dt``, e.g.
    a MuJoCo env's ``frame_skip`` x model timestep, or ``metadata["dt"]``), or ``None`` when it gives none
    (CartPole): then a config must set ``[env] dt``.

    Example:
        >>> own_control_step("Pendulum-v1"), own_control_step("CartPole-v1")
        (0.05, None)
    """
    import gymnasium as gym

    from .. import envs as _register  # noqa: F401  (registers sensorgym/... ids)
    from ..wrappers.common import env_control_step

    env = gym.make(env_id, **dict(env_kwargs or {}))
    try:
        return env_control_step(env)
    finally:
        env.close()
