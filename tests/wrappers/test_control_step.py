"""A wrapper's ``dt`` is the env's own control step (issue 23 item 9, in the library).

Every delay, jitter, period and latency is converted to steps with ``dt``. A ``dt`` that contradicts the
env's own step (Pendulum-v1: 0.05 s) would silently give other delays in seconds than asked for (0.1 s at
``dt=0.02`` becomes 5 steps = 0.25 s), so each entry point refuses it in one line naming both; a ``dt``
equal to the env's own, or given for an env without one (CartPole), is accepted.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import sensorgym as sg
from sensorgym.wrappers import ActionLatency, SensorObservation, SingleEnvSensorObservation, make_sensor_vec

SENSORS = {"angle": sg.StateSensorOptions(key="obs", index=[0], delay=0.1)}
REFUSAL = r"dt=0.02 contradicts the env's own control step, 0.05 s.*0.1 s would become 5 steps = 0.25 s.*Fix"


def _vec(env_id: str = "Pendulum-v1") -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=2, vectorization_mode="sync")


@pytest.mark.parametrize(
    "build",
    [
        lambda dt: SensorObservation(_vec(), SENSORS, dt=dt),
        lambda dt: SingleEnvSensorObservation(gym.make("Pendulum-v1"), SENSORS, dt=dt),
        lambda dt: make_sensor_vec("Pendulum-v1", 2, SENSORS, dt=dt),
        lambda dt: ActionLatency(_vec(), delay=0.1, dt=dt),
    ],
    ids=["SensorObservation", "SingleEnvSensorObservation", "make_sensor_vec", "ActionLatency"],
)
def test_a_dt_contradicting_the_envs_own_is_refused(build):
    with pytest.raises(ValueError, match=REFUSAL):
        build(0.02)
    wrapper = build(0.05)  # the env's own: accepted, and the delay is 2 steps
    assert wrapper.dt == 0.05
    assert build(None).dt == 0.05  # left out: inferred


def test_a_dt_for_an_env_without_its_own_is_taken():
    """CartPole-v1 has no ``dt`` (its step is ``tau``): the given one is used."""
    wrapper = SensorObservation(_vec("CartPole-v1"), SENSORS, dt=0.02)
    wrapper.reset(seed=0)
    assert wrapper.dt == 0.02
    assert wrapper.manager.storage(sg.StateSensor).max_shift == 5  # 0.1 s / 0.02 s


@pytest.mark.parametrize("order", ["latency inside", "sensors inside"])
def test_a_wrapper_without_dt_takes_the_one_given_to_the_wrapper_it_wraps(order):
    """CartPole has no control step of its own: the ``dt`` given to the inner sensorgym wrapper is the one
    the outer wrapper infers (a Gymnasium ``VectorWrapper`` forwards no attribute: the inference walks the
    ``.env`` chain for a layer's own ``dt``), in both orders. Failed before: "cannot infer the control
    step" either way."""
    if order == "latency inside":
        outer = SensorObservation(ActionLatency(_vec("CartPole-v1"), delay=0.04, dt=0.02), SENSORS)
        assert outer.manager.storage(sg.StateSensor).max_shift == 5  # 0.1 s / 0.02 s
    else:
        outer = ActionLatency(SensorObservation(_vec("CartPole-v1"), SENSORS, dt=0.02), delay=0.04)
        assert outer.config.max_shift == 2  # 0.04 s / 0.02 s
    assert outer.dt == 0.02
    outer.reset(seed=0)
    outer.step(outer.action_space.sample())
