"""Shared plumbing of the RL-library adapters (rsl_rl, skrl, rl_games).

Those libraries expect the observation after a finished episode to be the reset observation of the next
one (same-step autoreset). :class:`SameStepStepper` provides exactly that from a Gymnasium vector env in
``SAME_STEP`` mode (native) or ``DISABLED`` mode (it resets finished envs with ``reset_mask``), and hands
everything over as torch tensors on one device.

Example:
    >>> import gymnasium as gym, sensorgym as sg, torch
    >>> from sensorgym.wrappers import make_sensor_vec
    >>> from sensorgym.wrappers.adapters import SameStepStepper
    >>> envs = make_sensor_vec("Pendulum-v1", 2, {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])},
    ...                        autoreset_mode="SameStep", seed=0)
    >>> stepper = SameStepStepper(envs, "example")
    >>> obs = stepper.reset(seed=0)
    >>> obs["policy"].dtype, obs["critic"].shape
    (torch.float32, torch.Size([2, 5]))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

__all__ = ["SameStepStepper", "to_torch"]


def to_torch(x: Any, device: torch.device, dtype: torch.dtype | None = None) -> Any:
    if isinstance(x, Mapping):
        return {k: to_torch(v, device, dtype) for k, v in x.items()}
    t = x if torch.is_tensor(x) else torch.as_tensor(np.asarray(x))
    return t.to(device=device, dtype=dtype) if dtype is not None else t.to(device)


class SameStepStepper:
    """Drive a ``SAME_STEP`` or ``DISABLED`` vector env as a same-step autoreset env, in torch."""

    def __init__(self, venv: VectorEnv, who: str, device: str | torch.device | None = None) -> None:
        mode = AutoresetMode(venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        if mode is AutoresetMode.NEXT_STEP:
            raise ValueError(
                f"{who}: the env resets in NEXT_STEP mode, which would feed the learner a fake transition "
                "into every reset observation. Fix: build it with autoreset_mode=AutoresetMode.SAME_STEP "
                "(or DISABLED)."
            )
        self.venv, self.mode = venv, mode
        if device is None:
            device = getattr(venv.unwrapped, "device", None) or "cpu"
        self.device = torch.device(device)
        self._numpy_actions = not hasattr(venv.unwrapped, "device")

    def reset(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        obs, _ = self.venv.reset(seed=seed)
        return to_torch(obs, self.device)

    def step(self, actions: torch.Tensor):
        """``obs, reward, terminated, truncated, info`` as tensors; ``obs`` of finished envs is the reset
        observation of their next episode."""
        a = actions.detach().cpu().numpy() if self._numpy_actions else actions
        obs, rewards, terminated, truncated, info = self.venv.step(a)
        term = to_torch(terminated, self.device, torch.bool)
        trunc = to_torch(truncated, self.device, torch.bool)
        if self.mode is AutoresetMode.DISABLED:
            done = (term | trunc).cpu().numpy()
            if done.any():
                obs, _ = self.venv.reset(options={"reset_mask": done.copy()})
        return (to_torch(obs, self.device), to_torch(rewards, self.device, torch.float32), term, trunc, info)
