"""The wrapper on a natively batched torch env: torch in, torch out on the env's device, all autoreset
modes, and the same numbers as the numpy path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, VectorWrapper

import sensorgym as sg
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation

SENSORS = {
    "cos_sin": sg.StateSensorOptions(
        key="obs", index=[0, 1], delay=0.05, jitter=0.05, noise=0.02, history_length=3
    ),
    "theta_dot": sg.StateSensorOptions(
        key="state", shape=(1,), index=[1], bias=sg.Normal(0, 0.1), resolution=0.01
    ),
}


class ToNumpy(VectorWrapper):
    """The same env seen through numpy arrays (what a CPU simulator would hand over)."""

    def reset(self, **kw):
        obs, info = self.env.reset(**kw)
        return obs.numpy(), {k: v.numpy() for k, v in info.items()}

    def step(self, actions):
        obs, r, te, tr, info = self.env.step(torch.as_tensor(actions))
        info = {k: (v.numpy() if torch.is_tensor(v) else v) for k, v in info.items()}
        return obs.numpy(), r.numpy(), te.numpy(), tr.numpy(), info


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_torch_path_equals_numpy_path(mode):
    envs = [
        SensorObservation(BatchedPendulumEnv(6, max_episode_steps=7, autoreset_mode=mode), SENSORS, seed=1),
        SensorObservation(
            ToNumpy(BatchedPendulumEnv(6, max_episode_steps=7, autoreset_mode=mode)), SENSORS, seed=1
        ),
    ]
    outs = [[], []]
    for k, env in enumerate(envs):
        obs, _ = env.reset(seed=4)
        outs[k].append(obs)
        g = torch.Generator().manual_seed(0)
        for t in range(30):
            a = torch.rand(6, 1, generator=g) * 4 - 2
            obs, _, term, trunc, info = env.step(a if k == 0 else a.numpy())
            outs[k].append(obs)
            if mode == "SameStep" and t % 7 == 6:  # batched env: batched final_obs, like its input
                assert info["_final_obs"].all()
                outs[k].append(dict(info["final_obs"]))
            if mode == "Disabled":
                done = term | trunc
                if bool(done.any()):
                    obs, _ = env.reset(options={"reset_mask": done})
                    outs[k].append(obs)
    assert len(outs[0]) == len(outs[1]) > 30
    for a, b in zip(outs[0], outs[1], strict=True):
        for key in ("policy", "critic"):
            assert isinstance(a[key], torch.Tensor)
            assert isinstance(b[key], (np.ndarray, torch.Tensor))
            np.testing.assert_array_equal(a[key].numpy(), np.asarray(b[key]))


def test_torch_observation_is_inside_the_space_and_fresh():
    env = SensorObservation(BatchedPendulumEnv(4), SENSORS, seed=0)
    obs, _ = env.reset(seed=0)
    prev = obs["policy"]
    for _ in range(5):
        obs, *_ = env.step(torch.zeros(4, 1))
        assert obs["policy"].data_ptr() != prev.data_ptr()
        assert env.observation_space.contains({k: v.numpy() for k, v in obs.items()})
        prev = obs["policy"]


def test_missing_autoreset_mode_warns_and_assumes_next_step():
    inner = BatchedPendulumEnv(2)
    inner.metadata = {"render_modes": []}
    with pytest.warns(UserWarning, match="assuming NEXT_STEP"):
        env = SensorObservation(inner, SENSORS)
    assert env.autoreset_mode is AutoresetMode.NEXT_STEP


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_env_gives_cuda_observations_without_syncs():
    env = SensorObservation(BatchedPendulumEnv(16, device="cuda"), SENSORS, seed=0)
    obs, _ = env.reset(seed=0)
    assert obs["policy"].device.type == "cuda"
    env.step(torch.zeros(16, 1, device="cuda"))
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            obs, *_ = env.step(torch.zeros(16, 1, device="cuda"))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert obs["critic"].device.type == "cuda"
