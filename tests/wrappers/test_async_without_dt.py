"""Issue 33 item 1: an AsyncVectorEnv whose sub-envs have no ``dt`` attribute (CartPole; an env that gives
its step only in ``metadata["dt"]``) works through SensorObservation and ActionLatency exactly as Sync does.

Probing ``get_attr("dt")`` used to raise inside the workers, and Gymnasium shuts a worker down when it
raises: the first reset then died with ``'NoneType' object has no attribute 'send'``.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

import sensorgym as sg
from sensorgym.wrappers import ActionLatency, SensorObservation

from .envs import RampEnv


class MetadataDtEnv(RampEnv):
    """RampEnv whose control step is only in ``metadata["dt"]`` (no ``dt`` attribute)."""

    metadata = {"render_modes": [], "dt": 0.1}  # noqa: RUF012 - gymnasium convention
    dt = property(lambda self: (_ for _ in ()).throw(AttributeError("dt")))  # no usable `dt`


def _cartpole():
    return gym.make("CartPole-v1")


def _metadata_env():
    return MetadataDtEnv()


def _run(vector_cls, make, wrap, steps=40):
    envs = vector_cls([make] * 3, autoreset_mode=AutoresetMode.NEXT_STEP)
    env = wrap(envs)
    try:
        obs, _ = env.reset(seed=3)
        trace = [obs]
        rng = np.random.default_rng(0)
        for _ in range(steps):
            obs, rew, term, trunc, _ = env.step(env.action_space.sample() * 0 + _actions(env, rng))
            trace.append((obs, rew, term, trunc))
        return trace
    finally:
        env.close()


def _actions(env, rng):
    space = env.action_space
    if isinstance(space, gym.spaces.MultiDiscrete):
        return rng.integers(0, space.nvec)
    return rng.uniform(-1, 1, space.shape).astype(np.float32)


def _equal(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _equal(a[k], b[k])
    elif isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            _equal(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _sensors(envs, dt):
    return SensorObservation(
        envs, {"x": sg.StateSensorOptions(key="obs", noise=0.1, delay=0.2, jitter=0.1)}, dt=dt
    )


@pytest.mark.parametrize(
    ("make", "dt"),
    [(_cartpole, 0.02), (_metadata_env, None), (_metadata_env, 0.1)],
    ids=["cartpole-dt-given", "metadata-dt-inferred", "metadata-dt-given"],
)
@pytest.mark.parametrize("wrapper", ["sensors", "latency", "both"])
def test_async_equals_sync_without_a_dt_attribute(make, dt, wrapper):
    def wrap(envs):
        if wrapper == "sensors":
            return _sensors(envs, dt)
        if wrapper == "latency":
            return ActionLatency(envs, delay=0.2, jitter=0.1, dt=dt, seed=1)
        return _sensors(ActionLatency(envs, delay=0.2, dt=dt, seed=1), dt)

    sync = _run(SyncVectorEnv, make, wrap)
    asyn = _run(AsyncVectorEnv, make, wrap)
    for a, b in zip(sync, asyn, strict=True):
        _equal(a, b)


def test_missing_dt_is_still_refused_in_one_line_with_async_workers_alive():
    envs = AsyncVectorEnv([_cartpole] * 2)
    try:
        with pytest.raises(ValueError, match=r"dt: cannot infer the control step.*Fix: pass dt="):
            SensorObservation(envs, {"x": sg.StateSensorOptions(key="obs")})
        obs, _ = envs.reset(seed=0)  # the workers survived the probe
        assert obs.shape == (2, 4)
    finally:
        envs.close()


def test_sub_env_attr_asks_before_reading():
    from sensorgym.wrappers.common import sub_env_attr

    envs = AsyncVectorEnv([_cartpole] * 2)
    try:
        with pytest.raises(AttributeError, match="no attribute 'dt'"):
            sub_env_attr(envs, "dt")
        assert sub_env_attr(envs, "_max_episode_steps") == [500, 500]
        envs.reset(seed=0)  # still alive
    finally:
        envs.close()
