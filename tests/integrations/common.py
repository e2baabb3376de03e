"""Shared pieces of the per-library integration tests: a small env whose episodes are truncated often,
and forward-hook recorders."""

from __future__ import annotations

import torch
from torch import nn

import sensorgym as sg
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation

N = 8  #: envs
HORIZON = 12  #: steps per episode (the env's own time limit)
POLICY_DIM = 4  #: angle (2) x history 2
CRITIC_DIM = 5  #: GT angle (2) + env obs (3)
SENSORS = {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.02, delay=0.05, history_length=2)}
CRITIC_INPUTS = [("policy", "critic"), ("critic",)]


def sensor_env(n: int = N, horizon: int = HORIZON, seed: int = 0) -> SensorObservation:
    return SensorObservation(
        BatchedPendulumEnv(n, autoreset_mode="SameStep", max_episode_steps=horizon), SENSORS, seed=seed
    )


def critic_view(obs: dict[str, torch.Tensor], critic_input: tuple[str, ...]) -> torch.Tensor:
    """What a critic reading ``critic_input`` must receive for the batched observation ``obs``."""
    return torch.cat([torch.as_tensor(obs[k]).float().flatten(1) for k in critic_input], dim=1)


class InputRecorder:
    """Records the input (first positional argument) and output of every forward call of a module."""

    def __init__(self, module: nn.Module) -> None:
        self.inputs: list[torch.Tensor] = []
        self.outputs: list[torch.Tensor] = []
        self._handle = module.register_forward_hook(self._hook)

    def _hook(self, module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        self.inputs.append(args[0].detach().clone())
        self.outputs.append(output.detach().clone() if torch.is_tensor(output) else output)

    def remove(self) -> None:
        self._handle.remove()

    def find(self, expected: torch.Tensor) -> int | None:
        """Index of the first call whose input equals ``expected``."""
        for i, x in enumerate(self.inputs):
            if x.shape == expected.shape and torch.equal(x, expected):
                return i
        return None


def first_linear(module: nn.Module) -> nn.Linear:
    return next(m for m in module.modules() if isinstance(m, nn.Linear))
