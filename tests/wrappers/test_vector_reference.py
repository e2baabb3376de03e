"""The vector wrapper, step for step, against one single-env wrapper per sub-env (the reference),
in all three autoreset modes, with random episode lengths, partial resets, delay, jitter, noise,
randomization and history. ``per_env_rng`` gives each env its own random stream, so equality is exact."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import sensorgym as sg
from sensorgym.wrappers import SensorObservation, SimStateExtractor, SingleEnvSensorObservation

from .envs import RampEnv

SENSORS = {
    "x": sg.StateSensorOptions(
        key="obs",
        index=[2],
        delay=sg.Choice([0.0, 0.1, 0.2]),
        jitter=0.1,
        noise=sg.LogUniform(0.01, 0.1),
        history_length=3,
    ),
    "t": sg.StateSensorOptions(key="t", shape=(1,), delay=0.1, padding_type="zero", history_length=2),
    "x_attr": sg.EnvAttributeOptions(
        attr="x", shape=(1,), bias=sg.Normal(0.0, 0.1), resolution=0.01, random_walk=0.01
    ),
}
B, SEED = 4, 7


def _sub_env():
    return SimStateExtractor(RampEnv(), SENSORS)


def _compare(vec_obs, i, ref_obs, what=""):
    for k in ("policy", "critic"):
        np.testing.assert_array_equal(vec_obs[k][i], ref_obs[k], err_msg=f"{what} env {i} {k}")


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_vector_equals_per_env_reference(mode):
    venv = SensorObservation(
        SyncVectorEnv([_sub_env] * B, autoreset_mode=mode),
        SENSORS,
        critic_randomization=True,
        per_env_rng=True,
    )
    refs = [
        SingleEnvSensorObservation(RampEnv(), SENSORS, critic_randomization=True, per_env_rng=True)
        for _ in range(B)
    ]
    rng = np.random.default_rng(0)
    obs, _ = venv.reset(seed=SEED)
    ref = [r.reset(seed=SEED + i)[0] for i, r in enumerate(refs)]
    for i in range(B):
        _compare(obs, i, ref[i], "reset")
    pending = np.zeros(B, bool)
    n_boundaries = 0
    for t in range(80):
        actions = rng.uniform(-1, 1, (B, 1)).astype(np.float32)
        obs, _, term, trunc, info = venv.step(actions)
        assert obs in venv.observation_space
        done = term | trunc
        for i in range(B):
            if mode is AutoresetMode.NEXT_STEP and pending[i]:
                ref[i] = refs[i].reset()[0]
                pending[i] = False
                continue
            o, _, te, tr, _ = refs[i].step(actions[i])
            assert (te, tr) == (term[i], trunc[i])
            ref[i] = o
            if te or tr:
                n_boundaries += 1
                if mode is AutoresetMode.NEXT_STEP:
                    pending[i] = True
                elif mode is AutoresetMode.SAME_STEP:
                    _compare({k: [v] for k, v in info["final_obs"][i].items()}, 0, o, f"final t={t}")
                    ref[i] = refs[i].reset()[0]
        for i in range(B):
            _compare(obs, i, ref[i], f"step t={t}")
        if mode is AutoresetMode.DISABLED:
            mask = done | (rng.random(B) < 0.1)  # done envs plus some extra partial resets
            if mask.any():
                caller_options = {"reset_mask": mask.copy()}
                obs, _ = venv.reset(options=caller_options)
                for i in np.flatnonzero(mask):
                    ref[i] = refs[i].reset()[0]
                for i in range(B):
                    _compare(obs, i, ref[i], f"partial reset t={t}")
    assert n_boundaries >= 8  # random episode lengths really happened


def test_sync_and_async_give_identical_observations():
    outs = []
    for cls in (SyncVectorEnv, AsyncVectorEnv):
        venv = SensorObservation(cls([_sub_env] * B), SENSORS, seed=3)
        rng = np.random.default_rng(1)
        obs, _ = venv.reset(seed=3)
        trace = [obs]
        for _ in range(40):
            obs, *_ = venv.step(rng.uniform(-1, 1, (B, 1)).astype(np.float32))
            trace.append(obs)
        venv.close()
        outs.append(trace)
    for a, b in zip(outs[0], outs[1], strict=True):
        for k in ("policy", "critic"):
            np.testing.assert_array_equal(a[k], b[k])


def test_a_seed_list_seeds_each_env_stream_like_its_sub_env():
    """``reset(seed=[s0, s1, ...])``: Gymnasium seeds sub-env b with s_b, and per_env_rng seeds env b's
    sensor stream with s_b too, so env b equals a single env reset with seed s_b."""
    seeds = [10, 20, 30, 99]
    venv = SensorObservation(
        SyncVectorEnv([_sub_env] * B), SENSORS, critic_randomization=True, per_env_rng=True
    )
    refs = [
        SingleEnvSensorObservation(RampEnv(), SENSORS, critic_randomization=True, per_env_rng=True)
        for _ in seeds
    ]
    obs, _ = venv.reset(seed=seeds)
    ref = [r.reset(seed=s)[0] for r, s in zip(refs, seeds, strict=True)]
    actions = np.random.default_rng(1).uniform(-1, 1, (12, B, 1)).astype(np.float32)
    pending = np.zeros(B, bool)  # NEXT_STEP: an env that ended restarts on its next step
    for t, a in enumerate(actions):
        for i in range(B):
            _compare(obs, i, ref[i], f"step {t}")
        obs, _, term, trunc, _ = venv.step(a)
        for i, r in enumerate(refs):
            ref[i] = r.reset()[0] if pending[i] else r.step(a[i])[0]
        pending = (term | trunc) & ~pending
    with pytest.raises(ValueError, match="3 seeds for 4 envs"):
        venv.manager.seed([1, 2, 3])
