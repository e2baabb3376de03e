"""rsl_rl, skrl and rl_games adapters: each runs one rollout and one update with the real library,
and its critic really receives the ``"critic"`` part."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import sensorgym as sg
from sensorgym.envs import BatchedPendulumEnv
from sensorgym.wrappers import SensorObservation, make_sensor_vec

from .common import rl_games_params

SENSORS = {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.02, delay=0.05, history_length=2)}
N = 8


def _torch_env():
    return SensorObservation(
        BatchedPendulumEnv(N, autoreset_mode="SameStep", max_episode_steps=12), SENSORS, seed=0
    )


def _param_snapshot(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def _changed(before: list[torch.Tensor], module: nn.Module) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True))


def test_rsl_rl_runner_one_iteration():
    pytest.importorskip("rsl_rl")
    from rsl_rl.runners import OnPolicyRunner

    from sensorgym.integrations.rsl_rl import OBS_GROUPS, RslRlVecEnv

    env = RslRlVecEnv(_torch_env())
    cfg = {
        "num_steps_per_env": 16,
        "save_interval": 1000,
        "obs_groups": dict(OBS_GROUPS),
        "algorithm": {"class_name": "PPO", "num_learning_epochs": 1, "num_mini_batches": 2},
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [32],
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [32]},
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    critic = runner.alg.critic
    assert critic.mlp[0].in_features == 4 + 2 + 3  # policy (2 x history 2) + critic (GT 2 + env obs 3)
    assert runner.alg.actor.mlp[0].in_features == 4
    before = _param_snapshot(critic)
    runner.learn(1)
    assert _changed(before, critic)
    # rsl_rl also works from a CPU numpy env (Sync vector env)
    numpy_env = RslRlVecEnv(make_sensor_vec("Pendulum-v1", 2, SENSORS, autoreset_mode="SameStep", seed=0))
    OnPolicyRunner(numpy_env, cfg, log_dir=None, device="cpu").learn(1)


@pytest.mark.parametrize(("critic_input", "width"), [(None, 4 + 5), ("critic", 5)])
def test_skrl_ppo_uses_states_for_the_critic(critic_input, width, tmp_path):
    """Default states = policy (4) + critic (GT 2 + env obs 3); ``critic_input="critic"`` = critic only."""
    pytest.importorskip("skrl")
    from skrl.agents.torch.ppo import PPO, PPO_CFG
    from skrl.memories.torch import RandomMemory
    from skrl.models.torch import DeterministicMixin, GaussianMixin, Model
    from skrl.trainers.torch import SequentialTrainer

    from sensorgym.integrations.skrl import SkrlWrapper

    kwargs = {} if critic_input is None else {"critic_input": critic_input}
    env = SkrlWrapper(_torch_env(), **kwargs)
    seen_states = []

    class Policy(GaussianMixin, Model):
        def __init__(self):
            Model.__init__(
                self,
                observation_space=env.observation_space,
                state_space=env.state_space,
                action_space=env.action_space,
                device="cpu",
            )
            GaussianMixin.__init__(self)
            self.net = nn.Sequential(
                nn.Linear(self.num_observations, 32), nn.Tanh(), nn.Linear(32, self.num_actions)
            )
            self.log_std = nn.Parameter(torch.zeros(self.num_actions))

        def compute(self, inputs, role=""):
            return self.net(inputs["observations"]), {"log_std": self.log_std}

    class Value(DeterministicMixin, Model):
        def __init__(self):
            Model.__init__(
                self,
                observation_space=env.observation_space,
                state_space=env.state_space,
                action_space=env.action_space,
                device="cpu",
            )
            DeterministicMixin.__init__(self)
            self.net = nn.Sequential(
                nn.Linear(self.num_observations + self.num_states, 32), nn.Tanh(), nn.Linear(32, 1)
            )

        def compute(self, inputs, role=""):
            seen_states.append(inputs["states"].shape)
            return self.net(torch.cat([inputs["observations"], inputs["states"]], dim=1)), {}

    models = {"policy": Policy(), "value": Value()}
    cfg = PPO_CFG(rollouts=16, learning_epochs=1, mini_batches=2)
    cfg.experiment.directory = str(tmp_path)  # not skrl's default ./runs in the checkout
    agent = PPO(
        models=models,
        memory=RandomMemory(memory_size=16, num_envs=N, device="cpu"),
        observation_space=env.observation_space,
        state_space=env.state_space,
        action_space=env.action_space,
        device="cpu",
        cfg=cfg,
    )
    before = _param_snapshot(models["value"])
    trainer = SequentialTrainer(
        env=env,
        agents=agent,
        cfg={
            "timesteps": 16,
            "headless": True,
            "disable_progressbar": True,
            "close_environment_at_exit": False,
        },
    )
    trainer.train()
    assert _changed(before, models["value"])
    assert seen_states and all(s[-1] == width for s in seen_states)


@pytest.mark.parametrize(("critic_input", "width"), [(None, 4 + 5), ("critic", 5)])
def test_rl_games_central_value_one_epoch(tmp_path, critic_input, width):
    """The central value net's input is the configured critic input (default policy + critic)."""
    pytest.importorskip("rl_games")
    from rl_games.algos_torch.a2c_continuous import A2CAgent
    from rl_games.common import tr_helpers
    from rl_games.common.algo_observer import DefaultAlgoObserver

    from sensorgym.integrations.rl_games import RlGamesVecEnv

    env = RlGamesVecEnv(_torch_env(), **({} if critic_input is None else {"critic_input": critic_input}))
    params = rl_games_params(tmp_path, "sensorgym", N, seed=0)
    params["config"].update(  # A2CAgent built directly: the env and the shaper as objects
        vec_env=env,
        env_info=env.get_env_info(),
        reward_shaper=tr_helpers.DefaultRewardsShaper(),
        features={"observer": DefaultAlgoObserver()},
    )
    agent = A2CAgent(base_name="run", params=params)
    cv = agent.central_value_net
    first = next(m for m in cv.model.modules() if isinstance(m, nn.Linear))
    assert first.in_features == width
    before = _param_snapshot(cv)
    agent.train()
    assert _changed(before, cv)


@pytest.mark.parametrize("adapter", ["rsl_rl", "skrl"])
@pytest.mark.parametrize("batched", [False, True])
def test_a_seeded_adapter_starts_from_the_same_state(adapter, batched):
    """rsl_rl's runner and skrl's trainer never reset with a seed: the adapter's ``seed`` makes a run's first
    observations (and so the run) reproducible; without it they come from OS entropy."""
    sensors = {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.05)}

    def make():
        if batched:
            return SensorObservation(BatchedPendulumEnv(3, autoreset_mode="SameStep"), sensors, seed=0)
        return make_sensor_vec("Pendulum-v1", 3, sensors, autoreset_mode="SameStep", seed=0)

    if adapter == "rsl_rl":
        pytest.importorskip("rsl_rl")
        from sensorgym.integrations.rsl_rl import RslRlVecEnv

        def first(seed):
            return RslRlVecEnv(make(), seed=seed).get_observations()["critic"]
    else:
        pytest.importorskip("skrl")
        from sensorgym.integrations.skrl import SkrlWrapper

        def first(seed):
            return SkrlWrapper(make(), seed=seed).reset()[0]

    assert torch.equal(first(3), first(3))
    assert not torch.equal(first(3), first(4))
