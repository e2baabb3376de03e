"""rsl_rl (>= 3): observations as a ``TensorDict`` of groups, and ``obs_groups`` for the runner.

The sensor observation's ``"policy"`` and ``"critic"`` keys become rsl_rl observation groups; point the
actor at ``["policy"]`` and the critic at ``["policy", "critic"]`` (:data:`OBS_GROUPS`). ``extras`` carry
``"time_outs"`` (truncations) for bootstrapping.

Example:
    >>> import sensorgym as sg
    >>> from sensorgym.envs import BatchedPendulumEnv
    >>> from sensorgym.wrappers import SensorObservation
    >>> from sensorgym.wrappers.rsl_rl import RslRlVecEnv
    >>> env = RslRlVecEnv(SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"),
    ...                   {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.01)}))
    >>> obs = env.get_observations()
    >>> sorted(obs.keys()), obs["policy"].shape
    (['critic', 'policy'], torch.Size([4, 2]))
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import VectorEnv
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from .adapters import SameStepStepper

__all__ = ["OBS_GROUPS", "RslRlVecEnv"]

#: rsl_rl ``obs_groups`` for an asymmetric actor-critic over a sensor observation
OBS_GROUPS = {"actor": ["policy"], "critic": ["policy", "critic"]}


class RslRlVecEnv(VecEnv):
    """An rsl_rl ``VecEnv`` over a Gymnasium vector env (SAME_STEP or DISABLED autoreset).

    Args:
        venv: e.g. a :class:`~sensorgym.wrappers.SensorObservation`.
        max_episode_length: episode horizon reported to rsl_rl (default: the env spec's, else 1000).
        device: device of the returned tensors (default: the env's device, else CPU).
    """

    def __init__(
        self, venv: VectorEnv, max_episode_length: int | None = None, device: str | torch.device | None = None
    ) -> None:
        self._stepper = SameStepStepper(venv, "RslRlVecEnv", device)
        self.venv = venv
        self.num_envs = venv.num_envs
        self.num_actions = gym.spaces.flatdim(venv.single_action_space)
        spec = getattr(venv, "spec", None)
        self.max_episode_length = max_episode_length or getattr(spec, "max_episode_steps", None) or 1000
        self.device = self._stepper.device
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.cfg: dict[str, Any] = {}
        self._obs = self._group(self._stepper.reset())

    def _group(self, obs: dict[str, torch.Tensor]) -> TensorDict:
        return TensorDict(dict(obs), batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._obs

    def reset(self, seed: int | None = None) -> TensorDict:
        self._obs = self._group(self._stepper.reset(seed))
        self.episode_length_buf.zero_()
        return self._obs

    def step(self, actions: torch.Tensor):
        obs, rewards, term, trunc, _ = self._stepper.step(actions.reshape(self.num_envs, -1))
        dones = term | trunc
        self.episode_length_buf += 1
        self.episode_length_buf[dones] = 0
        self._obs = self._group(obs)
        extras = {"time_outs": trunc & ~term, "log": {}}
        return self._obs, rewards, dones.long(), extras
