"""``SensorObservation(executor=...)`` and ``SingleEnvSensorObservation(executor=...)``: the two executors
of the sensor step, driven through the wrappers over real envs in every autoreset mode, give the same
observations bit for bit; a mistyped executor is refused with the option, the value and the fix."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import sensorgym as sg
from sensorgym.envs.ant import ant_sensors
from sensorgym.wrappers import SensorObservation, SingleEnvSensorObservation

SENSORS = {
    "angle": sg.StateSensorOptions(
        key="obs", index=[0, 1], delay=0.1, jitter=0.05, noise=sg.LogUniform(0.005, 0.05), history_length=3
    ),
    "rate": sg.StateSensorOptions(
        key="obs", index=[2], noise=0.1, bias=sg.Normal(0.0, 0.1), resolution=0.01, random_walk=0.01
    ),
}


@pytest.mark.parametrize("mode", list(gym.vector.AutoresetMode))
def test_vector_wrapper_gives_the_same_observations_on_both_executors(mode):
    wrapped = {}
    for executor in ("torch", "numpy"):
        envs = gym.make_vec(
            "Pendulum-v1", num_envs=3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
        )
        wrapped[executor] = SensorObservation(
            envs, SENSORS, seed=3, executor=executor, critic_randomization=True, policy_age=["angle"]
        )
        assert wrapped[executor].manager.executor_used == executor
    first = [env.reset(seed=0)[0] for env in wrapped.values()]
    for key in ("policy", "critic"):
        np.testing.assert_array_equal(first[0][key], first[1][key])
    actions = np.random.default_rng(0).uniform(-2, 2, (205, 3, 1)).astype(np.float32)
    boundaries = 0
    for t, a in enumerate(actions):
        if mode == gym.vector.AutoresetMode.DISABLED and t and t % 200 == 0:
            for env in wrapped.values():  # DISABLED: the caller resets finished envs itself
                env.reset(options={"reset_mask": np.ones(3, bool)})
        (obs_t, _, term, trunc, info_t), (obs_n, _, _, _, info_n) = (env.step(a) for env in wrapped.values())
        boundaries += int((term | trunc).any())
        for key in ("policy", "critic"):
            np.testing.assert_array_equal(obs_t[key], obs_n[key], err_msg=f"step {t}: {key}")
        if "final_obs" in info_t:  # SAME_STEP: per env, the terminal observation (None where not done)
            np.testing.assert_array_equal(info_t["_final_obs"], info_n["_final_obs"])
            for i in np.flatnonzero(info_t["_final_obs"]):
                for key in ("policy", "critic"):
                    final_t, final_n = info_t["final_obs"][i][key], info_n["final_obs"][i][key]
                    np.testing.assert_array_equal(final_t, final_n, err_msg=f"step {t}: final_obs")
    assert boundaries >= 1  # Pendulum truncates at 200 steps: the reset path ran


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_single_env_wrapper_on_ant_gives_the_same_observations_on_both_executors():
    wrapped = {
        executor: SingleEnvSensorObservation(gym.make("Ant-v5"), ant_sensors(), seed=1, executor=executor)
        for executor in ("torch", "numpy")
    }
    obs = [env.reset(seed=0)[0] for env in wrapped.values()]
    rng = np.random.default_rng(1)
    for t in range(80):
        a = rng.uniform(-1, 1, 8)
        obs = [env.step(a)[0] for env in wrapped.values()]
        for key in ("policy", "critic"):
            np.testing.assert_array_equal(obs[0][key], obs[1][key], err_msg=f"step {t}: {key}")
    assert wrapped["numpy"].manager.executor_used == "numpy"


def test_a_mistyped_executor_names_the_option_and_the_fix():
    envs = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(ValueError, match=r"executor='fast'.*Fix"):
        SensorObservation(envs, SENSORS, executor="fast")


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_torch_env_gives_the_same_observations_on_both_executors(mode):
    """A natively batched torch env on the CPU: its tensors take the torch route into the raw columns
    while the rest of the step runs on the chosen executor."""
    from sensorgym.envs.batched_pendulum import BatchedPendulumEnv

    wrapped = {
        executor: SensorObservation(
            BatchedPendulumEnv(num_envs=4, autoreset_mode=mode), SENSORS, seed=5, executor=executor
        )
        for executor in ("torch", "numpy")
    }
    for env in wrapped.values():
        env.reset(seed=0)
    for t in range(230):
        a = torch.full((4, 1), float(np.sin(t / 7.0)))
        (obs_t, *_), (obs_n, *_) = (env.step(a) for env in wrapped.values())
        for key in ("policy", "critic"):
            assert torch.equal(obs_t[key], obs_n[key]), f"step {t}: {key}"
    assert wrapped["numpy"].manager.executor_used == "numpy"
