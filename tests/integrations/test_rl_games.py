"""rl_games' own entry point, ``Runner``, on a sensor env registered with ``sensorgym.integrations.rl_games.
register``: train (central value network on the configured critic input), then play the saved checkpoint
with rl_games' default player, which builds its env through ``env_creator``. Forward hooks check that
the actor (in training and in play) reads only ``"policy"``, the central value network only the
configured critic input, and that a time-out's stored reward is ``r + γ·V(terminal state)``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("rl_games")
from rl_games.torch_runner import Runner

from sensorgym.integrations.rl_games import TERMINAL_OBS_KEY, RlGamesVecEnv, SensorA2CAgent, register

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
