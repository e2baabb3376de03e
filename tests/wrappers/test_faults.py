"""Fault injection: a sub-env raising, a MuJoCo state going non-finite, an info key disappearing and an
Async worker dying each surface as a clear error naming the env and sensor (or are handled by the
configured ``nan_policy``); the sensors never advance on a failed step and the process never hangs."""

from __future__ import annotations

import faulthandler
import os

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import sensorgym as sg
from sensorgym.wrappers import SensorObservation

from .envs import RampEnv

SENSORS = {
    "pos": sg.StateSensorOptions(key="obs", index=[2], delay=0.1, noise=0.1, history_length=2),
    "speedo": sg.StateSensorOptions(key="speed", shape=(1,), random_walk=0.1),
}


class FaultyRamp(RampEnv):
    """RampEnv whose ``fault`` happens at step ``at`` of its first episode: "raise", "drop_info", "exit"."""

    def __init__(self, fault: str | None = None, at: int = 3) -> None:
        super().__init__(p_end=0.0, max_steps=50)
        self.fault, self.at, self.steps = fault, at, 0

    def step(self, action):
        self.steps += 1
        obs, r, term, trunc, info = super().step(action)
        if self.steps == self.at:
            if self.fault == "raise":
                raise RuntimeError("motor driver fault")
            if self.fault == "drop_info":
                info.pop("speed")
            if self.fault == "exit":
                os._exit(3)  # a worker killed mid-step (OOM killer, segfault)
        return obs, r, term, trunc, info


def _faulty(fault, at=3):
    return lambda: FaultyRamp(fault, at)


@pytest.fixture(autouse=True)
def no_hang():
    """A hung fault test kills the test process with a traceback instead of blocking CI."""
    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _snapshot(envs: SensorObservation) -> dict:
    return {k: v.clone() for k, v in envs.manager.state_dict().items() if torch.is_tensor(v)}


def _assert_unchanged(envs: SensorObservation, before: dict) -> None:
    after = envs.manager.state_dict()
    for k, v in before.items():
        assert torch.equal(v, after[k]), f"sensor state {k} changed on a failed step"


def _step_until_fault(envs: SensorObservation, n: int = 2):
    envs.reset(seed=0)
    for _ in range(n):
        envs.step(np.zeros((envs.num_envs, 1), np.float32))
    return _snapshot(envs)


@pytest.mark.parametrize("vec", [SyncVectorEnv, AsyncVectorEnv])
def test_sub_env_raising_names_the_env_and_keeps_sensor_state(vec):
    envs = SensorObservation(vec([_faulty(None), _faulty("raise")]), SENSORS, seed=0)
    before = _step_until_fault(envs)
    with pytest.raises(RuntimeError, match="motor driver fault") as e:
        envs.step(np.zeros((2, 1), np.float32))
    note = "\n".join(getattr(e.value, "__notes__", []))
    assert "sub-env" in note and "1" in note and vec.__name__ in note, note
    assert "did not advance" in note
    _assert_unchanged(envs, before)
    envs.close()


def test_async_worker_dying_mid_step_is_a_clear_error_not_a_hang():
    envs = SensorObservation(AsyncVectorEnv([_faulty(None), _faulty("exit")]), SENSORS, seed=0)
    before = _step_until_fault(envs)
    with pytest.raises(RuntimeError, match=r"worker 1 \(exit code 3\) died during step") as e:
        envs.step(np.zeros((2, 1), np.float32))
    assert isinstance(e.value.__cause__, (EOFError, BrokenPipeError, ConnectionResetError))
    _assert_unchanged(envs, before)
    envs.close()  # terminates the surviving worker instead of raising BrokenPipeError
    assert not any(p.is_alive() for p in envs.unwrapped.processes)


def test_async_worker_killed_between_steps():
    envs = SensorObservation(AsyncVectorEnv([_faulty(None), _faulty(None)]), SENSORS, seed=0)
    before = _step_until_fault(envs)
    proc = envs.unwrapped.processes[0]
    proc.kill()
    proc.join(10)
    with pytest.raises(RuntimeError, match=r"worker 0 \(exit code -9\) died during step"):
        envs.step(np.zeros((2, 1), np.float32))
    _assert_unchanged(envs, before)
    envs.close()


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_info_key_disappearing_in_one_sub_env_is_refused(mode):
    envs = SensorObservation(
        SyncVectorEnv([_faulty(None), _faulty("drop_info")], autoreset_mode=mode), SENSORS, seed=0
    )
    before = _step_until_fault(envs)
    with pytest.raises(ValueError, match=r"\['speedo'\] read info\['speed'\].*sub-env\(s\) \[1\].*Fix"):
        envs.step(np.zeros((2, 1), np.float32))
    _assert_unchanged(envs, before)
    envs.close()


def test_info_key_disappearing_everywhere_is_refused():
    envs = SensorObservation(SyncVectorEnv([_faulty("drop_info")] * 2), SENSORS, seed=0)
    before = _step_until_fault(envs)
    with pytest.raises(ValueError, match=r"sensor 'speedo': state has no key 'speed'.*Fix"):
        envs.step(np.zeros((2, 1), np.float32))
    _assert_unchanged(envs, before)
    envs.close()


class _DropAtEpisodeEnd(RampEnv):
    """Returns ``speed`` in every info except the last step's of an episode (three steps each)."""

    def __init__(self):
        super().__init__(p_end=0.0, max_steps=3)

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if terminated or truncated:
            info.pop("speed")
        return obs, reward, terminated, truncated, info


def test_info_key_missing_from_the_terminal_info_is_refused_in_same_step():
    """SAME_STEP reads the terminal value from final_info; without the key there, the terminal reading
    would silently show the next episode's reset value."""
    envs = SensorObservation(
        SyncVectorEnv([_DropAtEpisodeEnd] * 2, autoreset_mode=AutoresetMode.SAME_STEP), SENSORS, seed=0
    )
    envs.reset(seed=0)
    for _ in range(2):
        envs.step(np.full((2, 1), 0.5, np.float32))
    before = _snapshot(envs)
    with pytest.raises(ValueError, match=r"read info\['speed'\].*\[0, 1\].*final_info.*last step"):
        envs.step(np.full((2, 1), 0.5, np.float32))
    _assert_unchanged(envs, before)
    envs.close()


# -- MuJoCo going non-finite ---------------------------------------------------------------------------
class Diverge(gym.Wrapper):
    """At step ``at`` the MuJoCo state of this env blows up (qvel -> inf, qpos -> nan) after the physics
    step, as a divergent integration leaves it; MuJoCo itself only resets such a state at the *next*
    ``mj_step`` (its bad-qacc/qvel check), so exactly one observation carries the non-finite values."""

    def __init__(self, env: gym.Env, at: int | None) -> None:
        super().__init__(env)
        self.at, self.n = at, 0

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        self.n += 1
        if self.n == self.at:
            data = self.env.unwrapped.data
            data.qvel[:] = np.inf
            data.qpos[1] = np.nan
            obs = self.env.unwrapped._get_obs()
        return obs, r, term, trunc, info


@pytest.fixture(autouse=True)
def _mujoco_log_in_tmp(request, tmp_path, monkeypatch):
    if "mujoco" in request.node.name:
        monkeypatch.chdir(tmp_path)  # MuJoCo writes its instability warnings to ./MUJOCO_LOG.TXT


def _pendulums(policy: str, at: int = 3) -> SensorObservation:
    def make(at_):
        return lambda: Diverge(gym.make("InvertedPendulum-v5"), at_)

    vec = SyncVectorEnv([make(None), make(at)], autoreset_mode=AutoresetMode.NEXT_STEP)
    sensors = {
        "encoders": sg.StateSensorOptions(key="obs", index=[0, 1], nan_policy=policy, noise=0.01),
        "rates": sg.StateSensorOptions(key="obs", index=[2, 3], nan_policy=policy, history_length=2),
    }
    return SensorObservation(vec, sensors, seed=0)


def _run(envs: SensorObservation, steps: int):
    obs, _ = envs.reset(seed=1)
    out = [obs]
    for _ in range(steps):
        obs, *_ = envs.step(np.zeros((2, 1), np.float32))
        out.append(obs)
    return out


def test_mujoco_nan_raise_names_the_sensor_and_loses_nothing():
    envs = _pendulums("raise")
    envs.reset(seed=1)
    for _ in range(2):
        envs.step(np.zeros((2, 1), np.float32))
    before = _snapshot(envs)
    with pytest.raises(ValueError, match=r"'encoders'|'rates'") as e:
        envs.step(np.zeros((2, 1), np.float32))
    assert "non-finite" in str(e.value)
    _assert_unchanged(envs, before)
    envs.close()


def test_mujoco_nan_hold_keeps_the_last_finite_reading():
    envs = _pendulums("hold")
    obs = _run(envs, 3)
    pol = obs[3]["policy"]  # [encoders(2), rates now(2), rates 1 step ago(2)]
    assert np.isfinite(pol).all() and np.isfinite(obs[3]["critic"][:, :4]).all()
    gt_now, gt_before = obs[3]["critic"], obs[2]["critic"]  # [encoders(2), rates(2), env obs(4)]
    np.testing.assert_array_equal(gt_now[1, 1], gt_before[1, 1])  # qpos[1] -> nan: raw value held
    assert gt_now[1, 0] != gt_before[1, 0]  # the finite component moves on
    np.testing.assert_array_equal(pol[1, 2:4], obs[2]["policy"][1, 2:4])  # qvel -> inf: held (no noise)
    assert np.abs(pol[1, 1] - gt_before[1, 1]) < 0.1  # measured = held value + fresh noise
    assert (gt_now[0] != gt_before[0]).all()  # env 0 is not held
    assert not np.isfinite(obs[3]["critic"][1, 4:]).all()  # the env's own observation is untouched
    envs.close()


def test_mujoco_nan_propagates_and_stays_in_its_env_and_step():
    envs = _pendulums("propagate")
    obs = _run(envs, 5)
    assert np.isfinite(obs[3]["policy"][0]).all(), "env 0 must not see env 1's NaN"
    assert np.isnan(obs[3]["policy"][1, 1]) and np.isinf(obs[3]["policy"][1, 2:4]).all()
    assert np.isnan(obs[3]["critic"][1, 1])
    # MuJoCo resets the diverged state at the next mj_step: fresh readings are finite again, only the
    # history slot of the bad step still shows it, and no later step is contaminated after that.
    assert np.isfinite(obs[4]["policy"][1, :4]).all() and np.isinf(obs[4]["policy"][1, 4:6]).all()
    assert np.isfinite(obs[5]["policy"]).all()
    envs.close()
