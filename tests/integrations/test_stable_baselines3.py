"""Stable-Baselines3's own entry points (``learn``, ``evaluate_policy``, ``save``/``load``) on sensor envs.

* PPO ``learn`` with forward hooks: the actor reads only ``"policy"``, the critic the configured critic
  input, and a time-out's stored reward is ``r + γ·V(terminal state)`` (both critic inputs).
* SAC and TD3 with the asymmetric policies: the actor reads only ``"policy"`` (its output is invariant to
  ``"critic"``), the Q-networks read the critic input, and the target Q of a time-out transition reads the
  terminal critic observation (never the next episode's first one).
* Checkpoints of every supported algorithm (PPO, A2C, SAC, TD3, DDPG) reload with their own class and
  continue training bit-identically.
* ``SB3VecEnv.env_is_wrapped`` answers truthfully, so ``evaluate_policy`` warns only when it should.
* A slow test: SAC learns Pendulum through a delayed noisy sensor.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")
from gymnasium.wrappers import TimeLimit
from stable_baselines3 import A2C, DDPG, PPO, SAC, TD3
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.noise import NormalActionNoise
from stable_baselines3.common.vec_env import VecMonitor

import sensorgym as sg
from sensorgym.app.training import load_checkpoint, save_checkpoint
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.integrations.sb3 import (
    AsymmetricActorCriticPolicy,
    AsymmetricSACPolicy,
    AsymmetricTD3Policy,
    SB3VecEnv,
)
from sensorgym.wrappers import SensorObservation, make_sensor_vec

from .common import CRITIC_DIM, CRITIC_INPUTS, POLICY_DIM, SENSORS, InputRecorder, N, critic_view, sensor_env

STEPS = 16
GAMMA = 0.9


def _width(critic_input: tuple[str, ...]) -> int:
    return (POLICY_DIM if "policy" in critic_input else 0) + CRITIC_DIM


def _record_steps(env: SB3VecEnv) -> list:
    """Record every ``step_wait`` of the adapter: ``(obs, rewards, dones, infos)`` (copies)."""
    steps, step_wait = [], env.step_wait

    def recording_step_wait():
        obs, rewards, dones, infos = step_wait()
        steps.append(({k: v.copy() for k, v in obs.items()}, rewards.copy(), dones.copy(), infos))
        return obs, rewards, dones, infos

    env.step_wait = recording_step_wait
    return steps


def _ppo(env: SB3VecEnv, **policy_kwargs) -> PPO:
    """A small PPO with the asymmetric policy (one rollout of STEPS steps per env, one epoch)."""
    return PPO(
        AsymmetricActorCriticPolicy,
        env,
        n_steps=STEPS,
        batch_size=64,
        n_epochs=1,
        gamma=GAMMA,
        seed=0,
        device="cpu",
        policy_kwargs=dict(net_arch=[16], **policy_kwargs),
    )


def _rows(x: torch.Tensor) -> set[bytes]:
    return {row.numpy().tobytes() for row in x.detach().float().reshape(-1, x.shape[-1])}


# -- PPO -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("critic_input", CRITIC_INPUTS)
def test_ppo_learn_inputs_and_terminal_bootstrap(critic_input):
    env = SB3VecEnv(sensor_env())
    model = _ppo(env, critic_input=critic_input)
    policy = model.policy
    actor_in = InputRecorder(policy.mlp_extractor.policy_net[0])
    critic_in = InputRecorder(policy.mlp_extractor.value_net[0])
    value_out = InputRecorder(policy.value_net)
    steps = _record_steps(env)

    model.learn(STEPS * N)

    width = _width(critic_input)
    assert actor_in.inputs and all(x.shape[-1] == POLICY_DIM for x in actor_in.inputs)
    assert critic_in.inputs and all(x.shape[-1] == width for x in critic_in.inputs)
    assert len(critic_in.inputs) == len(value_out.outputs)
    # SB3 flattened the rollout for training (env-major); back to (step, env, dim)
    stored = {k: v.reshape(N, STEPS, -1).swapaxes(0, 1) for k, v in model.rollout_buffer.observations.items()}
    for t in range(STEPS):  # the rollout's actor and critic inputs are the observations SB3 stored
        obs = {k: torch.as_tensor(v[t]) for k, v in stored.items()}
        assert actor_in.find(obs["policy"]) is not None
        assert critic_in.find(critic_view(obs, critic_input)) is not None
        if t:
            assert np.array_equal(stored["policy"][t], steps[t - 1][0]["policy"])

    bootstrapped = 0
    for t, (obs, rewards, dones, infos) in enumerate(steps):
        for i in np.flatnonzero(dones):
            assert infos[i]["TimeLimit.truncated"]  # Pendulum only truncates
            terminal = {k: torch.as_tensor(v)[None] for k, v in infos[i]["terminal_observation"].items()}
            view = critic_view(terminal, critic_input)
            assert not torch.equal(
                view, critic_view({k: torch.as_tensor(v[i : i + 1]) for k, v in obs.items()}, critic_input)
            )
            call = critic_in.find(view)
            assert call is not None, "the critic never evaluated the terminal observation"
            expected = rewards[i] + GAMMA * value_out.outputs[call][0, 0].item()
            np.testing.assert_allclose(model.rollout_buffer.rewards[t, i], expected, rtol=1e-6)
            bootstrapped += 1
    assert bootstrapped >= N


# -- every autoreset mode through SB3's own learn ------------------------------------------------------
def _mode_env(mode: str, kind: str) -> SensorObservation:
    if kind == "torch":  # batched final_obs (SAME_STEP) or reset_mask resets of a torch env (DISABLED)
        inner = BatchedPendulumEnv(4, autoreset_mode=mode, max_episode_steps=6)
        return SensorObservation(inner, SENSORS, seed=0)
    env_kwargs = {"max_episode_steps": 6}  # Sync: Gymnasium's object array of final observations
    return make_sensor_vec("Pendulum-v1", 4, SENSORS, autoreset_mode=mode, seed=0, env_kwargs=env_kwargs)


@pytest.mark.parametrize("kind", ["sync", "torch"])
@pytest.mark.parametrize("mode", ["SameStep", "Disabled", "NextStep"])
def test_ppo_learn_in_every_autoreset_mode(mode, kind):
    """SB3VecEnv steps through the adapters' shared SameStepStepper: in SAME_STEP and DISABLED mode PPO's
    own ``learn`` gets each finished episode's terminal Dict (critic part included) and the next episode's
    first observation, and bootstraps the time-out from the terminal one; NEXT_STEP is refused."""
    if mode == "NextStep":
        with pytest.raises(ValueError, match=r"SB3VecEnv.*NEXT_STEP.*Fix"):
            SB3VecEnv(_mode_env(mode, kind))
        return
    env = SB3VecEnv(_mode_env(mode, kind))
    model = _ppo(env)
    critic_in = InputRecorder(model.policy.mlp_extractor.value_net[0])
    value_out = InputRecorder(model.policy.value_net)
    steps = _record_steps(env)
    model.learn(STEPS * env.num_envs)
    finished = 0
    for t, (obs, rewards, dones, infos) in enumerate(steps):
        assert rewards.dtype == np.float32 and dones.dtype == bool and obs["policy"].dtype == np.float32
        for i in np.flatnonzero(dones):
            assert infos[i]["TimeLimit.truncated"] is True
            terminal = infos[i]["terminal_observation"]
            assert set(terminal) == {"policy", "critic"} and terminal["critic"].shape == (CRITIC_DIM,)
            # critic = [GT cos, GT sin, env obs (cos, sin, speed)]: the terminal GT is the env's own last obs
            np.testing.assert_array_equal(terminal["critic"][:2], terminal["critic"][2:4])
            assert not np.array_equal(terminal["critic"], obs["critic"][i])  # obs is the next episode's
            view = critic_view(
                {k: torch.as_tensor(v)[None] for k, v in terminal.items()}, ("policy", "critic")
            )
            call = critic_in.find(view)
            assert call is not None, "the critic never evaluated the terminal observation"
            expected = rewards[i] + GAMMA * value_out.outputs[call][0, 0].item()
            np.testing.assert_allclose(model.rollout_buffer.rewards[t, i], expected, rtol=1e-6)
            finished += 1
    assert finished >= 2 * env.num_envs
    env.close()


# -- SAC / TD3 -----------------------------------------------------------------------------------------
def _off_policy(algo, env, critic_input=None, **kw):
    policy = AsymmetricSACPolicy if algo is SAC else AsymmetricTD3Policy
    policy_kwargs = dict(net_arch=[16])
    if critic_input is not None:
        policy_kwargs["critic_input"] = critic_input
    if algo is not SAC:
        kw.setdefault("action_noise", NormalActionNoise(np.zeros(1), 0.3 * np.ones(1)))
    return algo(
        policy,
        env,
        learning_starts=4 * env.num_envs,
        batch_size=256,
        gamma=GAMMA,
        seed=0,
        device="cpu",
        policy_kwargs=policy_kwargs,
        **kw,
    )


def _actor_first_linear(model):
    return model.actor.latent_pi[0] if isinstance(model, SAC) else model.actor.mu[0]


@pytest.mark.parametrize("algo", [SAC, TD3])
def test_off_policy_actor_output_is_invariant_to_the_critic_part(algo):
    model = _off_policy(algo, SB3VecEnv(sensor_env()))
    g = torch.Generator().manual_seed(0)
    space = model.observation_space
    obs = {k: torch.randn(5, *space[k].shape, generator=g) for k in space.spaces}
    shifted = {**obs, "critic": obs["critic"] + 10.0 * torch.randn(obs["critic"].shape, generator=g)}
    actions = torch.rand(5, 1, generator=g) * 4 - 2
    with torch.no_grad():
        kwargs = {"deterministic": True} if algo is SAC else {}
        assert torch.equal(model.actor(obs, **kwargs), model.actor(shifted, **kwargs))
        if algo is TD3:
            assert torch.equal(model.actor_target(obs), model.actor_target(shifted))
        # the Q-networks do read the critic part
        assert not torch.allclose(model.critic(obs, actions)[0], model.critic(shifted, actions)[0])
        assert not torch.allclose(
            model.critic_target(obs, actions)[0], model.critic_target(shifted, actions)[0]
        )
    numpy_obs = {k: v.numpy() for k, v in obs.items()}
    numpy_shifted = {k: v.numpy() for k, v in shifted.items()}
    np.testing.assert_array_equal(
        model.predict(numpy_obs, deterministic=True)[0], model.predict(numpy_shifted, deterministic=True)[0]
    )


@pytest.mark.parametrize("critic_input", CRITIC_INPUTS)
@pytest.mark.parametrize("algo", [SAC, TD3])
def test_off_policy_learn_inputs_and_time_limit_bootstrap(algo, critic_input):
    """Through ``learn``: the actor reads only ``"policy"``; the Q-networks (and their targets) read the
    critic input; a time-out is stored with its terminal observation and ``done = 0`` after SB3's timeout
    handling, and the target Q-network evaluates that terminal critic input, never the reset one."""
    env = SB3VecEnv(sensor_env())
    model = _off_policy(algo, env, critic_input)
    width = _width(critic_input)
    assert model.actor.features_extractor.features_dim == POLICY_DIM
    assert model.critic.features_extractor.features_dim == width
    actor_in = InputRecorder(_actor_first_linear(model))
    critic_in = InputRecorder(model.critic.q_networks[0][0])
    target_in = InputRecorder(model.critic_target.q_networks[0][0])
    steps = _record_steps(env)

    model.learn(STEPS * N)

    assert actor_in.inputs and all(x.shape[-1] == POLICY_DIM for x in actor_in.inputs)
    assert all(x.shape[-1] == width + 1 for x in critic_in.inputs + target_in.inputs)  # + action
    buffer = model.replay_buffer
    stored = {
        k: np.concatenate([buffer.observations[k][: buffer.pos], buffer.next_observations[k][: buffer.pos]])
        for k in ("policy", "critic")
    }
    stored_rows = {k: _rows(torch.as_tensor(v)) for k, v in stored.items()}
    stored_critic = _rows(
        critic_view({k: torch.as_tensor(v).flatten(0, 1) for k, v in stored.items()}, critic_input)
    )
    for x in actor_in.inputs:  # acting and training: the actor only ever read stored policy observations
        assert _rows(x) <= stored_rows["policy"]
    for x in critic_in.inputs + target_in.inputs:  # the Q-networks read stored critic inputs (+ action)
        assert _rows(x[:, :width]) <= stored_critic
    target_rows = set().union(*(_rows(x[:, :width]) for x in target_in.inputs))
    checked = 0
    for t, (obs, _, dones, infos) in enumerate(steps):
        for i in np.flatnonzero(dones):
            terminal = infos[i]["terminal_observation"]
            assert infos[i]["TimeLimit.truncated"]
            for k in ("policy", "critic"):  # stored as the transition's next observation, timeout flagged
                np.testing.assert_array_equal(buffer.next_observations[k][t, i], terminal[k])
            assert buffer.timeouts[t, i] == 1.0  # so SB3's target uses (1 - done) = 1: it bootstraps
            view = critic_view({k: torch.as_tensor(v)[None] for k, v in terminal.items()}, critic_input)
            reset = critic_view({k: torch.as_tensor(v[i : i + 1]) for k, v in obs.items()}, critic_input)
            assert view.numpy().tobytes() in target_rows, "the target Q never read the terminal state"
            assert reset.numpy().tobytes() not in target_rows  # the reset obs is no transition's next obs
            checked += 1
    assert checked >= N


# -- checkpoints -----------------------------------------------------------------------------------------
def _pendulum_env():
    return SB3VecEnv(make_sensor_vec("Pendulum-v1", 2, SENSORS, autoreset_mode="SameStep", seed=0))


def _make_model(algo, env):
    common = dict(seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]))
    if algo in (PPO, A2C):
        extra = dict(batch_size=32) if algo is PPO else {}
        return algo(AsymmetricActorCriticPolicy, env, n_steps=16, **extra, **common)
    policy = AsymmetricSACPolicy if algo is SAC else AsymmetricTD3Policy
    extra = {} if algo is SAC else dict(action_noise=NormalActionNoise(np.zeros(1), 0.3 * np.ones(1)))
    return algo(policy, env, learning_starts=32, batch_size=32, **extra, **common)


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.get_parameters()["policy"].items()}


@pytest.mark.parametrize("algo", [PPO, A2C, SAC, TD3, DDPG])
def test_checkpoint_round_trip_is_bit_identical(tmp_path, algo):
    env = _pendulum_env()
    model = _make_model(algo, env)
    model.learn(64)
    save_checkpoint(tmp_path, model, env)
    saved = _weights(model)
    model.learn(96, reset_num_timesteps=False)  # the uninterrupted run
    reference, reference_obs = _weights(model), {k: v.copy() for k, v in model._last_obs.items()}

    resumed, _ = load_checkpoint(tmp_path, _pendulum_env())
    assert type(resumed) is algo and resumed.device == torch.device("cpu")
    assert type(resumed.policy) is type(model.policy)
    assert resumed.policy.critic_input == ("policy", "critic")
    loaded = _weights(resumed)
    assert loaded.keys() == saved.keys() and all(torch.equal(loaded[k], saved[k]) for k in saved)
    if algo not in (PPO, A2C):
        assert resumed.replay_buffer.size() == 64 // 2
    resumed.learn(96, reset_num_timesteps=False)
    after = _weights(resumed)
    for k in reference:
        assert torch.equal(after[k], reference[k]), f"{algo.__name__}: {k} differs after resuming"
    for k in reference_obs:
        np.testing.assert_array_equal(resumed._last_obs[k], reference_obs[k])
    again, _ = load_checkpoint(tmp_path, _pendulum_env(), device="cpu")  # the requested device
    assert type(again) is algo and again.device == torch.device("cpu")


# -- env_is_wrapped / evaluate_policy --------------------------------------------------------------------
def _monitor_warnings(model, env) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rewards, lengths = evaluate_policy(model, env, n_eval_episodes=2, return_episode_rewards=True)
    assert len(rewards) == len(lengths) == 2
    return [str(w.message) for w in caught if "Monitor" in str(w.message)]


@pytest.mark.parametrize("vectorization_mode", ["sync", "async"])
def test_env_is_wrapped_and_evaluate_policy(vectorization_mode):
    monitored = SB3VecEnv(
        make_sensor_vec(
            "Pendulum-v1",
            2,
            SENSORS,
            autoreset_mode="SameStep",
            seed=0,
            vectorization_mode=vectorization_mode,
            wrappers=[Monitor],
            env_kwargs={"max_episode_steps": 20},
        )
    )
    assert monitored.env_is_wrapped(Monitor) == [True, True]
    assert monitored.env_is_wrapped(TimeLimit) == [True, True]
    assert monitored.env_is_wrapped(Monitor, indices=[1]) == [True]
    model = PPO(AsymmetricActorCriticPolicy, monitored, n_steps=16, batch_size=32, seed=0, device="cpu")
    assert _monitor_warnings(model, monitored) == []
    monitored.close()

    plain = SB3VecEnv(
        make_sensor_vec(
            "Pendulum-v1",
            2,
            SENSORS,
            autoreset_mode="SameStep",
            seed=0,
            vectorization_mode=vectorization_mode,
            env_kwargs={"max_episode_steps": 20},
        )
    )
    assert plain.env_is_wrapped(Monitor) == [False, False]
    assert _monitor_warnings(model, plain)  # no Monitor: SB3 rightly warns
    plain.close()


def test_natively_batched_env_is_not_monitor_wrapped_but_vec_monitor_counts():
    env = SB3VecEnv(sensor_env())
    assert env.env_is_wrapped(Monitor) == [False] * N
    model = PPO(AsymmetricActorCriticPolicy, env, n_steps=16, batch_size=32, seed=0, device="cpu")
    assert _monitor_warnings(model, VecMonitor(env)) == []


# -- slow: SAC learns Pendulum through a delayed noisy sensor --------------------------------------------
@pytest.mark.slow
def test_sac_learns_pendulum_through_a_delayed_noisy_sensor():
    """The policy sees ``[cos θ, sin θ]`` one step late (50 ms), with noise 0.05 and a history of 3 reads;
    never θ̇. The Q-networks read the ground truth. A random policy scores about -1200."""
    sensors = {
        "angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05, noise=0.05, history_length=3)
    }
    env = SB3VecEnv(make_sensor_vec("Pendulum-v1", 1, sensors, autoreset_mode="SameStep", seed=0))
    model = SAC(AsymmetricSACPolicy, env, learning_starts=1000, seed=0, device="cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks: more threads only oversubscribe a shared CPU (30x slower)
    try:
        model.learn(12_000)
    finally:
        torch.set_num_threads(threads)
    eval_env = SB3VecEnv(
        make_sensor_vec("Pendulum-v1", 1, sensors, autoreset_mode="SameStep", seed=1000, wrappers=[Monitor])
    )
    mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
    print(f"SAC, delayed noisy sensor, 12k steps: mean return {mean:.1f} +- {std:.1f} over 10 episodes")
    assert mean > -400
