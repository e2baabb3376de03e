"""No cross-episode leakage: nothing from episode k of an env (a reading, a delay-queue entry, a history
slot, the random-walk state, a randomized bias) ever shows in episode k+1 of that env, in every autoreset
mode and for partial resets.

The env encodes its episode number in every observation (``1000 * episode + t``), so any value read can
be traced back to the episode it was captured in."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import sensorgym as sg
from sensorgym.wrappers import SensorObservation

B = 4


class TaggedEnv(gym.Env):
    """obs = 1000 * episode + t; episodes end at random lengths (3..12 steps)."""

    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium convention
    dt = 0.1
    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self) -> None:
        self.episode = -1

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        self.length = int(self.np_random.integers(3, 13))
        return np.array([1000.0 * self.episode]), {}

    def step(self, action):
        self.t += 1
        return np.array([1000.0 * self.episode + self.t]), 0.0, False, self.t >= self.length, {}


SMALL = 0.01  # noise, drift and bias stay far below the 1000 between episodes
SENSORS = {
    "delayed": sg.StateSensorOptions(key="obs", delay=0.3, jitter=0.2, history_length=6, noise=SMALL),
    "zero_pad": sg.StateSensorOptions(key="obs", delay=0.2, history_length=5, padding_type="zero"),
    "drifting": sg.StateSensorOptions(key="obs", random_walk=0.3, bias=sg.Uniform(-300.0, 300.0)),
    "randomized": sg.StateSensorOptions(key="obs", delay=sg.Choice([0.0, 0.1, 0.4]), history_length=3),
}


def _episode(value: np.ndarray) -> np.ndarray:
    return np.floor((value + 500.0) / 1000.0)  # the episode a (noisy, biased) value was captured in


def _check(envs: SensorObservation, obs: dict, episodes: np.ndarray, where: str) -> None:
    for name, sensor in envs.sensors.items():
        m = sensor.read()
        m = m.numpy() if m.dim() == 2 else m[..., 0].numpy()  # (B,) or (B, history)
        gt = sensor.read_ground_truth(0)[:, 0].numpy()
        np.testing.assert_array_equal(_episode(gt), episodes, err_msg=f"{where}: GT of {name}")
        m = m.reshape(B, -1)
        if name == "drifting":
            # the bias is redrawn at every reset (|bias| < 300, so tags stay apart) and the walk restarts
            bias = sensor.read_randomization()["bias"][:, 0].numpy()
            np.testing.assert_array_equal(_episode(m[:, 0] - bias), episodes, err_msg=f"{where}: {name}")
            continue
        ok = (_episode(m) == episodes[:, None]) | ((m == 0) & (name == "zero_pad"))
        assert ok.all(), f"{where}: {name} shows another episode's data: {m} vs episodes {episodes}"
    policy = obs["policy"]
    assert np.isfinite(policy).all()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_nothing_crosses_an_episode_boundary(mode):
    envs = SensorObservation(SyncVectorEnv([TaggedEnv] * B, autoreset_mode=mode), SENSORS, seed=0)
    subs = envs.unwrapped.envs
    obs, _ = envs.reset(seed=0)
    rng = np.random.default_rng(0)
    boundaries = 0
    for t in range(300):
        obs, _, term, trunc, info = envs.step(np.zeros((B, 1), np.float32))
        episodes = np.array([s.unwrapped.episode for s in subs], float)
        _check(envs, obs, episodes, f"{mode.name} step {t}")
        done = term | trunc
        if mode is AutoresetMode.SAME_STEP and done.any():
            for i in np.flatnonzero(done):  # the exported terminal reading is the old episode's
                final = info["final_obs"][i]["critic"][0]  # GT of "delayed"
                assert _episode(np.array(final)) == episodes[i] - 1
        if mode is AutoresetMode.DISABLED:
            mask = done | (rng.random(B) < 0.15)  # plus partial resets of envs in mid-episode
            if mask.any():
                obs, _ = envs.reset(options={"reset_mask": mask})
                episodes = np.array([s.unwrapped.episode for s in subs], float)
                _check(envs, obs, episodes, f"{mode.name} partial reset {t}")
        boundaries += int(done.sum())
    assert boundaries > 60


def test_manager_partial_resets_do_not_leak_random_walk_or_delay_queues():
    mgr = sg.SensorManager(num_envs=3, dt=0.1, seed=0)
    s = mgr.add_sensor(
        sg.StateSensorOptions(key="x", shape=(1,), delay=0.3, random_walk=5.0, history_length=4)
    )
    x = np.zeros((3, 1))
    mgr.reset({"x": x})
    for _ in range(20):
        mgr.step({"x": x})  # the walk wanders far from zero
    assert np.abs(s.read(0).numpy()).max() > 5
    mgr.reset({"x": np.full((3, 1), 1000.0)}, envs_idx=[1])
    np.testing.assert_array_equal(s.read()[1].numpy(), 1000.0)  # every slot: the new first snapshot
    mgr.step({"x": np.full((3, 1), 1000.0)})
    assert abs(s.read()[1, 0].item() - 1000.0) == 0.0  # delayed: still the new episode's first snapshot
    assert s.read()[1, 1:].eq(1000.0).all()
