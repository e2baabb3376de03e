"""An info key a sensor reads that some sub-envs stopped returning is refused, whatever its name
(issue 23, item 10): a top-level key holding a dot (``info["imu.temp"]``) is checked like any other, in
every autoreset mode and in SAME_STEP's ``final_info``. Gymnasium fills the missing rows with zeros; a
reading of 0.0 would be a silent wrong answer.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import sensorgym as sg
from sensorgym.wrappers import SensorObservation

from .envs import RampEnv

SENSORS = {"temp": sg.StateSensorOptions(key="imu.temp", shape=(1,), noise=0.1)}


class DottedInfoRamp(RampEnv):
    """Returns ``info["imu.temp"] = 20 + t``, except at step ``drop_at`` (or at the last step of an
    episode with ``drop_at_end``)."""

    def __init__(self, drop_at: int | None = None, drop_at_end: bool = False) -> None:
        super().__init__(p_end=0.0, max_steps=3 if drop_at_end else 50)
        self.drop_at, self.drop_at_end, self.steps = drop_at, drop_at_end, 0

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, "imu.temp": 20.0 + self.t}

    def step(self, action):
        self.steps += 1
        obs, r, term, trunc, info = super().step(action)
        info["imu.temp"] = 20.0 + self.t
        if self.steps == self.drop_at or (self.drop_at_end and (term or trunc)):
            info.pop("imu.temp")
        return obs, r, term, trunc, info


def _state(envs: SensorObservation) -> dict:
    return {k: v.clone() for k, v in envs.manager.state_dict().items() if torch.is_tensor(v)}


def _assert_unchanged(envs: SensorObservation, before: dict) -> None:
    after = envs.manager.state_dict()
    for k, v in before.items():
        assert torch.equal(v, after[k]), f"sensor state {k} changed on a refused step"


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_a_dotted_info_key_disappearing_in_one_sub_env_is_refused(mode):
    envs = SensorObservation(
        SyncVectorEnv([DottedInfoRamp, lambda: DottedInfoRamp(drop_at=3)], autoreset_mode=mode),
        SENSORS,
        seed=0,
    )
    envs.reset(seed=0)
    for _ in range(2):
        envs.step(np.zeros((2, 1), np.float32))
    # the key is read: the ground truth is the info value, not zeros
    assert envs.sensors["temp"].read_ground_truth()[:, 0].tolist() == [22.0, 22.0]
    before = _state(envs)
    with pytest.raises(ValueError, match=r"\['temp'\] read info\['imu.temp'\].*sub-env\(s\) \[1\].*Fix"):
        envs.step(np.zeros((2, 1), np.float32))
    _assert_unchanged(envs, before)
    envs.close()


def test_a_dotted_info_key_missing_from_the_terminal_info_is_refused_in_same_step():
    envs = SensorObservation(
        SyncVectorEnv([lambda: DottedInfoRamp(drop_at_end=True)] * 2, autoreset_mode=AutoresetMode.SAME_STEP),
        SENSORS,
        seed=0,
    )
    envs.reset(seed=0)
    for _ in range(2):
        envs.step(np.zeros((2, 1), np.float32))
    before = _state(envs)
    with pytest.raises(ValueError, match=r"read info\['imu.temp'\].*\[0, 1\].*final_info"):
        envs.step(np.zeros((2, 1), np.float32))
    _assert_unchanged(envs, before)
    envs.close()


def test_a_dotted_key_missing_from_one_terminal_info_is_refused_in_same_step():
    """Both envs end at the same step, env 1 without the key: Gymnasium's ``final_info`` holds the key
    with env 1's row zero-filled; the terminal reading of env 1 would silently be 0.0."""
    envs = SensorObservation(
        SyncVectorEnv(
            [lambda: DottedInfoRamp(drop_at=99), lambda: DottedInfoRamp(drop_at_end=True)],
            autoreset_mode=AutoresetMode.SAME_STEP,
        ),
        SENSORS,
        seed=0,
    )
    envs.unwrapped.envs[0].max_steps = 3  # both episodes end at step 3
    envs.reset(seed=0)
    for _ in range(2):
        envs.step(np.zeros((2, 1), np.float32))
    before = _state(envs)
    with pytest.raises(ValueError, match=r"read info\['imu.temp'\].*sub-env\(s\) \[1\].*final_info"):
        envs.step(np.zeros((2, 1), np.float32))
    _assert_unchanged(envs, before)
    envs.close()
