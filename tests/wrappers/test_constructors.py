"""The two sensor wrappers share one constructor (wrappers/common.init_sensor_wrapper): the same keyword
arguments, recorded as given, and the same manager/sensors/layout built from them."""

from __future__ import annotations

import inspect

import gymnasium as gym
import numpy as np

import sensorgym as sg
from sensorgym.wrappers import SensorObservation, SingleEnvSensorObservation

SENSORS = {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, noise=0.01, history_length=2)}


def test_both_wrappers_take_the_same_keyword_arguments():
    vector = inspect.signature(SensorObservation.__init__).parameters
    single = inspect.signature(SingleEnvSensorObservation.__init__).parameters
    assert list(vector) == list(single)
    for name in vector:
        if name not in ("env", "device"):  # the env's type and the device's default differ
            assert vector[name].default == single[name].default, name


def test_both_wrappers_record_their_arguments_and_build_the_same_layout():
    kwargs = dict(seed=3, critic_randomization=True, policy_age=["angle"], critic_age=["angle"])
    single = SingleEnvSensorObservation(gym.make("Pendulum-v1"), SENSORS, **kwargs)
    vector = SensorObservation(gym.make_vec("Pendulum-v1", 1, vectorization_mode="sync"), SENSORS, **kwargs)
    for wrapper, device in ((single, "cpu"), (vector, None)):
        recorded = wrapper._saved_kwargs
        assert recorded["sensors"] == SENSORS and recorded["device"] == device
        assert recorded["seed"] == 3 and recorded["policy_age"] == ["angle"]
        assert wrapper.dt == 0.05 and list(wrapper.sensors) == ["angle"]
        assert wrapper.manager.num_envs == 1
    assert single.observation_space == vector.single_observation_space
    obs_single, _ = single.reset(seed=0)
    obs_vector, _ = vector.reset(seed=0)
    for key in ("policy", "critic"):
        np.testing.assert_array_equal(obs_single[key], obs_vector[key][0])
