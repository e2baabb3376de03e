"""ScanEnv: dynamics, reward, termination, seeding; its sensors read the room's known geometry; Sync and
Async vector envs agree; a forked worker that cannot render says why; a few PPO steps through SB3."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from sensorgym.envs.scan import ScanEnv, register, scan_sensors
from sensorgym.sensors.mujoco.camera import DepthCameraSensor
from sensorgym.wrappers import SingleEnvSensorObservation, make_sensor_vec

EAST_WALL = 3.0  # inner face of the east wall
LIDAR_UP, LIDAR_FORWARD = 0.22, 0.05  # lidar origin above the floor / ahead of the base origin
CAMERA_FORWARD = 0.21
CLEAR_Y = -0.4  # a lane from the west to the east wall that no obstacle crosses

register()


def test_dynamics_reward_and_episode_end():
    env = ScanEnv(max_episode_steps=4)
    obs, info = env.reset(options={"pose": (-2.0, CLEAR_Y, 0.0)})
    np.testing.assert_allclose(obs, [-2.0, CLEAR_Y, 1.0, 0.0, 0.0, 0.0, 0.0], atol=1e-7)
    assert env.dt == pytest.approx(0.05) and info == {"collision": 0.0}
    x = obs[0]
    for t in range(4):
        obs, reward, terminated, truncated, info = env.step(np.array([1.0, 0.0, 0.0], np.float32))
        # progress toward +x in m/s, no collision in the free lane
        assert reward == pytest.approx((obs[0] - x) / env.dt, rel=1e-5) and info["collision"] == 0.0
        assert obs[4] > 0 and abs(obs[1] - CLEAR_Y) < 1e-6 and not terminated
        assert truncated == (t == 3)
        x = obs[0]
    assert 0.5 < obs[4] <= 1.0  # the velocity servo approaches the commanded 1 m/s
    # turning in place changes the heading only
    env.reset(options={"pose": (-2.0, CLEAR_Y, 0.0)})
    obs, *_ = env.step(np.array([0.0, 0.0, 1.0], np.float32))
    assert obs[3] > 0 and abs(obs[0] + 2.0) < 1e-6


def test_collisions_are_penalized_and_the_goal_terminates():
    env = ScanEnv()
    env.reset(options={"pose": (-2.75, CLEAR_Y, 0.0)})  # chassis 5 cm from the west wall
    for _ in range(5):  # backing into it
        before = env.data.qpos[0]
        _, reward, *_, info = env.step(np.array([-1.0, 0.0, 0.0], np.float32))
    assert info["collision"] == 1.0
    assert reward == pytest.approx((env.data.qpos[0] - before) / env.dt - 1.0, abs=1e-9)
    env.reset(options={"pose": (2.45, CLEAR_Y, 0.0)})
    terminated = False
    for _ in range(5):
        *_, terminated, _, _ = env.step(np.array([1.0, 0.0, 0.0], np.float32))
        if terminated:
            break
    assert terminated and env.data.qpos[0] >= env.goal_x


def test_seeded_resets():
    a, b = ScanEnv(), ScanEnv()
    first = a.reset(seed=3)[0]
    np.testing.assert_array_equal(first, b.reset(seed=3)[0])
    assert not np.array_equal(first, b.reset(seed=4)[0])
    assert -2.6 <= first[0] <= -2.0 and -2.2 <= first[1] <= 2.2


def test_sensors_read_the_known_room():
    env = SingleEnvSensorObservation(ScanEnv(), scan_sensors(), seed=0)
    x0 = -2.0
    env.reset(seed=0, options={"pose": (x0, CLEAR_Y, 0.0)})
    lidar = env.sensors["lidar"].read_ground_truth()
    # azimuth 0 (index 18 of 36) at elevations -15, -5, 5, 15 deg from inside the lidar's own housing
    ahead = lidar.distances[0, :, 18].numpy()
    to_wall = EAST_WALL - x0 - LIDAR_FORWARD
    down5, down15 = math.radians(5.0), math.radians(15.0)
    expected = [LIDAR_UP / math.sin(down15), LIDAR_UP / math.sin(down5), to_wall / math.cos(down5), 8.0]
    np.testing.assert_allclose(ahead, expected, atol=1e-5)  # +15 deg clears the 1 m wall: a miss (8 m)
    assert lidar.points.shape == (1, 4, 36, 3)
    depth = env.sensors["depth"].read_ground_truth()
    assert depth[0, 10, 16].item() == pytest.approx(EAST_WALL - x0 - CAMERA_FORWARD, abs=1e-4)
    image = env.sensors["camera"].read_ground_truth()
    assert image.shape == (1, 24, 32, 3) and str(image.dtype) == "torch.uint8"


def _run(envs, steps=4):
    obs, _ = envs.reset(seed=0)
    out = [obs]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, reward, *_ = envs.step(rng.uniform(-1, 1, (envs.num_envs, 3)).astype(np.float32))
        out.append({**obs, "reward": reward})
    envs.close()
    return out


def test_sync_and_async_vector_envs_agree():
    # forkserver: this test process has rendered already, and GL does not survive a plain fork
    kw = dict(seed=0, policy=["lidar", "camera", "depth"], critic=["lidar"])
    sync = _run(make_sensor_vec("sensorgym/Scan-v0", 2, scan_sensors(), **kw))
    async_ = _run(
        make_sensor_vec(
            "sensorgym/Scan-v0",
            2,
            scan_sensors(),
            vectorization_mode="async",
            vector_kwargs={"context": "forkserver"},
            **kw,
        )
    )
    assert sync[0]["policy"].shape == (2, 36 * 4 * 4 + 24 * 32 * 4) and sync[0]["critic"].shape == (
        2,
        576 + 7,
    )
    for s, a in zip(sync, async_, strict=True):
        for k in s:
            np.testing.assert_array_equal(s[k], a[k])
    assert not np.array_equal(sync[1]["policy"][0], sync[1]["policy"][1])


def test_a_forked_worker_that_cannot_render_says_why():
    parent = ScanEnv()
    parent.reset(seed=0)
    DepthCameraSensor._extract_state(parent, [scan_sensors()["depth"]])  # this process now holds GL state
    envs = make_sensor_vec(
        "sensorgym/Scan-v0", 1, scan_sensors(), vectorization_mode="async", vector_kwargs={"context": "fork"}
    )
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match=r"context.*forkserver"):
        envs.reset(seed=0)
    envs.close()


def test_registered_sensor_env_single_and_vector():
    register()  # idempotent
    env = gym.make("sensorgym/ScanSensors-v0")
    obs, _ = env.reset(seed=0)
    assert obs["policy"].shape == (36 * 4 * 4 + 24 * 32 * 4,) and obs["critic"].shape == (576 + 7,)
    assert obs in env.observation_space
    env.close()
    envs = gym.make_vec("sensorgym/ScanSensors-v0", num_envs=2)
    obs, _ = envs.reset(seed=0)
    assert obs["policy"].shape == (2, 36 * 4 * 4 + 24 * 32 * 4)
    envs.close()
    assert gym.spec("sensorgym/Scan-v0").max_episode_steps == 200


def test_a_few_ppo_steps_through_sb3():
    sb3 = pytest.importorskip("stable_baselines3")
    from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv

    envs = make_sensor_vec(
        "sensorgym/Scan-v0",
        2,
        scan_sensors(),
        autoreset_mode="SameStep",
        env_kwargs={"max_episode_steps": 5},  # episodes end inside the rollout: terminal observations
        seed=0,
        policy=["lidar", "depth"],
        critic=["lidar"],
    )
    venv = SB3VecEnv(envs)
    model = sb3.PPO(
        AsymmetricActorCriticPolicy,
        venv,
        n_steps=8,
        batch_size=16,
        n_epochs=1,
        seed=0,
        device="cpu",
        policy_kwargs=dict(net_arch=dict(pi=[16], vf=[16])),
    )
    model.learn(16)
    assert model.num_timesteps == 16
    assert model.policy.pi_features_extractor.features_dim == 36 * 4 * 4 + 24 * 32
    obs = venv.reset()
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (2, 3)
    venv.close()
