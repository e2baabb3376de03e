"""ThermalEnv: the press force the action sets, seeded resets, registration, Sync/Async vector envs
observed through the temperature grid (autoreset and partial resets), and a few PPO steps via SB3."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from sensorgym.envs.thermal import MAX_EPISODE_STEPS, ThermalEnv, register, thermal_sensors  # noqa: E402
from sensorgym.sensors.mujoco.base import state_key  # noqa: E402
from sensorgym.sensors.mujoco.temperature import TemperatureGridSensor  # noqa: E402
from sensorgym.wrappers import make_sensor_vec  # noqa: E402

register()

PLATE_CELLS = 8 * 4


def test_spaces_dt_and_seeded_resets():
    from gymnasium.utils.env_checker import check_env

    env = ThermalEnv()
    check_env(env, skip_render_check=True)
    a, _ = env.reset(seed=3)
    b, _ = ThermalEnv().reset(seed=3)
    c, _ = env.reset(seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.float32 and a in env.observation_space and a[1] == 0.0
    assert -0.03 <= a[0] <= 0.03  # starts clear of the plate (it touches at -0.06)
    assert env.dt == pytest.approx(0.05)
    assert env.reset(seed=3)[1]["contact_force"] == 0.0


@pytest.mark.parametrize("action", [-1.0, -0.5, 0.0, 0.5, 1.0])
def test_the_action_sets_the_press_force_and_the_reward(action):
    env = ThermalEnv(target_force=20.0)
    env.reset(seed=0)
    for _ in range(30):
        obs, reward, terminated, truncated, info = env.step(np.array([action], np.float32))
    kp = float(env.model.actuator_gainprm[0, 0])
    weight = float(env.model.body_mass[2]) * 9.81
    lo, hi = env.model.actuator_ctrlrange[0]
    target = lo + (action + 1) / 2 * (hi - lo)
    touch = -0.06  # the heater's lower face on the plate's upper face
    expected = max(0.0, kp * (touch - target) + weight)
    if target < touch + weight / kp:  # the servo cannot hold the weight above the plate: it rests on it
        assert info["contact_force"] == pytest.approx(expected, abs=0.05)
        assert obs[0] == pytest.approx(touch, abs=1e-3)
    else:
        assert info["contact_force"] == 0.0
        assert obs[0] == pytest.approx(target - weight / kp, abs=1e-3)  # hangs on the servo spring
    assert reward == pytest.approx(-abs(info["contact_force"] - 20.0) / 20.0)
    assert not terminated and not truncated
    # the sensor sees the same force, spread over the cells under the heater's corners
    o = thermal_sensors()["plate_temperature"]
    heat = TemperatureGridSensor._extract_state(env, [o])[state_key(o)]
    assert heat.sum() == pytest.approx(info["contact_force"], rel=1e-4, abs=1e-6)


def test_registration_is_idempotent_and_truncates_after_200_steps():
    register()
    env = gym.make("sensorgym/Thermal-v0")
    assert env.spec.max_episode_steps == MAX_EPISODE_STEPS == 200
    env.reset(seed=0)
    for t in range(1, MAX_EPISODE_STEPS + 1):
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        assert truncated == (t == MAX_EPISODE_STEPS) and not terminated
    single = gym.make("sensorgym/ThermalSensors-v0", seed=0)
    obs, _ = single.reset(seed=0)
    # policy: 8 x 4 plate cells + the height encoder; critic: their ground truth + [q, q̇]
    assert obs["policy"].shape == (PLATE_CELLS + 1,) and obs["critic"].shape == (PLATE_CELLS + 1 + 2,)
    np.testing.assert_array_equal(obs["critic"][:PLATE_CELLS], 20.0)


def _run(mode, steps=12, n=3):
    envs = make_sensor_vec(
        "sensorgym/Thermal-v0",
        n,
        thermal_sensors(),
        vectorization_mode=mode,
        env_kwargs={"max_episode_steps": 7},
        seed=0,
    )
    out = [envs.reset(seed=0)[0]]
    rng = np.random.default_rng(0)
    for _ in range(steps):
        actions = rng.uniform(-1.0, -0.3, (n, 1)).astype(np.float32)
        obs, reward, *_ = envs.step(actions)
        out.append({**obs, "reward": reward})
    envs.close()
    return out


def test_sync_and_async_vector_envs_give_the_same_readings_across_an_autoreset():
    sync, async_ = _run("sync"), _run("async")
    for a, b in zip(sync, async_, strict=True):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    plate = np.stack([o["critic"][:, :PLATE_CELLS] for o in sync])  # (time, env, cells)
    assert plate[7].max() > 21.0  # pressed for 7 steps
    np.testing.assert_array_equal(plate[8], 20.0)  # NEXT_STEP autoreset: the new episode's first reading
    assert plate[12].max() > 20.5


def test_a_partial_reset_through_the_wrapper_resets_only_the_masked_plates():
    envs = make_sensor_vec("sensorgym/Thermal-v0", 2, thermal_sensors(), seed=0)
    envs.reset(seed=0)
    plate = envs.sensors["plate_temperature"]
    for _ in range(10):
        envs.step(np.full((2, 1), -1.0, np.float32))
    before = plate.read_ground_truth().numpy().copy()
    assert (before.max(axis=(1, 2, 3)) > 22.0).all()
    envs.reset(options={"reset_mask": np.array([False, True])})
    after = plate.read_ground_truth().numpy()
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], 20.0)
    envs.close()


def test_a_few_ppo_steps_with_the_asymmetric_policy():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv

    envs = make_sensor_vec(
        "sensorgym/Thermal-v0",
        2,
        thermal_sensors(),
        autoreset_mode="SameStep",
        env_kwargs={"max_episode_steps": 10},
        seed=0,
    )
    vec = SB3VecEnv(envs)
    model = PPO(
        AsymmetricActorCriticPolicy,
        vec,
        n_steps=16,
        batch_size=32,
        n_epochs=1,
        seed=0,
        device="cpu",
        policy_kwargs=dict(net_arch=dict(pi=[16], vf=[16])),
    )
    model.learn(32)
    assert model.num_timesteps == 32
    assert model.policy.pi_features_extractor.features_dim == PLATE_CELLS + 1
    assert model.policy.vf_features_extractor.features_dim == 2 * (PLATE_CELLS + 1) + 2
    vec.close()
