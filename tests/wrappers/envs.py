"""Small deterministic envs for the wrapper tests: random episode lengths from the env's own RNG."""

from __future__ import annotations

import copy

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


def _at_bounds_sample(space: gym.Space, rng: np.random.Generator):
    """A sample of ``space`` whose bounded Box components sit on their bounds about half the time."""
    if isinstance(space, gym.spaces.Dict):
        return {k: _at_bounds_sample(s, rng) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_at_bounds_sample(s, rng) for s in space.spaces)
    x = space.sample()
    if isinstance(space, gym.spaces.Box):
        pick = rng.integers(0, 4, size=x.shape)
        x = np.where((pick == 1) & np.isfinite(space.low), space.low, x)
        x = np.where((pick == 2) & np.isfinite(space.high), space.high, x).astype(space.dtype)
    return x


class SpaceEnv(gym.Env):
    """Observations of any space, half of them on the Box bounds; ``last_obs`` is what it returned last
    (an independent record of each sub-env's own observation)."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention
    dt = 0.1

    def __init__(self, space: gym.Space, p_end: float = 0.2) -> None:
        # a copy: the space's own RNG draws the observations, and sub-envs must not share one stream
        self.observation_space = copy.deepcopy(space)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.p_end = p_end
        self.last_obs = None

    def _obs(self):
        self.last_obs = _at_bounds_sample(self.observation_space, self.np_random)
        return self.last_obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(0, 2**31)))
        self.t = 0
        return self._obs(), {"t": self.t}

    def step(self, action):
        self.t += 1
        terminated = bool(self.np_random.random() < self.p_end)
        return self._obs(), 0.0, terminated, False, {"t": self.t}


def _to_torch(obs):
    import torch

    if isinstance(obs, dict):
        return {k: _to_torch(v) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_to_torch(v) for v in obs)
    return torch.as_tensor(np.asarray(obs))


class TorchSpaceVecEnv(gym.vector.VectorEnv):
    """A natively batched torch env (NEXT_STEP) over :class:`SpaceEnv` sub-envs: every observation leaf a
    torch tensor, Dict observations in the sub-env's own key order (not the space's sorted order)."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}  # noqa: RUF012
    dt = 0.1

    def __init__(self, space: gym.Space, num_envs: int, key_order: list[str] | None = None) -> None:
        self.inner = gym.vector.SyncVectorEnv([lambda: SpaceEnv(space) for _ in range(num_envs)])
        self.envs = self.inner.envs
        self.num_envs = num_envs
        self.single_observation_space = space
        self.observation_space = self.inner.observation_space
        self.single_action_space = self.inner.single_action_space
        self.action_space = self.inner.action_space
        self.key_order = key_order

    def _convert(self, obs):
        obs = _to_torch(obs)
        if self.key_order is not None:
            obs = {k: obs[k] for k in self.key_order}
        return obs

    def reset(self, *, seed=None, options=None):
        obs, info = self.inner.reset(seed=seed, options=options)
        return self._convert(obs), info

    def step(self, actions):
        obs, r, te, tr, info = self.inner.step(np.asarray(actions))
        import torch

        return self._convert(obs), torch.as_tensor(r), torch.as_tensor(te), torch.as_tensor(tr), info
