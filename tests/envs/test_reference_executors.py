"""Every registered reference env, built through Gymnasium's own entry points (``gym.make_vec`` and
``gym.make``) with ``executor="torch"`` and with ``executor="numpy"``, gives the same bits: observations
(policy and critic), rewards, the manager's whole ``state_dict``, through autoresets and a partial reset.

These envs carry the catalog classes whose hooks are not written against ``md.xp`` (the temperature grid,
the cameras, the lidar, the tactile pad): on the numpy executor they run their torch ops on the same
memory, next to stages that run on numpy views. A wrong view, a stale copy or a hook writing a buffer the
other route does not read shows up here as a difference.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym
import numpy as np
import pytest
import torch

import sensorgym.envs  # noqa: F401  (registers the ids)
from sensorgym.envs.registry import WRAPPER_KWARGS

from ..sensors.test_executors_mujoco import state_tensors

ENVS = {  # id -> (steps, a step at which envs 0 of 2 is reset by mask)
    "sensorgym/AntSensors-v0": (60, 25),
    "sensorgym/TactileSensors-v0": (40, 15),
    "sensorgym/ThermalSensors-v0": (40, 15),
    "sensorgym/ScanSensors-v0": (12, 5),
}


def _copy(obs: dict) -> dict[str, np.ndarray]:
    return {k: np.array(v, copy=True) for k, v in obs.items()}


def _run_vector(env_id: str, executor: str, steps: int, partial: int) -> tuple[list, dict]:
    envs = gym.make_vec(env_id, num_envs=2, seed=3, executor=executor)
    try:
        assert envs.manager.executor_used == executor
        envs.action_space.seed(0)
        obs, _ = envs.reset(seed=0)
        trace = [_copy(obs)]
        for t in range(steps):
            if t == partial:
                obs, _ = envs.reset(options={"reset_mask": np.array([True, False])})
                trace.append(_copy(obs))
            obs, reward, terminated, truncated, _ = envs.step(envs.action_space.sample())
            trace.append({**_copy(obs), "reward": np.asarray(reward), "done": terminated | truncated})
        return trace, state_tensors(envs.manager.state_dict())
    finally:
        envs.close()


@pytest.mark.parametrize("env_id", sorted(ENVS))
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_vector_reference_env_gives_the_same_bits_on_both_executors(env_id):
    steps, partial = ENVS[env_id]
    torch_trace, torch_state = _run_vector(env_id, "torch", steps, partial)
    numpy_trace, numpy_state = _run_vector(env_id, "numpy", steps, partial)
    assert len(torch_trace) == len(numpy_trace) == steps + 2
    for t, (a, b) in enumerate(zip(torch_trace, numpy_trace, strict=True)):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"{env_id} step {t}: {key}")
    # the readings are not trivially equal (e.g. all zero): the policy sees noise that changes over time
    policy = np.stack([x["policy"] for x in torch_trace[2:]]).astype(np.float64)
    assert np.ptp(policy, axis=0).max() > 0
    assert torch_state.keys() == numpy_state.keys()
    for key in torch_state:
        np.testing.assert_array_equal(torch_state[key], numpy_state[key], err_msg=f"{env_id}: state {key}")


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_single_env_form_takes_the_wrapper_options_and_gives_the_same_bits():
    traces = {}
    for executor in ("torch", "numpy"):
        env = gym.make("sensorgym/ThermalSensors-v0", seed=1, executor=executor, per_env_rng=True)
        assert env.get_wrapper_attr("manager").executor_used == executor
        env.action_space.seed(0)
        obs, _ = env.reset(seed=0)
        trace = [_copy(obs)]
        for _ in range(30):
            obs, *_ = env.step(env.action_space.sample())
            trace.append(_copy(obs))
        traces[executor] = trace
        env.close()
    for a, b in zip(traces["torch"], traces["numpy"], strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def test_every_wrapper_keyword_passes_through_and_others_reach_the_base_env():
    import inspect

    from sensorgym.wrappers import SensorObservation, SingleEnvSensorObservation

    for wrapper in (SensorObservation, SingleEnvSensorObservation):
        params = set(inspect.signature(wrapper).parameters) - {"env", "sensors", "policy", "critic", "dt"}
        assert params == set(WRAPPER_KWARGS), wrapper
    envs = gym.make_vec("sensorgym/ThermalSensors-v0", num_envs=2, device="cpu", critic_env_obs=False)
    assert envs.manager.device == torch.device("cpu") and envs.layout.include_env_obs is False
    envs.close()
    with pytest.raises(TypeError, match="executr"):  # a mistyped keyword is the base env's error
        gym.make_vec("sensorgym/ThermalSensors-v0", num_envs=2, executr="numpy")
