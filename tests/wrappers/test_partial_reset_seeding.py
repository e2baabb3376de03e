"""``reset(seed=..., options={"reset_mask": m})`` reseeds only what it resets (issue 23, item 12).

Gymnasium seeds only the masked sub-envs. With ``per_env_rng`` every env's sensor stream is its own:
only the masked envs' streams are reseeded (env ``b`` with ``seed + b``), so every env still equals its
single-env twin. One shared generator (the default, and ``ActionLatency``'s jitter stream) cannot be
reseeded for some envs: the seed is folded into the stream, so a constant seed in a loop of partial resets
never replays the same numbers, and the same calls still give the same numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import sensorgym as sg
from sensorgym.wrappers import ActionLatency, SensorObservation

from .envs import RampEnv

DISABLED = AutoresetMode.DISABLED
SENSORS = {"pos": sg.StateSensorOptions(key="obs", index=[2], noise=0.1, jitter=0.1, delay=0.2)}


def _long_ramp() -> RampEnv:
    return RampEnv(p_end=0.0, max_steps=10_000)


def _wrapped(num_envs: int, **kwargs) -> SensorObservation:
    return SensorObservation(
        SyncVectorEnv([_long_ramp] * num_envs, autoreset_mode=DISABLED), SENSORS, seed=0, **kwargs
    )


def test_per_env_streams_reseed_only_the_masked_envs_and_match_their_single_env_twins():
    batch = _wrapped(3, per_env_rng=True)
    # twin b: one env seeded like sub-env b (seed + b); twin 1 is reset again where env 1 is
    twins = [_wrapped(1, per_env_rng=True) for _ in range(3)]
    obs, _ = batch.reset(seed=0)
    singles = [twin.reset(seed=b)[0] for b, twin in enumerate(twins)]
    for t in range(12):
        action = np.full((3, 1), 0.1 * t, np.float32)
        if t in (4, 9):  # env 1 alone starts a new episode, seeded
            obs, _ = batch.reset(seed=5 + t, options={"reset_mask": np.array([False, True, False])})
            singles[1] = twins[1].reset(seed=5 + t + 1)[0]
        else:
            obs, *_ = batch.step(action)
            singles = [twin.step(action[b : b + 1])[0] for b, twin in enumerate(twins)]
        for b in range(3):
            single = singles[b]["policy"][0]
            np.testing.assert_array_equal(obs["policy"][b], single, err_msg=f"env {b}, t={t}")


def _noise_after_partial_resets(wrapped: SensorObservation, seed: int) -> list[list[float]]:
    """Env 1's measurement noise (measured - GT, no delay) in the 3 steps after each of 4 partial resets
    of env 0 with the same seed."""
    wrapped.reset(seed=0)
    runs = []
    for _ in range(4):
        wrapped.reset(seed=seed, options={"reset_mask": np.array([True, False])})
        noise = []
        for _ in range(3):
            obs, *_ = wrapped.step(np.zeros((2, 1), np.float32))
            noise.append(float(obs["policy"][1, 0] - obs["critic"][1, 0]))
        runs.append(noise)
    return runs


def test_a_constant_seed_in_partial_resets_never_replays_the_shared_stream():
    sensors = {"pos": sg.StateSensorOptions(key="obs", index=[2], noise=0.1)}
    make = lambda: SensorObservation(  # noqa: E731
        SyncVectorEnv([_long_ramp] * 2, autoreset_mode=DISABLED), sensors, seed=0
    )
    runs = _noise_after_partial_resets(make(), seed=7)
    assert len({tuple(r) for r in runs}) == len(runs), runs  # env 1's noise never repeats
    assert runs == _noise_after_partial_resets(make(), seed=7)  # same calls, same numbers
    assert runs != _noise_after_partial_resets(make(), seed=8)  # and the seed matters


@pytest.mark.parametrize("per_env_rng", [False, True])
def test_a_full_reset_with_a_seed_still_restarts_every_stream(per_env_rng):
    a, b = _wrapped(2, per_env_rng=per_env_rng), _wrapped(2, per_env_rng=per_env_rng)
    a.reset(seed=3)
    for _ in range(5):
        a.step(np.zeros((2, 1), np.float32))
    first, _ = a.reset(seed=11)
    again, _ = b.reset(seed=11)
    np.testing.assert_array_equal(first["policy"], again["policy"])
    for _ in range(5):
        x, y = a.step(np.ones((2, 1), np.float32))[0], b.step(np.ones((2, 1), np.float32))[0]
        np.testing.assert_array_equal(x["policy"], y["policy"])


def _shifts_after_partial_resets(lat: ActionLatency, seed: int) -> list[list[int]]:
    """Env 1's action shift (actions are the step counter) in the 6 steps after each of 4 partial resets
    of env 0 with the same seed. ``jitter = dt``: the shift is ``D + 0`` or ``D + 1``, so the monotone rule
    never binds and the shift is exactly the jitter draw."""
    lat.reset(seed=0)
    counter, runs = 100, []
    for _ in range(4):  # past the initial actions of env 1's episode
        counter += 1
        lat.step(np.full((2, 1), counter, np.float32))
    for _ in range(4):
        lat.reset(seed=seed, options={"reset_mask": np.array([True, False])})
        shifts = []
        for _ in range(6):
            counter += 1
            *_, info = lat.step(np.full((2, 1), counter, np.float32))
            shifts.append(counter - int(info["action_applied"][1, 0]))
        runs.append(shifts)
    return runs


def test_action_latency_partial_reset_with_a_constant_seed_never_replays_the_jitter():
    make = lambda: ActionLatency(  # noqa: E731
        SyncVectorEnv([_long_ramp] * 2, autoreset_mode=DISABLED), delay=0.2, jitter=0.1, seed=0
    )
    runs = _shifts_after_partial_resets(make(), seed=4)
    assert all(set(r) <= {2, 3} for r in runs), runs
    assert len({tuple(r) for r in runs}) == len(runs), runs
    assert runs == _shifts_after_partial_resets(make(), seed=4)
