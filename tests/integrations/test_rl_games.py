"""rl_games' own entry point, ``Runner``, on a sensor env registered with ``sensorgym.integrations.rl_games.
register``: train (central value network on the configured critic input), then play the saved checkpoint
with rl_games' default player, which builds its env through ``env_creator``. Forward hooks check that
the actor (in training and in play) reads only ``"policy"``, the central value network only the
configured critic input, and that a time-out's stored reward is ``r + γ·V(terminal state)``
(``a2c_continuous`` and ``a2c_discrete``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("rl_games")
from rl_games.torch_runner import Runner

import sensorgym as sg
from sensorgym.integrations.rl_games import (
    TERMINAL_OBS_KEY,
    RlGamesVecEnv,
    SensorA2CAgent,
    SensorDiscreteA2CAgent,
    register,
)
from sensorgym.wrappers import make_sensor_vec

from .common import (
    CRITIC_DIM,
    CRITIC_INPUTS,
    HORIZON,
    POLICY_DIM,
    InputRecorder,
    N,
    critic_view,
    first_linear,
    rl_games_params,
    sensor_env,
)

STEPS = 16
GAMMA = 0.9


def _params(tmp_path: Path, env_name: str, num_actors: int = N) -> dict:
    return {"params": rl_games_params(tmp_path, env_name, num_actors, horizon=STEPS, gamma=GAMMA)}


@pytest.mark.parametrize("critic_input", CRITIC_INPUTS)
def test_runner_train_then_play(tmp_path, critic_input):
    name = "sensorgym_test_" + "_".join(critic_input)
    seeds: list = []

    def make_env(num_envs: int = N, seed: int | None = None):
        seeds.append(seed)
        return sensor_env(num_envs, HORIZON, seed=0 if seed is None else seed)

    runner = Runner()
    register(name, make_env, critic_input=critic_input, runner=runner)
    agents: list = []
    players: list = []
    build_agent = runner.algo_factory._builders["a2c_continuous"]
    build_player = runner.player_factory._builders["a2c_continuous"]
    runner.algo_factory.register_builder(
        "a2c_continuous", lambda **kw: agents.append(build_agent(**kw)) or agents[-1]
    )

    hooks: dict[str, InputRecorder] = {}
    steps: list = []
    finals: list = []
    original_init = SensorA2CAgent.__init__

    def init_with_hooks(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        hooks["actor"] = InputRecorder(first_linear(self.model.a2c_network.actor_mlp))
        cv = self.central_value_net.model.a2c_network
        hooks["critic"], hooks["value"] = InputRecorder(first_linear(cv.actor_mlp)), InputRecorder(cv.value)
        step = self.vec_env.step

        def recording_step(actions):
            obs, rewards, dones, infos = step(actions)
            steps.append(({k: v.clone() for k, v in obs.items()}, rewards.clone(), infos))
            return obs, rewards, dones, infos

        self.vec_env.step = recording_step
        sensors = self.vec_env.venv
        sensor_step = sensors.step

        def recording_sensor_step(actions):
            out = sensor_step(actions)
            finals.append(out[-1].get("final_obs"))
            return out

        sensors.step = recording_sensor_step

    SensorA2CAgent.__init__ = init_with_hooks
    try:
        runner.load(_params(tmp_path, name))
        runner.run({"train": True, "play": False})
    finally:
        SensorA2CAgent.__init__ = original_init

    (agent,) = agents
    assert type(agent) is SensorA2CAgent and isinstance(agent.vec_env, RlGamesVecEnv)
    assert seeds == [7]  # rl_games' seed reached the factory
    width = (POLICY_DIM if "policy" in critic_input else 0) + CRITIC_DIM
    actor, critic, value = hooks["actor"], hooks["critic"], hooks["value"]
    assert actor.inputs and all(x.shape[-1] == POLICY_DIM for x in actor.inputs)
    assert critic.inputs and all(x.shape[-1] == width for x in critic.inputs)
    assert len(critic.inputs) == len(value.outputs)
    observations = agent.experience_buffer.tensor_dict["obses"]
    states = agent.experience_buffer.tensor_dict["states"]
    for t in range(STEPS):  # what was stored is what the actor and the critic read, and it is the env's
        assert actor.find(observations[t]) is not None
        assert critic.find(states[t]) is not None
        if t:
            assert torch.equal(observations[t], steps[t - 1][0]["obs"])
            assert torch.equal(states[t], steps[t - 1][0]["states"])
    stored_rewards = agent.experience_buffer.tensor_dict["rewards"][:, :, 0]
    bootstrapped = 0
    for t, (obs, rewards, infos) in enumerate(steps):
        rows = infos["time_outs"].bool()
        if not rows.any():
            continue
        terminal = infos[TERMINAL_OBS_KEY]["states"]
        # the terminal state is the sensor wrapper's terminal observation (its info["final_obs"])
        assert torch.equal(terminal[rows], critic_view(finals[t], critic_input)[rows])
        assert not torch.equal(terminal[rows], obs["states"][rows])  # not the next episode's start
        call = critic.find(terminal)
        assert call is not None, "the central value net never saw the terminal state"
        expected = rewards.view(-1) + GAMMA * value.outputs[call][:, 0]
        torch.testing.assert_close(stored_rewards[t][rows], expected[rows])
        bootstrapped += int(rows.sum())
    assert bootstrapped >= N

    # play: the default player (no use_vecenv) builds its env with env_creator and reads only "policy"
    checkpoints = sorted((tmp_path / "run" / "nn").glob("last_*.pth"))
    assert checkpoints, "training saved no checkpoint"
    played: list[InputRecorder] = []

    def player_with_hook(**kw):
        player = build_player(**kw)
        played.append(InputRecorder(first_linear(player.model.a2c_network.actor_mlp)))
        players.append(player)
        return player

    runner.player_factory.register_builder("a2c_continuous", player_with_hook)
    runner.run({"train": False, "play": True, "checkpoint": str(checkpoints[-1])})
    player = players[-1]
    assert isinstance(player.env, RlGamesVecEnv) and player.env.critic_input == critic_input
    (play_actor,) = played
    assert play_actor.inputs and all(x.shape == (N, POLICY_DIM) for x in play_actor.inputs)
    trained = agent.model.a2c_network.state_dict()
    for key, tensor in player.model.a2c_network.state_dict().items():
        assert torch.equal(tensor, trained[key]), key


def test_num_actors_mismatch_is_a_clear_error(tmp_path):
    register("sensorgym_test_fixed", lambda **kw: sensor_env(4))  # ignores num_envs: always 4 envs
    runner = Runner()
    runner.load(_params(tmp_path, "sensorgym_test_fixed", num_actors=N))
    with pytest.raises(ValueError, match=r"num_actors=8, but the factory built 4 envs.*Fix"):
        runner.run({"train": True, "play": False})


def test_player_env_of_a_factory_without_default_size_is_a_clear_error():
    from rl_games.common import env_configurations

    register("sensorgym_test_sized", lambda num_envs: sensor_env(num_envs))
    creator = env_configurations.configurations["sensorgym_test_sized"]["env_creator"]
    with pytest.raises(TypeError, match=r"requires num_envs\. Fix"):
        creator()
    assert creator(num_envs=2).num_envs == 2  # e.g. params.config.player.env_config.num_envs


# -- a recurrent actor / central value network: the terminal value leaves the hidden state alone ----------
def _recurrent_params(tmp_path: Path, name: str, central_value: bool) -> dict:
    params = rl_games_params(tmp_path, name, N, horizon=STEPS, gamma=GAMMA)
    lstm = {"name": "lstm", "units": 8, "layers": 1}
    params["config"]["seq_length"] = 4
    if central_value:  # the case: a recurrent central value network (the actor is an MLP)
        params["config"]["central_value_config"]["network"]["rnn"] = lstm
    else:  # a recurrent actor-critic network, no central value
        params["network"]["rnn"] = lstm
        del params["config"]["central_value_config"]
    return {"params": params}


@pytest.mark.parametrize("central_value", [True, False], ids=["central_value", "actor"])
def test_terminal_value_leaves_the_recurrent_state_as_rl_games_does(tmp_path, central_value):
    """At a time-out step the extra ``V(s_T)`` call must not advance the LSTM state: rl_games' own agent
    leaves it as the action left it (``h_t``) until it zeroes the finished envs' rows. ``V(s_T)`` itself is
    evaluated from ``h_t``."""
    name = f"sensorgym_test_rnn_{central_value}"
    runner = Runner()
    register(name, lambda num_envs=N, seed=None: sensor_env(num_envs, HORIZON, seed=seed or 0), runner=runner)
    build = runner.algo_factory._builders["a2c_continuous"]
    agents: list = []
    records: list = []

    def terminal_value(agent, h_t, terminal):
        """V(s_T | h_t), evaluated on its own (the network's weights do not change during the rollout)."""
        with torch.no_grad():
            if central_value:
                cv = agent.central_value_net
                kept, cv.rnn_states = cv.rnn_states, [s.clone() for s in h_t]
                value = cv.get_value({"states": terminal["states"]})
                cv.rnn_states = kept
                return value
            inputs = {"is_train": False, "prev_actions": None, "rnn_states": [s.clone() for s in h_t]}
            return agent.model({**inputs, "obs": agent._preproc_obs(terminal["obs"])})["values"]

    def recorded(**kw):
        agent = build(**kw)
        env_step = agent.env_step

        def states():  # the recurrent state the terminal value must start from and leave alone
            return (agent.central_value_net if central_value else agent).rnn_states

        def recording_env_step(actions):
            h_t = [s.clone() for s in states()]
            obs, rewards, dones, infos = env_step(actions)
            after = [s.clone() for s in states()]
            rows = infos["time_outs"].bool()
            value = terminal_value(agent, h_t, infos[TERMINAL_OBS_KEY]) if rows.any() else None
            records.append((h_t, after, rewards.clone(), rows, value))
            return obs, rewards, dones, infos

        agent.env_step = recording_env_step
        agents.append(agent)
        return agent

    runner.algo_factory.register_builder("a2c_continuous", recorded)
    runner.load(_recurrent_params(tmp_path, name, central_value))
    runner.run({"train": True, "play": False})
    (agent,) = agents
    holder = agent.central_value_net if central_value else agent
    assert holder.is_rnn if central_value else agent.is_rnn
    assert len(records) == STEPS
    stored = agent.experience_buffer.tensor_dict["rewards"][:, :, 0]
    timed_out = 0
    for t, (h_t, after, rewards, rows, value) in enumerate(records):
        for before, now in zip(h_t, after, strict=True):  # as rl_games' own agent leaves it: untouched
            change = float((now - before).abs().max())
            assert torch.equal(before, now), f"step {t}: the LSTM state changed by {change:.3f}"
        if value is not None:
            expected = rewards.view(-1) + GAMMA * value[:, 0]
            torch.testing.assert_close(stored[t][rows], expected[rows])
            timed_out += int(rows.sum())
    assert timed_out >= N  # time-out steps were checked (episodes of 12 steps, a rollout of 16)


# -- seeds: play is reproducible, and seed 0 is a seed ----------------------------------------------------
def _seeded_run(tmp_path: Path, name: str, seed: int, plays: int) -> tuple[list, dict, list]:
    """Train one epoch with ``params.seed = seed``, then play the checkpoint ``plays`` times; returns the
    seeds the factory got, the trained weights and each play's rewards."""
    seeds: list = []

    def make_env(num_envs: int = N, seed: int | None = None):
        seeds.append(seed)
        return sensor_env(num_envs, HORIZON, seed=seed)

    runner = Runner()
    register(name, make_env, runner=runner)
    agents: list = []
    build_agent = runner.algo_factory._builders["a2c_continuous"]
    runner.algo_factory.register_builder(
        "a2c_continuous", lambda **kw: agents.append(build_agent(**kw)) or agents[-1]
    )
    build_player = runner.player_factory._builders["a2c_continuous"]
    played: list[list] = []

    def player_recording_rewards(**kw):
        player = build_player(**kw)
        rewards, step = [], player.env.step

        def recording_step(actions):
            out = step(actions)
            rewards.append(out[1].clone())
            return out

        player.env.step = recording_step
        played.append(rewards)
        return player

    runner.player_factory.register_builder("a2c_continuous", player_recording_rewards)
    params = _params(tmp_path, name)
    params["params"]["seed"] = seed
    runner.load(params)
    runner.run({"train": True, "play": False})
    checkpoint = str(next((tmp_path / "run" / "nn").glob("last_*.pth")))
    for _ in range(plays):
        runner.run({"train": False, "play": True, "checkpoint": checkpoint})
    weights = {k: v.clone() for k, v in agents[0].model.state_dict().items()}
    return seeds, weights, played


def test_playing_a_checkpoint_twice_gives_the_same_games(tmp_path):
    """rl_games' player pops the seed and uses it nowhere (the issue: the same checkpoint scored -105.17,
    then -97.13, with deterministic actions)."""
    seeds, _, played = _seeded_run(tmp_path, "sensorgym_test_play_seed", seed=5, plays=2)
    assert seeds == [5, 5, 5]  # training, then each play: the factory got the run's seed every time
    first, second = played
    assert len(first) == len(second) >= HORIZON
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


def test_seed_zero_seeds_training(tmp_path):
    """rl_games' Runner skips ``seed: 0`` (``if self.seed:``): neither torch nor the env was seeded."""
    seeds_a, weights_a, _ = _seeded_run(tmp_path / "a", "sensorgym_test_seed0_a", seed=0, plays=0)
    seeds_b, weights_b, _ = _seeded_run(tmp_path / "b", "sensorgym_test_seed0_b", seed=0, plays=0)
    assert seeds_a == seeds_b == [0]
    for key, value in weights_a.items():
        assert torch.equal(value, weights_b[key]), key


def test_the_envs_info_reaches_rl_games(tmp_path):
    """rl_games' observers (``Runner(algo_observer=...)``) read the env's info: "episode", "scores", custom
    entries. The adapter passed on only its own two keys."""
    from rl_games.common.algo_observer import DefaultAlgoObserver

    class Observer(DefaultAlgoObserver):
        def __init__(self):
            super().__init__()
            self.infos: list = []

        def process_infos(self, infos, done_indices):
            self.infos.append(infos)
            super().process_infos(infos, done_indices)

    env_infos: list = []

    def make_env(num_envs: int = N, seed: int | None = None):
        venv = sensor_env(num_envs, HORIZON, seed=seed or 0)
        step = venv.step

        def recording_step(actions):
            out = step(actions)
            env_infos.append(out[-1])
            return out

        venv.step = recording_step
        return venv

    observer = Observer()
    runner = Runner(algo_observer=observer)
    register("sensorgym_test_infos", make_env, runner=runner)
    runner.load(_params(tmp_path, "sensorgym_test_infos"))
    runner.run({"train": True, "play": False})
    assert len(observer.infos) == len(env_infos) == STEPS
    for infos, info in zip(observer.infos, env_infos, strict=True):
        assert set(info) <= set(infos) and {"time_outs", TERMINAL_OBS_KEY} <= set(infos)
        assert torch.equal(infos["state"], info["state"])  # BatchedPendulum's [θ, θ̇]
    assert any("final_info" in infos for infos in observer.infos)  # the terminal step's info, in SAME_STEP


# -- a2c_discrete: the time-out bootstrap of SensorDiscreteA2CAgent, through rl_games' own Runner ---------
CARTPOLE_LIMIT = 5  #: CartPole-v1's time limit here: a random policy rarely ends an episode this soon


def test_discrete_runner_bootstraps_time_outs_from_the_terminal_state(tmp_path):
    """``algo: a2c_discrete`` on CartPole-v1 (``Discrete(2)``) with a time limit of 5 steps: the stored
    reward of a time-out row is ``r + γ·V(s_T)``, with ``V`` the central value network as it was during the
    rollout and ``s_T`` the sensor wrapper's terminal observation; every other row is ``r``. rl_games' own
    ``DiscreteA2CAgent`` stores ``r + γ·V(s_t)``, the state the last action was taken in, and fails this."""
    sensors = {"pole": sg.StateSensorOptions(key="obs", index=[2, 3], noise=0.01, history_length=2)}
    name = "sensorgym_test_discrete_bootstrap"
    finals: list = []

    def make_env(num_envs: int = N, seed: int | None = None):
        venv = make_sensor_vec(
            "CartPole-v1",
            num_envs,
            sensors,
            autoreset_mode="SameStep",
            env_kwargs={"max_episode_steps": CARTPOLE_LIMIT},
            dt=0.02,  # CartPole's tau
            seed=seed,
        )
        step = venv.step

        def recording_step(actions):
            out = step(actions)
            finals.append(out[-1].get("final_obs"))
            return out

        venv.step = recording_step
        return venv

    runner = Runner()
    register(name, make_env, runner=runner)  # critic input: ("policy", "critic")
    build = runner.algo_factory._builders["a2c_discrete"]
    agents: list = []
    records: list = []
    weights: list = []

    def recorded(**kw):
        agent = build(**kw)
        env_step = agent.env_step

        def recording_env_step(actions):
            if not weights:  # the central value network's weights during the rollout (trained after it)
                weights.append({k: v.clone() for k, v in agent.central_value_net.state_dict().items()})
            obs, rewards, dones, infos = env_step(actions)
            records.append((rewards.clone(), infos["time_outs"].bool().clone(), infos[TERMINAL_OBS_KEY]))
            return obs, rewards, dones, infos

        agent.env_step = recording_env_step
        agents.append(agent)
        return agent

    runner.algo_factory.register_builder("a2c_discrete", recorded)
    params = rl_games_params(tmp_path, name, N, horizon=STEPS, gamma=GAMMA)
    params["algo"]["name"] = "a2c_discrete"
    params["model"]["name"] = "discrete_a2c"
    params["network"]["space"] = {"discrete": {}}
    runner.load({"params": params})
    runner.run({"train": True, "play": False})

    (agent,) = agents
    assert type(agent) is SensorDiscreteA2CAgent
    assert agent.value_bootstrap and agent.has_central_value and len(records) == STEPS
    cv = agent.central_value_net
    cv.load_state_dict(weights[0])  # V as the rollout evaluated it
    stored = agent.experience_buffer.tensor_dict["rewards"][:, :, 0]
    bootstrapped = 0
    for t, (rewards, rows, terminal) in enumerate(records):
        rewards = rewards.view(-1)
        torch.testing.assert_close(stored[t][~rows], rewards[~rows])  # no time-out: the reward alone
        if not rows.any():
            continue
        states = terminal["states"]
        # the terminal state is the sensor wrapper's terminal observation (a numpy env's info["final_obs"]:
        # one Dict per env), not the next episode's start
        for i in rows.nonzero().view(-1).tolist():
            final = {k: torch.as_tensor(v)[None] for k, v in finals[t][i].items()}
            assert torch.equal(states[i], critic_view(final, ("policy", "critic"))[0])
        with torch.no_grad():
            v_terminal = cv.get_value({"states": states})[:, 0]
        expected = rewards + GAMMA * v_terminal
        torch.testing.assert_close(stored[t][rows], expected[rows])
        bootstrapped += int(rows.sum())
    assert bootstrapped >= 2 * N  # two time-outs per env in a rollout of 16 steps (episodes of 5)
