"""rsl_rl's own entry point, ``OnPolicyRunner.learn``, on a sensor env: the actor reads only ``"policy"``,
the critic the configured critic input, time-outs are bootstrapped from the terminal state, and
``init_at_random_ep_len=True`` really shortens the env's first episodes."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("rsl_rl")
from rsl_rl.runners import OnPolicyRunner

from sensorgym.integrations.rsl_rl import TERMINAL_OBS_KEY, RslRlVecEnv

from .common import (
    CRITIC_DIM,
    CRITIC_INPUTS,
    HORIZON,
    POLICY_DIM,
    InputRecorder,
    critic_view,
    first_linear,
    sensor_env,
)

STEPS = 16
GAMMA = 0.9


def _cfg(env: RslRlVecEnv) -> dict:
    return {
        "num_steps_per_env": STEPS,
        "save_interval": 1000,
        "obs_groups": env.obs_groups,
        "algorithm": {
            "class_name": "sensorgym.integrations.rsl_rl:TerminalValuePPO",
            "num_learning_epochs": 1,
            "num_mini_batches": 2,
            "gamma": GAMMA,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [16],
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [16]},
    }


def _record_steps(env: RslRlVecEnv) -> list:
    steps = []
    step = env.step

    def recording_step(actions):
        obs, rewards, dones, extras = step(actions)
        steps.append((obs.clone(), rewards.clone(), dones.clone(), {k: v for k, v in extras.items()}))
        return obs, rewards, dones, extras

    env.step = recording_step
    return steps


@pytest.mark.parametrize("critic_input", CRITIC_INPUTS)
def test_on_policy_runner_inputs_and_terminal_bootstrap(critic_input):
    env = RslRlVecEnv(sensor_env(), critic_input=critic_input)
    assert env.max_episode_length == HORIZON  # the env's own limit, not a default
    runner = OnPolicyRunner(env, _cfg(env), log_dir=None, device="cpu")
    assert type(runner.alg).__name__ == "TerminalValuePPO"
    actor_in = InputRecorder(first_linear(runner.alg.actor.mlp))
    critic_in = InputRecorder(first_linear(runner.alg.critic.mlp))
    critic_out = InputRecorder(runner.alg.critic)
    first_obs = env.get_observations().clone()
    steps = _record_steps(env)

    runner.learn(1, init_at_random_ep_len=True)

    observations = [first_obs] + [s[0] for s in steps]
    # the actor read exactly the policy observations of the rollout, in order
    for t in range(STEPS):
        assert torch.equal(actor_in.inputs[t], observations[t]["policy"])
    width = (POLICY_DIM if "policy" in critic_input else 0) + CRITIC_DIM
    assert all(x.shape[-1] == POLICY_DIM for x in actor_in.inputs)
    assert all(x.shape[-1] == width for x in critic_in.inputs)
    for t in range(STEPS):  # the critic read the configured critic input of every rollout observation
        assert critic_in.find(critic_view(observations[t], critic_input)) is not None

    # time-outs: the stored reward is r + gamma * V(terminal state), not V of the next episode's start
    storage_rewards = runner.alg.storage.rewards[:, :, 0]
    bootstrapped = 0
    for t, (obs, rewards, _, extras) in enumerate(steps):
        rows = extras["time_outs"]
        if not rows.any():
            continue
        terminal = critic_view(extras[TERMINAL_OBS_KEY], critic_input)
        reset = critic_view(obs, critic_input)
        assert not torch.equal(terminal[rows], reset[rows])
        call = critic_in.find(terminal)
        assert call is not None, "the critic was never evaluated on the terminal observation"
        value = critic_out.outputs[call].squeeze(-1)
        torch.testing.assert_close(storage_rewards[t][rows], rewards[rows] + GAMMA * value[rows])
        bootstrapped += int(rows.sum())
    assert bootstrapped >= 1

    # init_at_random_ep_len: the first episodes end at many different steps (all at step 12 otherwise)
    first_end = torch.full((env.num_envs,), -1)
    for t, (_, _, dones, _) in enumerate(steps):
        first_end = torch.where((first_end < 0) & dones.bool(), torch.tensor(t), first_end)
    assert len(set(first_end.tolist()) - {-1}) >= 3
    assert (first_end[first_end >= 0] < HORIZON - 1).any()


def test_episode_length_buf_is_the_envs_counter():
    env = RslRlVecEnv(sensor_env())
    env.episode_length_buf = torch.full((env.num_envs,), HORIZON - 1)
    _, _, dones, extras = env.step(torch.zeros(env.num_envs, 1))
    assert dones.all() and extras["time_outs"].all()  # the env itself truncated after one step
    assert torch.equal(env.episode_length_buf, torch.zeros(env.num_envs, dtype=torch.long))
    with pytest.raises(ValueError, match="truncates its episodes after 12 steps"):
        RslRlVecEnv(sensor_env(), max_episode_length=1000)


def test_sync_numpy_env_trains_and_uses_its_time_limit():
    from sensorgym.wrappers import make_sensor_vec

    from .common import SENSORS

    env = RslRlVecEnv(make_sensor_vec("Pendulum-v1", 2, SENSORS, autoreset_mode="SameStep", seed=0))
    assert env.max_episode_length == 200
    env.episode_length_buf = torch.tensor([199, 5])
    assert env.venv.unwrapped.get_attr("_elapsed_steps") == (199, 5)
    OnPolicyRunner(env, _cfg(env), log_dir=None, device="cpu").learn(1)
