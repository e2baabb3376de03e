"""Every option of every stateful wrapper is checked by ``load_state_dict`` (issue 23, item 13).

A checkpoint saved with other options must not load silently: ``ActionLatency(delay=Choice([0.02, 0.1]),
initial_action="first")`` would continue as ``delay=0.1, "zero"`` with the saved queue. Each constructor
argument of ``ActionLatency``, ``SensorObservation`` and ``SingleEnvSensorObservation`` is listed here
(a test fails when one is added without being listed): changed alone, it is refused with a ``ValueError``
naming it, or, for the few that cannot change what is computed (the seed, whose random state the
checkpoint replaces; the executor, which gives the same bits), the run continues bit for bit.
"""

from __future__ import annotations

import inspect

import gymnasium as gym
import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.wrappers import ActionLatency, SensorObservation, SingleEnvSensorObservation

REFUSED, FREE = "refused", "free"


# -- ActionLatency ---------------------------------------------------------------------------------------
def _pendulums(mode: str = "NextStep", dt: float | None = None) -> gym.vector.VectorEnv:
    """Three Pendulum-v1 (0.05 s), or stepped at ``dt`` (a wrapper's dt must be the env's own)."""
    venv = gym.make_vec(
        "Pendulum-v1", num_envs=3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )
    if dt is not None:
        for env in venv.envs:
            env.unwrapped.dt = dt
    return venv


def _pendulum(dt: float | None = None) -> gym.Env:
    env = gym.make("Pendulum-v1")
    if dt is not None:
        env.unwrapped.dt = dt
    return env


LATENCY_BASE = dict(delay=sg.Choice([0.05, 0.1]), jitter=0.05, initial_action="first", seed=0)
#: option -> (value changed alone, expected); max_shift stays 3 unless the option is dt
LATENCY_VARIANTS = {
    "env": (lambda: _pendulums("SameStep"), REFUSED),  # the env's autoreset mode
    "delay": (0.1, REFUSED),
    "jitter": (sg.Uniform(0.0, 0.05), REFUSED),
    "dt": (0.025, REFUSED),
    "initial_action": ("zero", REFUSED),
    "seed": (7, FREE),
}


def _latency(**changed) -> ActionLatency:
    make_env = changed.pop("env", lambda: _pendulums(dt=changed.get("dt")))
    return ActionLatency(make_env(), **{**LATENCY_BASE, **changed})


def _run_latency(lat: ActionLatency, actions: np.ndarray) -> list[bytes]:
    out = []
    for a in actions:
        obs, _, _, _, info = lat.step(a)
        out += [obs.tobytes(), info["action_applied"].tobytes(), info["action_in_flight"].tobytes()]
    return out


def test_every_action_latency_argument_is_covered():
    arguments = set(inspect.signature(ActionLatency.__init__).parameters) - {"self"}
    assert arguments == set(LATENCY_VARIANTS)


@pytest.mark.parametrize("option", list(LATENCY_VARIANTS))
def test_action_latency_refuses_a_checkpoint_of_other_options(option):
    value, expected = LATENCY_VARIANTS[option]
    actions = np.random.default_rng(0).uniform(-2, 2, (30, 3, 1)).astype(np.float32)
    saved = _latency()
    saved.reset(seed=0)
    _run_latency(saved, actions[:10])
    state = saved.state_dict()
    env_snapshot = [e.unwrapped.state.copy() for e in saved.unwrapped.envs]
    continued = _run_latency(saved, actions[10:])

    other = _latency(**{option: value})
    other.reset(seed=0)
    if expected == REFUSED:
        with pytest.raises(
            ValueError, match=rf"load_state_dict: .*{'autoreset_mode' if option == 'env' else option}"
        ):
            other.load_state_dict(state)
        return
    other.load_state_dict(state)
    for e, s in zip(other.unwrapped.envs, env_snapshot, strict=True):
        e.unwrapped.state = s.copy()
    assert _run_latency(other, actions[10:]) == continued


def test_the_issue_example_is_refused():
    """Saved with ``delay=Choice([0.02, 0.1])``, ``initial_action="first"``; loaded into ``delay=0.1``,
    ``"zero"`` (the same queue depth, so only the options tell them apart)."""
    saved = ActionLatency(_pendulums(dt=0.02), delay=sg.Choice([0.02, 0.1]), initial_action="first", dt=0.02)
    saved.reset(seed=0)
    other = ActionLatency(_pendulums(dt=0.02), delay=0.1, initial_action="zero", dt=0.02)
    with pytest.raises(ValueError, match=r"option 'delay' differs.*Choice.*Fix"):
        other.load_state_dict(saved.state_dict())


def test_an_array_initial_action_is_compared_by_value():
    a = ActionLatency(_pendulums(), delay=0.1, initial_action=np.array([0.5], np.float32))
    b = ActionLatency(_pendulums(), delay=0.1, initial_action=np.array([-0.5], np.float32))
    a.reset(seed=0)
    with pytest.raises(ValueError, match=r"option 'initial_action' differs: .*\[0.5\]"):
        b.load_state_dict(a.state_dict())
    same = ActionLatency(_pendulums(), delay=0.1, initial_action=np.array([0.5], np.float32))
    same.load_state_dict(a.state_dict())


# -- SensorObservation and SingleEnvSensorObservation ----------------------------------------------------
def _sensors(noise: float = 0.1) -> dict:
    return {
        "a": sg.StateSensorOptions(key="obs", index=[0, 1], noise=noise, delay=sg.Uniform(0.0, 0.1)),
        "b": sg.StateSensorOptions(key="obs", index=[2], jitter=0.05, delay=0.05),
    }


SENSOR_BASE = dict(sensors=_sensors(), seed=0, policy=["a"])
SENSOR_VARIANTS = {
    "env": (None, None),  # the wrapped env: checked through the manager's shapes and the env snapshot
    "sensors": (_sensors(noise=0.2), REFUSED),
    "dt": (0.025, REFUSED),
    "device": ("cuda", REFUSED),
    "seed": (7, FREE),
    "policy": (["a", "b"], REFUSED),
    "critic": (["a"], REFUSED),
    "critic_env_obs": (False, REFUSED),
    "critic_randomization": (True, REFUSED),
    "per_env_rng": (True, REFUSED),
    "policy_age": (["a"], REFUSED),
    "critic_age": (["b"], REFUSED),
    "executor": ("torch", FREE),  # the base runs the numpy executor (a small CPU batch)
}


@pytest.mark.parametrize("cls", [SensorObservation, SingleEnvSensorObservation])
def test_every_sensor_wrapper_argument_is_covered(cls):
    arguments = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert arguments == set(SENSOR_VARIANTS)


def _wrapper(cls, **changed):
    if cls is SensorObservation:
        return SensorObservation(_pendulums(dt=changed.get("dt")), **{**SENSOR_BASE, **changed})
    return SingleEnvSensorObservation(_pendulum(changed.get("dt")), **{**SENSOR_BASE, **changed})


def _run(env, actions) -> list[bytes]:
    out = []
    for a in actions:
        obs = env.step(a if isinstance(env, SensorObservation) else a[0])[0]
        out += [obs["policy"].tobytes(), obs["critic"].tobytes()]
    return out


@pytest.mark.parametrize("cls", [SensorObservation, SingleEnvSensorObservation])
@pytest.mark.parametrize("option", [o for o in SENSOR_VARIANTS if o != "env"])
def test_sensor_wrappers_refuse_a_checkpoint_of_other_options(cls, option):
    value, expected = SENSOR_VARIANTS[option]
    if option == "device" and not torch.cuda.is_available():
        pytest.skip("another device type needs CUDA")
    actions = np.random.default_rng(1).uniform(-2, 2, (20, 3, 1)).astype(np.float32)
    saved = _wrapper(cls)
    saved.reset(seed=0)
    _run(saved, actions[:8])
    state = saved.state_dict()
    sims = [e.unwrapped.state.copy() for e in getattr(saved.unwrapped, "envs", [saved.env])]
    continued = _run(saved, actions[8:])

    other = _wrapper(cls, **{option: value})
    other.reset(seed=0)
    before = other.manager.state_dict()
    if expected == REFUSED:
        name = "noise" if option == "sensors" else option
        with pytest.raises(ValueError, match=rf"load_state_dict: .*option '{name}' differs.*Fix"):
            other.load_state_dict(state)
        after = other.manager.state_dict()  # refused before anything changed
        for k, v in before["classes"].items():
            for name, t in v["tensors"].items():
                assert torch.equal(t, after["classes"][k]["tensors"][name])
        return
    other.load_state_dict(state)
    for e, s in zip(getattr(other.unwrapped, "envs", [other.env]), sims, strict=True):
        e.unwrapped.state = s.copy()
    assert _run(other, actions[8:]) == continued


def test_a_snapshot_of_another_action_latency_is_refused_and_changes_nothing():
    """With ``include_envs`` the snapshot would replace the wrapped env, ``ActionLatency`` included: one
    built with other options is refused, naming the wrapper and the option."""

    def make(delay):
        lat = ActionLatency(_pendulums("SameStep"), delay=delay, jitter=0.05, seed=0)
        return SensorObservation(lat, {"a": sg.StateSensorOptions(key="obs", noise=0.1)}, seed=0)

    saved = make(sg.Choice([0.05, 0.1]))
    saved.reset(seed=0)
    other = make(0.1)
    other.reset(seed=0)
    inner = other.env
    with pytest.raises(ValueError, match=r"ActionLatency option 'delay' differs.*Choice.*Fix"):
        other.load_state_dict(saved.state_dict(include_envs=True))
    assert other.env is inner
    assert other.env.config.delay == 0.1


def test_checkpoints_from_before_the_options_were_saved_still_load():
    saved = _wrapper(SensorObservation)
    saved.reset(seed=0)
    state = saved.state_dict()
    del state["options"]
    _wrapper(SensorObservation).load_state_dict(state)
    lat = _latency()
    lat.reset(seed=0)
    old = {**lat.state_dict(), "version": 1}
    del old["options"]
    with pytest.warns(UserWarning, match="version 1"):
        _latency().load_state_dict(old)
