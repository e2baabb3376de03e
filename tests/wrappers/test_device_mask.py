"""Issue 11.3: a SAME_STEP boundary with a torch env on CUDA crashed, because the wrapper called
``np.asarray`` on the device tensor ``info["_final_obs"]`` before moving it to the host.

No GPU runs here, so the mask is a tensor that numpy refuses exactly as it refuses a CUDA tensor, until
it is moved to the CPU; the run must equal the same run with a plain mask."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.vector import VectorWrapper

import sensorgym as sg
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation


class DeviceTensor(torch.Tensor):
    """Refuses numpy like a CUDA tensor; ``.cpu()``/``.to("cpu")`` give a plain host tensor."""

    def __array__(self, *args, **kwargs):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() first.")

    def numpy(self, *args, **kwargs):
        raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() first.")

    def cpu(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor).cpu(*args, **kwargs)

    def to(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor).to(*args, **kwargs)


class DeviceMask(VectorWrapper):
    def step(self, actions):
        obs, r, te, tr, info = self.env.step(actions)
        if "_final_obs" in info:
            info = {**info, "_final_obs": info["_final_obs"].as_subclass(DeviceTensor)}
        return obs, r, te, tr, info


def test_numpy_refuses_the_stand_in_mask():
    with pytest.raises(TypeError, match="cuda"):
        np.asarray(torch.ones(2, dtype=torch.bool).as_subclass(DeviceTensor))


def test_same_step_boundary_with_a_device_mask_equals_the_plain_run():
    sensors = {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, noise=0.1)}

    def run(wrap: bool) -> list[dict]:
        env = BatchedPendulumEnv(4, max_episode_steps=3, autoreset_mode="SameStep")
        env = SensorObservation(DeviceMask(env) if wrap else env, sensors, seed=0)
        out = [env.reset(seed=1)[0]]
        for _ in range(8):  # two boundaries
            obs, _, _, trunc, info = env.step(torch.zeros(4, 1))
            out += [obs, info["final_obs"]] if bool(trunc.any()) else [obs]
        return out

    plain, device = run(False), run(True)
    assert len(plain) == len(device) == 1 + 8 + 2
    for a, b in zip(plain, device, strict=True):
        for key in ("policy", "critic"):
            assert torch.equal(a[key], b[key])
