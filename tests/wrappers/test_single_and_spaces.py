"""Single-env wrapper with the env checkers; spaces, Dict observations, info sensors, bad input."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import SyncVectorEnv

import sensorgym as sg
from sensorgym.wrappers import SensorObservation, SingleEnvSensorObservation

from .envs import RampEnv

PENDULUM_SENSORS = {
    "angle": sg.StateSensorOptions(
        key="obs", index=[0, 1], delay=0.05, jitter=0.05, noise=sg.LogUniform(0.001, 0.05), history_length=3
    ),
    "theta": sg.EnvAttributeOptions(attr="state", shape=(2,), index=[0], bias=0.01),
}


def _pendulum(**kwargs):
    return SingleEnvSensorObservation(gym.make("Pendulum-v1"), PENDULUM_SENSORS, **kwargs)


def test_gymnasium_check_env_passes():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # infinite Box bounds are honest here and only a warning
        check_env(_pendulum(seed=0, critic_randomization=True), skip_render_check=True)


def test_sb3_check_env_passes():
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sb3_checker.check_env(_pendulum(seed=0), warn=True, skip_render_check=True)


def test_single_env_observation_layout_and_bounds():
    env = _pendulum(seed=0, policy=["angle"], critic=["theta"])
    obs, _ = env.reset(seed=1)
    assert obs["policy"].shape == (6,) and obs["critic"].shape == (1 + 3,)
    assert obs["policy"].dtype == np.float32
    # noisy readings are unbounded; the GT twin of the observation keeps the env's bounds
    assert np.isinf(env.observation_space["policy"].high).all()
    assert env.observation_space["critic"].high[1:].tolist() == [1.0, 1.0, 8.0]
    theta = env.unwrapped.state[0]
    assert obs["critic"][0] == pytest.approx(theta)
    for _ in range(20):
        obs, *_ = env.step(env.action_space.sample())
        assert obs in env.observation_space


def test_bounded_sensor_keeps_bounds_widened_by_bias_and_resolution():
    env = SingleEnvSensorObservation(
        gym.make("Pendulum-v1"),
        {
            "c": sg.StateSensorOptions(
                key="obs",
                index=[0],
                bias=0.1,
                resolution=0.2,
                history_length=2,
                delay=0.05,
                padding_type="zero",
            ),
        },
        policy=["c"],
        critic=["c"],
        critic_env_obs=False,
    )
    space = env.observation_space
    # -1 + bias 0.1 - resolution 0.2 / 2, widened by a few float32 ulps of the operands (issue 11.7)
    np.testing.assert_allclose(space["policy"].low, [-1.0, -1.0], rtol=0, atol=2e-6)
    np.testing.assert_allclose(space["policy"].high, [1.2, 1.2], rtol=0, atol=2e-6)
    assert (space["policy"].low <= -1.0).all() and (space["policy"].high >= 1.2).all()
    assert space["critic"].low.tolist() == [-1.0] and space["critic"].high.tolist() == [1.0]
    env.reset(seed=0)
    for _ in range(50):
        obs, *_ = env.step(env.action_space.sample())
        assert obs in space


def test_dict_observation_env_and_info_sensor():
    sensors = {
        "pos": sg.StateSensorOptions(key="obs.pos", noise=0.1, delay=0.1),
        "vel": sg.StateSensorOptions(key="obs.vel", history_length=2),
        "speed": sg.StateSensorOptions(key="speed", shape=(1,), delay=0.1),  # an info entry
    }
    venv = SensorObservation(SyncVectorEnv([lambda: RampEnv(dict_obs=True)] * 3), sensors, seed=0)
    obs, info = venv.reset(seed=0)
    assert obs["policy"].shape == (3, 2 + 2 + 1)
    assert obs["critic"].shape == (3, 2 + 1 + 1 + 3)  # GT of each sensor, then env obs (pos 2, vel 1)
    actions = np.full((3, 1), 0.5, np.float32)
    obs, *_ = venv.step(actions)
    obs, _, _, _, info = venv.step(actions)
    np.testing.assert_array_equal(obs["critic"][:, 3], info["speed"])  # GT of the info sensor
    np.testing.assert_array_equal(obs["critic"][:, 4:6], obs["critic"][:, 0:2])  # env obs pos == GT pos
    assert "sensorgym" not in info


def test_returned_arrays_are_fresh():
    venv = SensorObservation(SyncVectorEnv([RampEnv] * 2), {"x": sg.StateSensorOptions(key="obs")})
    obs, _ = venv.reset(seed=0)
    prev = obs["policy"]
    prev_copy = prev.copy()
    obs, *_ = venv.step(np.zeros((2, 1), np.float32))
    assert not np.shares_memory(prev, obs["policy"])
    np.testing.assert_array_equal(prev, prev_copy)  # the old array was not overwritten


def test_bad_input_errors():
    make = lambda: SyncVectorEnv([RampEnv])  # noqa: E731
    with pytest.raises(TypeError, match=r"VectorEnv.*SingleEnvSensorObservation"):
        SensorObservation(gym.make("Pendulum-v1"), {"x": sg.StateSensorOptions(key="obs")})
    with pytest.raises(TypeError, match=r"non-empty mapping.*Fix"):
        SensorObservation(make(), {})
    with pytest.raises(TypeError, match=r"SensorOptions instance"):
        SensorObservation(make(), {"x": {"key": "obs"}})
    with pytest.raises(ValueError, match=r"unknown sensor names \['y'\]"):
        SensorObservation(make(), {"x": sg.StateSensorOptions(key="obs")}, policy=["y"])
    with pytest.raises(ValueError, match=r"reads state\['speed'\].*shape.*Fix"):
        SensorObservation(make(), {"s": sg.StateSensorOptions(key="speed")})
    no_dt = gym.make("CartPole-v1")
    no_dt.unwrapped.__class__ = type("NoDt", (type(no_dt.unwrapped),), {"dt": None})
    with pytest.raises(ValueError, match=r"cannot infer the control step.*Fix: pass dt="):
        SingleEnvSensorObservation(no_dt, {"x": sg.StateSensorOptions(key="obs")})
    with pytest.raises(ValueError, match=r"dt=-1.*> 0"):
        SensorObservation(make(), {"x": sg.StateSensorOptions(key="obs")}, dt=-1)


@pytest.mark.parametrize("dict_obs", [False, True])
def test_numpy_packing_equals_torch_packing(dict_obs):
    """Numpy envs get observations packed with numpy (``pack_numpy``); they must be the torch packing's
    values exactly: history order, bool readings, Dict env observations, randomized parameters."""
    from ..helpers import ThresholdOptions

    key = "obs.pos" if dict_obs else "obs"
    envs = SyncVectorEnv([lambda: RampEnv(dict_obs=dict_obs) for _ in range(3)])
    sensors = {
        "a": sg.StateSensorOptions(key=key, index=[1, 0], delay=0.1, jitter=0.1, noise=0.1, history_length=3),
        "b": sg.StateSensorOptions(key=key, index=[1], bias=sg.Uniform(-1.0, 1.0), history_length=2),
        "touch": ThresholdOptions(key=key, width=2, threshold=1.0, delay=0.1),
    }
    envs = SensorObservation(envs, sensors, seed=0, critic_randomization=True)
    assert envs._numpy_pack
    obs, _ = envs.reset(seed=0)
    fired = False
    for step in range(12):
        fired |= bool(obs["policy"][:, -2:].any())
        inner = envs._last_obs
        by_numpy = envs.layout.pack_numpy(inner)
        by_torch = envs.layout.pack(inner)
        for k in ("policy", "critic"):
            assert by_numpy[k].dtype == np.float32
            np.testing.assert_array_equal(by_numpy[k], by_torch[k].numpy())
            np.testing.assert_array_equal(obs[k], by_numpy[k])
        obs, *_ = envs.step(np.full((3, 1), 0.5 * (step % 3 - 1), np.float32))
    assert fired  # the bool (threshold) sensor read true at some point
