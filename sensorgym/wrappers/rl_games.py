"""rl_games: observations as ``{"obs": policy, "states": critic}`` for a central value network.

:class:`RlGamesVecEnv` is an rl_games ``IVecEnv``; ``get_env_info()`` reports the ``"critic"`` space as
``state_space``, which rl_games' ``central_value_config`` needs. :func:`register` makes it available by
name to rl_games' ``Runner``.

Example:
    >>> import sensorgym as sg
    >>> from sensorgym.envs import BatchedPendulumEnv
    >>> from sensorgym.wrappers import SensorObservation
    >>> from sensorgym.wrappers.rl_games import RlGamesVecEnv
    >>> env = RlGamesVecEnv(SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"),
    ...                     {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.01)}))
    >>> obs = env.reset()
    >>> sorted(obs), env.get_env_info()["state_space"].shape
    (['obs', 'states'], (5,))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from gymnasium.vector import VectorEnv
from rl_games.common import env_configurations, vecenv
from rl_games.common.ivecenv import IVecEnv

from .adapters import SameStepStepper

__all__ = ["RlGamesVecEnv", "register"]


class RlGamesVecEnv(IVecEnv):
    """rl_games vector env over a Gymnasium vector env with a ``{"policy", "critic"}`` observation."""

    def __init__(self, venv: VectorEnv, device: str | torch.device | None = None) -> None:
        self._stepper = SameStepStepper(venv, "RlGamesVecEnv", device)
        self.venv = venv

    @staticmethod
    def _split(obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"obs": obs["policy"], "states": obs["critic"]}

    def reset(self) -> dict[str, torch.Tensor]:
        return self._split(self._stepper.reset())

    def step(self, actions: Any):
        a = actions if torch.is_tensor(actions) else torch.as_tensor(actions)
        obs, rewards, term, trunc, _ = self._stepper.step(a.reshape(self.venv.num_envs, -1))
        infos = {"time_outs": trunc & ~term}
        return self._split(obs), rewards, (term | trunc), infos

    def get_number_of_agents(self) -> int:
        return 1

    def get_env_info(self) -> dict[str, Any]:
        space = self.venv.single_observation_space
        return {
            "action_space": self.venv.single_action_space,
            "observation_space": space["policy"],
            "state_space": space["critic"],
            "agents": 1,
            "value_size": 1,
        }


def register(name: str, make_env: Callable[..., VectorEnv]) -> None:
    """Register ``make_env(**env_config)`` under ``name`` for rl_games (``params.config.env_name``)."""
    vecenv.register(name, lambda config_name, num_actors, **kwargs: RlGamesVecEnv(make_env(**kwargs)))
    env_configurations.register(name, {"vecenv_type": name, "env_creator": make_env})
