"""Stable-Baselines3: VecEnv adapter (terminal observations with the critic part) and the asymmetric
actor-critic policy (actor blind to the critic input, no value gradient into the actor, save/load,
PPO and A2C, VecNormalize)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.vec_env import VecNormalize

import sensorgym as sg
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv
from sensorgym.wrappers import SensorObservation, make_sensor_vec

from ..wrappers.envs import RampEnv

SENSORS = {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.05, delay=0.05, history_length=2)}


def _pendulum_vec(n=2, mode="SameStep", vectorization_mode="sync"):
    return SB3VecEnv(
        make_sensor_vec(
            "Pendulum-v1", n, SENSORS, autoreset_mode=mode, seed=0, vectorization_mode=vectorization_mode
        )
    )


def _model(env, cls=PPO, **kw):
    if cls is PPO:
        kw.setdefault("batch_size", 16 * env.num_envs)
    return cls(
        AsymmetricActorCriticPolicy,
        env,
        n_steps=16,
        seed=0,
        device="cpu",
        policy_kwargs=dict(net_arch=dict(pi=[16], vf=[24])),
        **kw,
    )


def _obs_batch(model, n=5):
    g = torch.Generator().manual_seed(0)
    space = model.observation_space
    return {k: torch.randn(n, *space[k].shape, generator=g) for k in space.spaces}


def test_actor_ignores_the_critic_input_and_the_critic_uses_it():
    model = _model(_pendulum_vec())
    policy = model.policy
    obs = _obs_batch(model)
    shifted = {**obs, "critic": obs["critic"] + 10.0}
    with torch.no_grad():
        d1, d2 = policy.get_distribution(obs), policy.get_distribution(shifted)
        assert torch.equal(d1.distribution.mean, d2.distribution.mean)
        actions = d1.distribution.mean
        assert torch.equal(
            policy.evaluate_actions(obs, actions)[1], policy.evaluate_actions(shifted, actions)[1]
        )
        assert not torch.allclose(policy.predict_values(obs), policy.predict_values(shifted))
    # the critic really reads policy + critic, the actor only policy
    assert policy.pi_features_extractor.features_dim == 4
    assert policy.vf_features_extractor.features_dim == 4 + 2 + 3


def test_value_loss_sends_no_gradient_to_the_actor():
    model = _model(_pendulum_vec())
    policy = model.policy
    obs = _obs_batch(model)
    policy.zero_grad()
    policy.predict_values(obs).pow(2).mean().backward()
    actor = [
        *policy.pi_features_extractor.parameters(),
        *policy.mlp_extractor.policy_net.parameters(),
        *policy.action_net.parameters(),
        policy.log_std,
    ]
    assert all(p.grad is None or not p.grad.any() for p in actor)
    critic = [*policy.mlp_extractor.value_net.parameters(), *policy.value_net.parameters()]
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in critic)
    n_params = sum(p.numel() for p in policy.parameters())
    n_opt = sum(p.numel() for g in policy.optimizer.param_groups for p in g["params"])
    assert n_params == n_opt


@pytest.mark.parametrize("algo", [PPO, A2C])
def test_learn_save_load_round_trip(tmp_path, algo):
    env = _pendulum_vec()
    model = _model(env, cls=algo)
    model.learn(64)
    path = tmp_path / "model.zip"
    model.save(path)
    loaded = algo.load(path, env=env, device="cpu")
    assert isinstance(loaded.policy, AsymmetricActorCriticPolicy)
    assert loaded.policy.critic_keys == ("policy", "critic")
    obs = env.reset()
    a1, _ = model.predict(obs, deterministic=True)
    a2, _ = loaded.predict(obs, deterministic=True)
    np.testing.assert_array_equal(a1, a2)


def test_vec_normalize_on_the_policy_key():
    env = VecNormalize(_pendulum_vec(mode="Disabled"), norm_obs_keys=["policy"])
    model = _model(env)
    model.learn(64)
    assert env.obs_rms["policy"].count > 32


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_terminal_observation_carries_the_critic_part(mode):
    venv = SensorObservation(
        SyncVectorEnv([RampEnv] * 3, autoreset_mode=mode),
        {"x": sg.StateSensorOptions(key="obs", index=[2], delay=0.1)},
        seed=0,
    )
    env = SB3VecEnv(venv)
    obs = env.reset()
    seen = 0
    for _ in range(60):
        obs, rewards, dones, infos = env.step(np.zeros((3, 1), np.float32))
        assert rewards.dtype == np.float32 and obs["policy"].shape == (3, 1)
        for i in np.flatnonzero(dones):
            term = infos[i]["terminal_observation"]
            assert set(term) == {"policy", "critic"} and term["critic"].shape == (1 + 3,)
            # the critic's GT of x equals the env's own terminal x (critic = [GT x, episode, t, x])
            assert term["critic"][0] == term["critic"][3]
            assert isinstance(infos[i]["TimeLimit.truncated"], bool)
            seen += 1
            assert obs["critic"][i][2] == 0  # the returned obs is the reset obs (t = 0)
    assert seen >= 5


def test_adapter_rejects_next_step_envs():
    venv = SensorObservation(SyncVectorEnv([RampEnv]), {"x": sg.StateSensorOptions(key="obs")})
    with pytest.raises(ValueError, match=r"NEXT_STEP.*Fix.*SAME_STEP"):
        SB3VecEnv(venv)


def test_async_and_torch_batched_envs_train():
    env = _pendulum_vec(vectorization_mode="async")
    _model(env).learn(32)
    env.close()
    torch_env = SB3VecEnv(
        SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"), SENSORS, seed=0)
    )
    _model(torch_env).learn(64)
    assert isinstance(torch_env.reset()["policy"], np.ndarray)


def test_async_vector_env_with_sensor_wrapper_through_sb3():
    venv = SensorObservation(
        AsyncVectorEnv([RampEnv] * 2, autoreset_mode=AutoresetMode.SAME_STEP),
        {"x": sg.StateSensorOptions(key="obs", index=[2])},
        seed=0,
    )
    env = SB3VecEnv(venv)
    env.reset()
    assert env.get_attr("dt") == [0.1, 0.1]
    env.close()
