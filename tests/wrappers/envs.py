"""Small deterministic envs for the wrapper tests: random episode lengths from the env's own RNG."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class RampEnv(gym.Env):
    """obs = [episode id, t, x]; x integrates the action; terminates with probability ``p_end``."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention
    dt = 0.1

    def __init__(self, p_end: float = 0.15, max_steps: int = 25, dict_obs: bool = False) -> None:
        self.p_end, self.max_steps, self.dict_obs = p_end, max_steps, dict_obs
        box = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        if dict_obs:
            self.observation_space = gym.spaces.Dict(
                {
                    "pos": gym.spaces.Box(-10.0, 10.0, (2,), np.float32),
                    "vel": gym.spaces.Box(-np.inf, np.inf, (1,), np.float32),
                }
            )
        else:
            self.observation_space = box
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.x = 0.0

    def _obs(self):
        if self.dict_obs:
            return {
                "pos": np.array([np.clip(self.x, -10, 10), self.t / 10], np.float32),
                "vel": np.array([self.v], np.float32),
            }
        return np.array([self.episode, self.t, self.x], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.v = 0, 0.0
        self.episode = int(self.np_random.integers(0, 1000))
        self.x = float(self.np_random.normal())
        return self._obs(), {"t": self.t, "speed": self.v}

    def step(self, action):
        self.t += 1
        self.v = float(np.asarray(action).reshape(-1)[0])
        self.x += 0.1 * self.v
        terminated = bool(self.np_random.random() < self.p_end)
        truncated = self.t >= self.max_steps
        return self._obs(), 1.0, terminated, truncated, {"t": self.t, "speed": self.v}


def make_ramp(**kwargs):
    return lambda: RampEnv(**kwargs)
