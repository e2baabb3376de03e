"""Issue 35 item 4: the reference env whose policy reads the estimated projected gravity
(``sensorgym/AntAttitude-v0``): its layout, the estimate against MuJoCo's orientation on the settled Ant,
the example config that describes the same sensors, the vector forms, and SB3's own PPO entry point with
a checkpoint that resumes the estimator's state bit for bit."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import sensorgym.envs  # noqa: F401 - registers the ids
from sensorgym.envs.ant import ant_attitude_sensors

ROOT = Path(__file__).resolve().parents[2]


def test_layout_rate_and_the_estimate_on_the_settled_ant():
    env = gym.make("sensorgym/AntAttitude-v0", seed=0)
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.dt == pytest.approx(0.02)  # 50 Hz: frame_skip 2
    # policy: projected gravity 3 + rate 3 + encoders 8 + feet 4; critic: their truth + Ant's 105
    assert obs["policy"].shape == (18,) and obs["critic"].shape == (18 + 105,)
    for _ in range(400):  # zero torque: it drops onto its feet and rests; the estimate converges
        obs, *_ = env.step(np.zeros(8, np.float32))
    imu = env.get_wrapper_attr("sensors")["imu"]
    ant = env.unwrapped
    true = ant.data.xmat[ant.model.body("torso").id].reshape(3, 3).T @ np.array([0.0, 0.0, -1.0])
    np.testing.assert_allclose(imu.read_ground_truth().projected_gravity[0].numpy(), true, atol=1e-6)
    est = imu.read().projected_gravity[0].numpy().astype(np.float64)
    tilt = np.degrees(np.arccos(np.clip(est @ true, -1, 1)))
    # at rest, Mahony's error is the gyro bias over kp (0.01 rad/s / >= 0.3 /s: <= 2 deg, shrinking as
    # its integral learns the bias) plus the accelerometer's bias (0.05 / 9.81 rad: 0.3 deg)
    assert 0.0 < tilt < 2.5, tilt
    assert np.allclose(obs["policy"][:3], est, atol=1e-6)  # the policy reads the estimate (delay 1 step)


def test_the_example_config_describes_the_same_sensors_and_rate():
    from sensorgym.app.config import load_config

    cfg = load_config(ROOT / "examples" / "configs" / "ant_attitude.toml")
    assert cfg.sensors == ant_attitude_sensors()
    assert cfg.env.id == "Ant-v5" and cfg.env.kwargs == {"frame_skip": 2}


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_vector_forms(vectorization):
    envs = gym.make_vec("sensorgym/AntAttitude-v0", num_envs=2, vectorization=vectorization, seed=0)
    obs, _ = envs.reset(seed=0)
    assert obs["policy"].shape == (2, 18)
    for _ in range(3):
        obs, *_ = envs.step(envs.action_space.sample())
        assert obs in envs.observation_space
        g = obs["critic"][:, :3]  # the true projected gravity: unit vectors
        np.testing.assert_allclose(np.linalg.norm(g, axis=1), 1.0, atol=1e-5)
    envs.close()


def test_sb3_ppo_trains_and_a_checkpoint_resumes_the_estimator_bit_for_bit(tmp_path):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv
    from sensorgym.integrations.sb3_checkpoint import load_checkpoint, save_checkpoint

    def make():
        envs = gym.make_vec("sensorgym/AntAttitude-v0", num_envs=2, autoreset_mode="SameStep", seed=0)
        return SB3VecEnv(envs)

    def model_for(env):
        return PPO(
            AsymmetricActorCriticPolicy, env, n_steps=16, batch_size=32, n_epochs=1, seed=0, device="cpu",
            policy_kwargs=dict(net_arch=[16]),
        )  # fmt: skip

    env = make()
    model = model_for(env)
    model.learn(32)
    save_checkpoint(tmp_path, model, env)
    model.learn(64, reset_num_timesteps=False)
    reference = {k: v.clone() for k, v in model.get_parameters()["policy"].items()}
    estimate = env.venv.sensors["imu"].read().projected_gravity.clone()

    fresh = make()
    resumed, resumed_env = load_checkpoint(tmp_path, fresh)
    resumed.learn(64, reset_num_timesteps=False)
    after = resumed.get_parameters()["policy"]
    for k in reference:
        assert torch.equal(after[k], reference[k]), k
    assert torch.equal(resumed_env.venv.sensors["imu"].read().projected_gravity, estimate)
    env.close()
    fresh.close()
