"""Shared pieces of the per-library integration tests: a small env whose episodes are truncated often,
and forward-hook recorders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.spaces import Box, Dict, Tuple
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


LIMIT = 5  #: steps per episode of :func:`recording_env`
SENSORS_XY = {"x": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.01)}


def _valid(space: gym.Space, action: Any) -> bool:
    """In ``space``, except that a Box value may leave its bounds (a Gaussian policy's actions do; the env
    clips them), but not its shape or dtype."""
    if isinstance(space, Box):
        action = np.asarray(action)
        return action.shape == space.shape and action.dtype == space.dtype
    if isinstance(space, Dict):
        return (
            isinstance(action, dict)
            and action.keys() == space.keys()
            and all(_valid(space[k], action[k]) for k in space)
        )
    if isinstance(space, Tuple):
        return isinstance(action, tuple) and all(_valid(s, a) for s, a in zip(space, action, strict=True))
    return space.contains(action)


class _Recorder(gym.Env):
    """Asserts that every action is in its action space (as Gymnasium's CartPole does) and records it."""

    observation_space = Box(-10, 10, (3,), np.float32)
    metadata = {"render_fps": 20}  # noqa: RUF012 (Gymnasium reads it as a class attribute)

    def __init__(self, action_space: gym.Space) -> None:
        self.action_space = action_space
        self.actions: list[Any] = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        assert _valid(self.action_space, action), f"{action!r} invalid"
        self.actions.append(action)
        self.t += 1
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), float(self.t), False, False, {}


def recording_env(space: gym.Space, n: int = 4) -> SensorObservation:
    """A Sync vector env (SAME_STEP) of ``n`` :class:`_Recorder` envs with a time limit of ``LIMIT`` steps."""
    venv = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.TimeLimit(_Recorder(space), LIMIT) for _ in range(n)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    return SensorObservation(venv, SENSORS_XY, dt=0.05, seed=0)


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


def rl_games_params(
    train_dir: Path,
    env_name: str,
    num_actors: int = N,
    *,
    horizon: int = 16,
    gamma: float = 0.9,
    seed: int = 7,
) -> dict:
    """rl_games ``params`` for a small continuous A2C with a central value net (the standard ``Runner``
    config layout; the tests that build ``A2CAgent`` directly add ``vec_env``/``env_info`` to ``config``)."""
    mlp = {"units": [16], "activation": "elu", "initializer": {"name": "default"}}
    return {
        "seed": seed,
        "algo": {"name": "a2c_continuous"},
        "model": {"name": "continuous_a2c_logstd"},
        "network": {
            "name": "actor_critic",
            "separate": False,
            "space": {
                "continuous": {
                    "mu_activation": "None",
                    "sigma_activation": "None",
                    "mu_init": {"name": "default"},
                    "sigma_init": {"name": "const_initializer", "val": 0},
                    "fixed_sigma": True,
                }
            },
            "mlp": mlp,
        },
        "config": {
            "name": "pendulum",
            "env_name": env_name,
            "env_config": {},
            "num_actors": num_actors,
            "device": "cpu",
            "device_name": "cpu",
            "torch_compile": False,
            "ppo": True,
            "value_bootstrap": True,
            "reward_shaper": {"scale_value": 1.0},
            "normalize_advantage": True,
            "normalize_input": False,
            "normalize_value": False,
            "gamma": gamma,
            "tau": 0.95,
            "learning_rate": 3e-4,
            "lr_schedule": "identity",
            "kl_threshold": 0.008,
            "score_to_win": 1e9,
            "max_epochs": 1,
            "save_best_after": 1000,
            "save_frequency": 0,
            "grad_norm": 1.0,
            "entropy_coef": 0.0,
            "truncate_grads": True,
            "e_clip": 0.2,
            "horizon_length": horizon,
            "minibatch_size": 64,
            "mini_epochs": 1,
            "critic_coef": 1.0,
            "clip_value": False,
            "bounds_loss_coef": 0.0,
            "print_stats": False,
            "train_dir": str(train_dir),
            "full_experiment_name": "run",
            "player": {"games_num": N, "deterministic": True, "print_stats": False},
            "central_value_config": {
                "minibatch_size": 64,
                "mini_epochs": 1,
                "learning_rate": 3e-4,
                "clip_value": False,
                "normalize_input": False,
                "truncate_grads": False,
                "kl_threshold": 0.008,
                "network": {"name": "actor_critic", "central_value": True, "mlp": mlp},
            },
        },
    }
