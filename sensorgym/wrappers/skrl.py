"""skrl (>= 2): observations and states (privileged observation) through skrl's wrapper API.

:class:`SkrlWrapper` is a skrl ``Wrapper``: ``observation_space`` is the ``"policy"`` part, and
``state_space`` / ``state()`` expose the ``"critic"`` part, which skrl's trainers pass to the agents as
``states`` (the input of a critic model).

Example:
    >>> import sensorgym as sg
    >>> from sensorgym.envs import BatchedPendulumEnv
    >>> from sensorgym.wrappers import SensorObservation
    >>> from sensorgym.wrappers.skrl import SkrlWrapper
    >>> env = SkrlWrapper(SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"),
    ...                   {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.01)}))
    >>> obs, _ = env.reset()
    >>> obs.shape, env.state().shape, env.state_space.shape
    (torch.Size([4, 2]), torch.Size([4, 5]), (5,))
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import VectorEnv
from skrl.envs.wrappers.torch.base import Wrapper

from .adapters import SameStepStepper

__all__ = ["SkrlWrapper"]


class SkrlWrapper(Wrapper):
    """skrl wrapper over a Gymnasium vector env with a ``{"policy", "critic"}`` observation."""

    def __init__(self, venv: VectorEnv, device: str | torch.device | None = None) -> None:
        super().__init__(venv)
        self._stepper = SameStepStepper(venv, "SkrlWrapper", device)
        self._device = self._stepper.device
        self._obs: dict[str, torch.Tensor] | None = None

    @property
    def observation_space(self) -> gym.Space:
        return self._env.single_observation_space["policy"]

    @property
    def state_space(self) -> gym.Space:
        return self._env.single_observation_space["critic"]

    @property
    def action_space(self) -> gym.Space:
        return self._env.single_action_space

    @property
    def num_envs(self) -> int:
        return self._env.num_envs

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        # vector envs autoreset: skrl calls reset() once at the start of training
        if self._obs is None:
            self._obs = self._stepper.reset()
        return self._obs["policy"], {}

    def step(self, actions: torch.Tensor):
        obs, rewards, term, trunc, info = self._stepper.step(actions.reshape(self.num_envs, -1))
        self._obs = obs
        n = self.num_envs
        return obs["policy"], rewards.view(n, 1), term.view(n, 1), trunc.view(n, 1), info

    def state(self) -> torch.Tensor | None:
        return None if self._obs is None else self._obs["critic"]

    def render(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def close(self) -> None:
        self._env.close()
