"""rsl_rl's own entry point, ``OnPolicyRunner.learn``, on a sensor env: the actor reads only ``"policy"``,
the critic the configured critic input, time-outs are bootstrapped from the terminal state, and
``init_at_random_ep_len=True`` really shortens the env's first episodes."""

from __future__ import annotations

import copy

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


def test_the_envs_info_reaches_rsl_rls_logger(tmp_path):
    """rsl_rl's logger records ``extras["log"]`` (the adapter's was always ``{}``): each numeric entry of the
    env's info, an env that finished reporting its terminal step's (``final_info``), means over the steps
    of an iteration. BatchedPendulum reports ``info["state"] = [θ, θ̇]``."""

    class RecordingWriter:  # rsl_rl's logger plug-in point: cfg["logger"] = {"class_name": ...}
        scalars: dict = {}  # noqa: RUF012

        def __init__(self, log_dir, **kwargs):
            RecordingWriter.scalars = {}

        def add_scalar(self, tag, value, step):
            RecordingWriter.scalars[tag] = float(value)

        def stop(self):
            pass

    venv = sensor_env()
    infos, step = [], venv.step

    def recording_step(actions):
        out = step(actions)
        infos.append((out[-1], out[2] | out[3]))
        return out

    venv.step = recording_step
    env = RslRlVecEnv(venv, seed=0)
    cfg = _cfg(env) | {"logger": {"class_name": RecordingWriter}}
    OnPolicyRunner(env, cfg, log_dir=str(tmp_path), device="cpu").learn(1)

    assert len(infos) == STEPS
    rows = []
    for info, done in infos:  # an env that finished reports its last step, not its reset
        rows.append(
            torch.where(done[:, None], info["final_info"]["state"], info["state"])
            if done.any()
            else info["state"]
        )
    assert any(done.any() for _, done in infos)
    expected = torch.stack(rows).mean()
    assert RecordingWriter.scalars["Episode/state"] == pytest.approx(float(expected), rel=1e-6)


def test_recurrent_actor_and_critic_keep_their_hidden_state():
    """A guard for recurrent models: at a time-out, ``TerminalValuePPO`` evaluates ``V(s_T)`` from the
    critic's hidden state of the step (``h_t``) and leaves that state as rsl_rl's own PPO does."""
    env = RslRlVecEnv(sensor_env(), critic_input=("policy", "critic"))
    cfg = _cfg(env)
    recurrent = {"class_name": "RNNModel", "hidden_dims": [16], "rnn_type": "lstm", "rnn_hidden_dim": 8}
    cfg["actor"] = recurrent | {"distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0}}
    cfg["critic"] = dict(recurrent)
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    alg = runner.alg
    assert alg.actor.is_recurrent and alg.critic.is_recurrent
    records: list = []
    process = alg.process_env_step

    def hidden(model):
        return tuple(h.clone() for h in model.get_hidden_state())

    def recording_process(obs, rewards, dones, extras):
        h_t = (hidden(alg.actor), hidden(alg.critic))  # after act(): the state the step's values came from
        expected = None
        if extras["time_outs"].any():
            with torch.no_grad():  # V(s_T | h_t), evaluated on a copy of the critic
                critic = copy.deepcopy(alg.critic)
                critic.reset(hidden_state=tuple(h.clone() for h in h_t[1]))
                expected = critic(extras[TERMINAL_OBS_KEY]).squeeze(-1)
        stored_before = alg.storage.step
        process(obs, rewards, dones, extras)
        after = (hidden(alg.actor), hidden(alg.critic))
        records.append(
            (h_t, after, dones.bool(), rewards.clone(), extras["time_outs"], expected, stored_before)
        )

    alg.process_env_step = recording_process
    runner.learn(1, init_at_random_ep_len=True)  # time-outs at different steps: some envs run on
    timed_out = 0
    for h_t, after, done, rewards, time_outs, expected, t in records:
        for before_model, after_model in zip(h_t, after, strict=True):
            for b, a in zip(before_model, after_model, strict=True):  # rsl_rl zeroes the finished envs only
                torch.testing.assert_close(
                    a, torch.where(done[None, :, None], torch.zeros_like(b), b), rtol=0, atol=0
                )
        if expected is not None:
            stored = alg.storage.rewards[t, :, 0]
            torch.testing.assert_close(stored[time_outs], rewards[time_outs] + GAMMA * expected[time_outs])
            timed_out += int(time_outs.sum())
    assert timed_out >= 1
    assert any(expected is not None and not done.all() for _, _, done, _, _, expected, _ in records)
