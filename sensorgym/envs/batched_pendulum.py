"""``BatchedPendulumEnv``: Gymnasium's pendulum swing-up as one natively batched torch ``VectorEnv``.

Same dynamics, reward, observation ``[cos θ, sin θ, θ̇]`` and 200-step time limit as ``Pendulum-v1``, for
any number of envs on any device, with no Python work per env. It exercises sensorgym's torch path
(torch observations in, torch observations out, on the env's device, no host-device sync per step) and
large batches. The privileged state ``[θ, θ̇]`` is in ``info["state"]``.

Example:
    >>> import torch
    >>> from sensorgym.envs import BatchedPendulumEnv
    >>> env = BatchedPendulumEnv(num_envs=3, device="cpu")
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, info["state"].shape, env.metadata["autoreset_mode"].value
    (torch.Size([3, 3]), torch.Size([3, 2]), 'NextStep')
    >>> obs, reward, terminated, truncated, info = env.step(torch.zeros(3, 1))
    >>> reward.shape, truncated.dtype
    (torch.Size([3]), torch.bool)
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

__all__ = ["BatchedPendulumEnv"]

MAX_SPEED, MAX_TORQUE = 8.0, 2.0


class BatchedPendulumEnv(VectorEnv):
    """A batch of pendulums in torch; see the module docstring.

    Args:
        num_envs: batch size.
        device: torch device of every tensor the env returns.
        max_episode_steps: truncation horizon (200 like ``Pendulum-v1``).
        autoreset_mode: ``"NextStep"`` (default), ``"SameStep"`` (``info["final_obs"]`` is a batched tensor
            with ``info["_final_obs"]``) or ``"Disabled"`` (reset finished envs with
            ``reset(options={"reset_mask": mask})``).
        g: gravity.
    """

    dt = 0.05

    def __init__(
        self,
        num_envs: int = 1,
        device: str | torch.device = "cpu",
        max_episode_steps: int = 200,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        g: float = 10.0,
    ) -> None:
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.max_episode_steps = int(max_episode_steps)
        self.g = float(g)
        self.metadata = {"autoreset_mode": AutoresetMode(autoreset_mode), "render_modes": []}
        high = np.array([1.0, 1.0, MAX_SPEED], dtype=np.float32)
        self.single_observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        self.single_action_space = gym.spaces.Box(-MAX_TORQUE, MAX_TORQUE, (1,), dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._gen = torch.Generator(device=self.device)
        self._gen.seed()
        f32 = dict(dtype=torch.float32, device=self.device)
        self.theta = torch.zeros(self.num_envs, **f32)
        self.theta_dot = torch.zeros(self.num_envs, **f32)
        self.steps = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self._autoreset = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self._done = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    # -- helpers ---------------------------------------------------------------------------------------
    def _obs(self) -> torch.Tensor:
        return torch.stack([torch.cos(self.theta), torch.sin(self.theta), self.theta_dot], dim=1)

    def _info(self) -> dict[str, torch.Tensor]:
        return {"state": torch.stack([self.theta, self.theta_dot], dim=1)}

    def _reset_rows(self, rows: torch.Tensor) -> None:
        """Fresh initial states (θ ~ U[-π, π), θ̇ ~ U[-1, 1)) where ``rows``; draws for all envs."""
        new_theta = torch.rand(self.num_envs, generator=self._gen, device=self.device) * 2 * math.pi - math.pi
        new_dot = torch.rand(self.num_envs, generator=self._gen, device=self.device) * 2 - 1
        self.theta = torch.where(rows, new_theta, self.theta)
        self.theta_dot = torch.where(rows, new_dot, self.theta_dot)
        self.steps = torch.where(rows, torch.zeros_like(self.steps), self.steps)
        self._done = self._done & ~rows

    def _as_mask(self, mask: Any) -> torch.Tensor:
        m = torch.as_tensor(np.asarray(mask) if not torch.is_tensor(mask) else mask, device=self.device)
        if m.dtype != torch.bool or m.shape != (self.num_envs,):
            raise ValueError(
                f"reset_mask must be a bool array of shape ({self.num_envs},), got {tuple(m.shape)} {m.dtype}"
            )
        return m

    # -- gymnasium API -----------------------------------------------------------------------------------
    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        if seed is not None:
            self._gen.manual_seed(int(seed if isinstance(seed, int) else seed[0]))
        rows = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        if options and "reset_mask" in options:
            rows = self._as_mask(options.pop("reset_mask"))
        self._reset_rows(rows)
        self._autoreset = self._autoreset & ~rows
        return self._obs(), self._info()

    def step(self, actions: Any):
        u = torch.as_tensor(
            np.asarray(actions) if not torch.is_tensor(actions) else actions,
            dtype=torch.float32,
            device=self.device,
        ).reshape(self.num_envs)
        mode = self.metadata["autoreset_mode"]
        if mode is AutoresetMode.DISABLED and bool(self._done.any()):
            raise RuntimeError(
                "BatchedPendulumEnv: step() on finished envs with autoreset disabled; "
                "call reset(options={'reset_mask': mask}) first."
            )
        u = u.clamp(-MAX_TORQUE, MAX_TORQUE)
        th, thdot = self.theta, self.theta_dot
        angle = torch.remainder(th + math.pi, 2 * math.pi) - math.pi
        cost = angle**2 + 0.1 * thdot**2 + 0.001 * u**2
        new_dot = (thdot + (3 * self.g / 2 * torch.sin(th) + 3.0 * u) * self.dt).clamp(-MAX_SPEED, MAX_SPEED)
        self.theta = th + new_dot * self.dt
        self.theta_dot = new_dot
        self.steps = self.steps + 1
        reward = -cost
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        truncated = self.steps >= self.max_episode_steps
        info: dict[str, Any] = {}
        if mode is AutoresetMode.NEXT_STEP:
            # envs that finished last step restart now: reset obs, zero reward, action ignored
            restart = self._autoreset
            self._reset_rows(restart)
            reward = torch.where(restart, torch.zeros_like(reward), reward)
            truncated = truncated & ~restart
            self._autoreset = terminated | truncated
        elif mode is AutoresetMode.SAME_STEP:
            done = terminated | truncated
            info["final_obs"] = self._obs()
            info["_final_obs"] = done
            info["final_info"] = self._info()
            self._reset_rows(done)
        else:
            self._done = terminated | truncated
        info.update(self._info())
        return self._obs(), reward, terminated, truncated, info
