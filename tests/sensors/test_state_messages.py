"""Issue 33 items 5 and 17a: a StateSensor's shape and key mistakes get a message with the fix.

``shape`` is the shape of one reading, after ``index``: ``shape=(3,), index=[0, 2]`` on a (3,) state
used to say only that the per-env shape is (2,); ``key="observation"`` got no "did you mean 'obs'".
"""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

import sensorgym as sg
from sensorgym.wrappers import SensorObservation


def test_shape_given_as_the_states_shape_names_index_and_the_fix():
    mgr = sg.SensorManager(num_envs=2, dt=0.1)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(3,), index=[0, 2]), name="s")
    with pytest.raises(ValueError) as e:
        mgr.reset({"x": torch.zeros(2, 3)})
    msg = str(e.value)
    assert "index=[0, 2] picks 2 of the values of state['x'] (per-env shape (3,))" in msg
    assert "Fix: pass shape=(2,) or leave shape out" in msg
    assert "\n" not in msg


def test_shape_mismatch_without_index_names_the_fix():
    mgr = sg.SensorManager(num_envs=2, dt=0.1)
    mgr.add_sensor(sg.StateSensorOptions(key="x", shape=(4,)), name="s")
    with pytest.raises(ValueError, match=r"state\['x'\] has per-env shape \(3,\).*Fix: pass shape=\(3,\)"):
        mgr.reset({"x": torch.zeros(2, 3)})


def test_a_changed_entry_shape_names_the_fix():
    mgr = sg.SensorManager(num_envs=2, dt=0.1)
    mgr.add_sensor(sg.StateSensorOptions(key="x"), name="s")
    mgr.reset({"x": torch.zeros(2, 3)})
    with pytest.raises(ValueError, match=r"needs 3\. Fix: hand over state\['x'\] with the shape it had"):
        mgr.step({"x": torch.zeros(2, 4)})


def test_a_misspelled_key_suggests_the_known_one_in_the_manager():
    mgr = sg.SensorManager(num_envs=2, dt=0.1)
    mgr.add_sensor(sg.StateSensorOptions(key="observation", shape=(3,)), name="s")
    with pytest.raises(ValueError, match=r"no key 'observation'.*Fix: did you mean 'obs'\?"):
        mgr.reset({"obs": torch.zeros(2, 3)})


def test_a_misspelled_key_suggests_obs_through_the_wrapper():
    envs = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(
        ValueError, match=r"state\['observation'\].*Fix: did you mean 'obs'\? or, if it is an"
    ):
        SensorObservation(envs, {"x": sg.StateSensorOptions(key="observation")})
    envs.close()
