"""BatchedPendulumEnv: Pendulum-v1 dynamics, batched; autoreset modes; device handling."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from sensorgym.envs import BatchedPendulumEnv


def test_matches_gymnasium_pendulum_step_for_step():
    b = 5
    env = BatchedPendulumEnv(num_envs=b)
    env.reset(seed=0)
    refs = [gym.make("Pendulum-v1").unwrapped for _ in range(b)]
    for i, r in enumerate(refs):
        r.reset(seed=i)
        r.state = np.array([env.theta[i].item(), env.theta_dot[i].item()])
    rng = np.random.default_rng(0)
    for _ in range(60):
        u = rng.uniform(-2.5, 2.5, (b, 1)).astype(np.float32)  # also beyond the torque limit
        obs, rew, term, trunc, _ = env.step(torch.from_numpy(u))
        for i, r in enumerate(refs):
            o, rr, *_ = r.step(u[i])
            np.testing.assert_allclose(obs[i].numpy(), o, atol=2e-4)
            assert rew[i].item() == pytest.approx(rr, abs=2e-3)
        assert not term.any() and not trunc.any()


def test_truncation_and_next_step_autoreset():
    env = BatchedPendulumEnv(num_envs=2, max_episode_steps=3)
    env.reset(seed=1)
    for _ in range(2):
        *_, trunc, _ = env.step(torch.zeros(2, 1))
        assert not trunc.any()
    *_, trunc, _ = env.step(torch.zeros(2, 1))
    assert trunc.all()
    obs, rew, _, trunc, info = env.step(torch.ones(2, 1))  # the autoreset step: action ignored
    assert (rew == 0).all() and not trunc.any() and (env.steps == 0).all()
    assert torch.equal(obs[:, 2], info["state"][:, 1])


def test_same_step_gives_batched_final_obs_and_disabled_needs_a_reset():
    env = BatchedPendulumEnv(num_envs=2, max_episode_steps=2, autoreset_mode=AutoresetMode.SAME_STEP)
    env.reset(seed=2)
    env.step(torch.zeros(2, 1))
    obs, _, _, trunc, info = env.step(torch.zeros(2, 1))
    assert trunc.all() and info["_final_obs"].all() and info["final_obs"].shape == (2, 3)
    assert not torch.equal(obs, info["final_obs"])
    env = BatchedPendulumEnv(num_envs=2, max_episode_steps=1, autoreset_mode="Disabled")
    env.reset(seed=2)
    env.step(torch.zeros(2, 1))
    with pytest.raises(RuntimeError, match="reset_mask"):
        env.step(torch.zeros(2, 1))
    env.reset(options={"reset_mask": np.array([True, True])})
    env.step(torch.zeros(2, 1))


def test_registered_vector_entry_point():
    env = gym.make_vec("sensorgym/BatchedPendulum-v0", num_envs=4, vectorization_mode="vector_entry_point")
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.shape == (4, 3)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_device():
    env = BatchedPendulumEnv(num_envs=8, device="cuda")
    obs, _ = env.reset(seed=0)
    obs, rew, *_ = env.step(torch.zeros(8, 1, device="cuda"))
    assert obs.device.type == "cuda" and rew.device.type == "cuda"
