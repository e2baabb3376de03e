"""The final score's episodes: each env contributes its first episodes, spread evenly over the envs (as
SB3's ``evaluate_policy``), so episodes that end sooner are not over-represented."""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np

import sensorgym as sg
from sensorgym.app.training import evaluate, make_training_env


class _FixedLength(gym.Env):
    """Reward 1 per step; every episode of a sub-env lasts 2 steps if its first seed is even, else 40."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    metadata: ClassVar[dict] = {"dt": 0.05}
    length: int | None = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.length is None:
            self.length = 2 if (seed or 0) % 2 == 0 else 40
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= self.length, False, {}


class _Zero:
    def predict(self, obs, deterministic=True):
        return np.zeros((len(obs["policy"]), 1), np.float32), None


def test_each_env_contributes_its_first_episodes():
    env_id = "sensorgym-test/FixedLength-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=_FixedLength)
    env = make_training_env(env_id, {"x": sg.StateSensorOptions(key="obs", index=[0])}, n_envs=2, seed=0)
    # env 0 ends every 2 steps, env 1 every 40: the first 4 episodes to finish would all be env 0's (mean 2)
    returns = evaluate(_Zero(), env, 4)
    env.close()
    assert sorted(returns) == [2.0, 2.0, 40.0, 40.0]
    assert np.mean(returns) == 21.0


def test_a_learning_curve_point_scores_the_policy_trained_on_its_steps(monkeypatch):
    """The point at n steps is taken after the update on those n steps (it was taken mid-rollout, before
    the update, so every point showed the policy of one rollout earlier)."""
    import sensorgym.app.training as training

    seen = []
    real = training.evaluate

    def spy(model, env, episodes, deterministic=True):
        seen.append((model.num_timesteps, model._n_updates))
        return real(model, env, episodes, deterministic)

    monkeypatch.setattr(training, "evaluate", spy)
    from sensorgym.app.config import AlgorithmConfig, Config, EnvConfig

    cfg = Config(
        sensors={"angle": sg.StateSensorOptions(key="obs", index=[0, 1])},
        env=EnvConfig(id="Pendulum-v1", n_envs=2),
        algorithm=AlgorithmConfig(
            timesteps=512,
            seed=0,
            eval_episodes=1,
            eval_every=128,
            kwargs={"n_steps": 64, "batch_size": 64, "n_epochs": 1},
        ),
    )
    result = training.train_ppo(cfg)
    points = seen[:-1]  # the last call is the final score
    assert [steps for steps, _ in points] == [128, 256, 384]
    assert all(updates == steps // 128 for steps, updates in points)  # one epoch per 128-step rollout
    assert [steps for steps, _ in result["eval_history"]] == [128, 256, 384]
