"""``StateSensor`` reads: every route (numpy entry, torch entry, merged runs of indexed sensors) gives
each sensor exactly its own columns."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation


def _obs(b: int) -> np.ndarray:
    return (np.arange(b)[:, None] * 10.0 + np.arange(5)[None, :]).astype(np.float32)


SPLIT_RUNS = {
    # two runs of indexed sensors on "obs", separated by a sensor on another key: each run is merged
    # into one selection, and the two selections must not be confused
    "a": sg.StateSensorOptions(key="obs", index=[0]),
    "b": sg.StateSensorOptions(key="obs", index=[1]),
    "other": sg.StateSensorOptions(key="y", shape=(2,)),
    "c": sg.StateSensorOptions(key="obs", index=[4]),
    "d": sg.StateSensorOptions(key="obs", index=[3, 2]),  # a second run of a different width
    "e": sg.StateSensorOptions(key="obs", index=[0]),
}
EXPECTED_COLS = {"a": [0], "b": [1], "c": [4], "d": [3, 2], "e": [0]}


@pytest.mark.parametrize("as_torch", [False, True], ids=["numpy", "torch"])
def test_two_runs_on_one_key_read_their_own_columns(as_torch: bool) -> None:
    """Regression (issue 11.1): the merged selection was cached per (key, width), so the second run read
    the first run's columns, and a run of another width resized the class buffer."""
    b = 3
    mgr = sg.SensorManager(num_envs=b, dt=0.1, seed=0)
    sensors = {n: mgr.add_sensor(o, name=n) for n, o in SPLIT_RUNS.items()}
    for t in range(4):
        x = _obs(b) + 100 * t
        y = np.full((b, 2), -1.0, np.float32)
        state = {"obs": torch.from_numpy(x) if as_torch else x, "y": torch.from_numpy(y) if as_torch else y}
        (mgr.reset if t == 0 else mgr.step)(state)
        for name, cols in EXPECTED_COLS.items():
            np.testing.assert_array_equal(sensors[name].read().numpy(), x[:, cols], err_msg=name)
        np.testing.assert_array_equal(sensors["other"].read().numpy(), y)


def test_batched_pendulum_velocity_sensor_reads_velocity() -> None:
    """The user report of issue 11.1: on BatchedPendulumEnv a ``vel`` sensor on obs[2] returned cos θ."""
    env = BatchedPendulumEnv(num_envs=2)
    w = SensorObservation(
        env,
        {
            "cos": sg.StateSensorOptions(key="obs", index=[0]),
            "sin": sg.StateSensorOptions(key="obs", index=[1]),
            "state": sg.StateSensorOptions(key="state", shape=(2,)),
            "vel": sg.StateSensorOptions(key="obs", index=[2]),
            "cos_again": sg.StateSensorOptions(key="obs", index=[0]),
        },
        seed=0,
    )
    w.reset(seed=0)
    for _ in range(3):
        obs, *_ = w.step(torch.ones(2, 1))
        env_obs = w._last_obs
        np.testing.assert_array_equal(w.sensors["vel"].read()[:, 0], env_obs[:, 2])
        np.testing.assert_array_equal(w.sensors["cos_again"].read()[:, 0], env_obs[:, 0])
        np.testing.assert_array_equal(obs["policy"][:, 4:6], env_obs[:, [2, 0]])
