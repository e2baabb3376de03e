"""The Ant reference env: the policy sees only IMU, foot contacts and encoders; the critic sees their
ground truth and the full state. Sync, Async and SB3 paths."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import sensorgym.envs  # noqa: F401 - registers the ids
from sensorgym.envs.ant import ANT_JOINTS


def test_single_env_layout_and_physics():
    env = gym.make("sensorgym/AntSensors-v0", seed=0)
    obs, _ = env.reset(seed=0)
    assert obs["policy"].shape == (9 + 4 + 8,) and obs["critic"].shape == (21 + 105,)
    for _ in range(80):  # zero torque: it drops onto its feet and comes to rest within ~4 s
        obs, *_ = env.step(np.zeros(8, np.float32))
    ant = env.unwrapped
    sensors = env.get_wrapper_attr("sensors")
    # standing still on its feet: the IMU reads about +g along the torso's up axis, feet touch
    acc = sensors["imu"].read_ground_truth().lin_acc[0].numpy()
    up = ant.data.xmat[1].reshape(3, 3).T @ np.array([0, 0, 9.81])
    np.testing.assert_allclose(acc, up, atol=0.05)
    feet = [sensors[f"foot_{i}"].read_ground_truth().item() for i in range(4)]
    assert all(feet)
    # encoders: GT equals the joint positions, the measured reading sits on the 4096-tick grid
    qpos = ant.data.qpos[7:15]
    np.testing.assert_allclose(sensors["encoders"].read_ground_truth()[0].numpy(), qpos, atol=1e-6)
    assert len(ANT_JOINTS) == 8
    # the critic's tail is the env's own observation
    np.testing.assert_allclose(obs["critic"][21:], ant._get_obs(), atol=1e-5)


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_vector_forms(vectorization):
    envs = gym.make_vec("sensorgym/AntSensors-v0", num_envs=2, vectorization=vectorization, seed=0)
    obs, _ = envs.reset(seed=0)
    assert obs["policy"].shape == (2, 21)
    for _ in range(3):
        obs, *_ = envs.step(envs.action_space.sample())
        assert obs in envs.observation_space
    envs.close()


def test_sb3_path():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv

    envs = gym.make_vec("sensorgym/AntSensors-v0", num_envs=2, autoreset_mode="SameStep", seed=0)
    model = PPO(AsymmetricActorCriticPolicy, SB3VecEnv(envs), n_steps=16, batch_size=32, n_epochs=1, seed=0)
    model.learn(32)
    envs.close()
