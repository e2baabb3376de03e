"""A trained run's policy, driven outside SB3's ``VecEnv`` (``sensorgym inspect --model``).

The actor must see observations exactly as in training and evaluation: normalized with the run's
``VecNormalize`` statistics (``vecnormalize.pkl``), in the shape it was trained on. The critic input is
never read by the actor, so it is blanked to the trained shape (a config may change what the critic sees).

Example:
    >>> from sensorgym.app.saved_policy import SavedPolicy
    >>> SavedPolicy  # doctest: +ELLIPSIS
    <class '...SavedPolicy'>
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from .config import UserError

__all__ = ["SavedPolicy"]


class SavedPolicy:
    """``predict(obs)`` of the model in ``run_dir`` on raw sensor observations (a ``{"policy", "critic"}``
    batch), as the run's own evaluation feeds it."""

    def __init__(self, run_dir: str | Path, config_name: str = "the config") -> None:
        from stable_baselines3 import PPO

        run_dir = Path(run_dir)
        self.run_dir, self.config_name = run_dir, config_name
        self.model = PPO.load(run_dir / "model.zip", device="cpu")
        self.vecnormalize: Any = None
        if (run_dir / "vecnormalize.pkl").exists():
            with open(run_dir / "vecnormalize.pkl", "rb") as f:
                self.vecnormalize = pickle.load(f)  # its statistics only: normalize_obs needs no env

    def predict(self, obs: dict, deterministic: bool = True) -> tuple[np.ndarray, Any]:
        spaces = self.model.observation_space
        policy = np.asarray(obs["policy"], dtype=np.float32)
        want, got = spaces["policy"].shape, policy.shape[1:]
        if want != got:
            raise UserError(
                f"{self.config_name}: its policy sensors give observations of shape {got}, the model in "
                f"{self.run_dir} was trained on {want}. Fix: inspect with the run's own config "
                f"(--config {self.run_dir / 'config.json'}) or one that changes only imperfection levels."
            )
        batch = {"policy": policy, "critic": np.zeros((len(policy), *spaces["critic"].shape), np.float32)}
        if self.vecnormalize is not None:
            batch = self.vecnormalize.normalize_obs(batch)
        return self.model.predict(batch, deterministic=deterministic)
