"""Every action space through every adapter, by the library's own entry point (skrl ``SequentialTrainer``,
rl_games ``Runner`` train and play, rsl_rl ``OnPolicyRunner.learn``, SB3 ``model.learn``).

The env is a Sync vector env of a small env that asserts each action it receives is in its action space
and records it; each test checks that the env received exactly the library's action, turned into the
env's form (one index per env for ``Discrete``, ``start`` added, a ``Dict`` rebuilt). A space the library
cannot take is refused at construction with a ``ValueError`` naming the space and the fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Tuple
from torch import nn

from sensorgym.wrappers import SensorObservation

from .common import LIMIT, SENSORS_XY, recording_env, rl_games_params

SENSORS = SENSORS_XY

N = 4
STEPS = 8


def received(venv: SensorObservation) -> list[list[Any]]:
    """The actions each sub-env received, in order."""
    return [env.unwrapped.actions for env in venv.unwrapped.envs]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return np.asarray(a).dtype == np.asarray(b).dtype and np.array_equal(np.asarray(a), np.asarray(b))


# each case: the env's action space, the flat library action -> the env's action (written out here, not
# computed by the code under test), the kind of policy, the width of the library's action
_MD = MultiDiscrete([[2, 3], [4, 2]], start=[[1, 1], [0, -2]])
CASES: dict[str, tuple[gym.Space, Callable[[np.ndarray], Any], str, int]] = {
    "Box": (Box(-1, 1, (2,), np.float32), lambda a: a.astype(np.float32), "continuous", 2),
    "Box2d": (Box(-1, 1, (2, 2), np.float32), lambda a: a.reshape(2, 2).astype(np.float32), "continuous", 4),
    "Discrete": (Discrete(3, start=-1), lambda a: np.int64(a[0] - 1), "discrete", 1),
    "MultiDiscrete": (
        _MD,
        lambda a: (a.reshape(2, 2) + np.array([[1, 1], [0, -2]])).astype(np.int64),
        "multi",
        4,
    ),
    "MultiBinary": (MultiBinary(3), lambda a: a.astype(np.int8), "multi", 3),
    "DictBox": (
        Dict({"force": Box(-1, 1, (2,), np.float32), "grip": Box(0, 1, (1,), np.float32)}),
        lambda a: {"force": a[:2].astype(np.float32), "grip": a[2:].astype(np.float32)},
        "continuous",
        3,
    ),
    "DictDiscrete": (
        Dict({"gear": Discrete(3, start=1), "lights": MultiBinary(2)}),
        lambda a: {"gear": np.int64(a[0] + 1), "lights": a[1:].astype(np.int8)},
        "multi",
        3,
    ),
    "Tuple": (
        Tuple([Discrete(2), MultiDiscrete([3, 2])]),
        lambda a: (np.int64(a[0]), a[1:].astype(np.int64)),
        "multi",
        3,
    ),
}
CONTINUOUS = [k for k, c in CASES.items() if c[2] == "continuous"]
DISCRETE = [k for k, c in CASES.items() if c[2] != "continuous"]


def check_received(venv: SensorObservation, library_actions: list[torch.Tensor], case: str) -> None:
    """Each sub-env received exactly the library's action of each step, in the env's form."""
    _, expect, _, width = CASES[case]
    envs = received(venv)
    assert library_actions and all(len(actions) == len(library_actions) for actions in envs)
    for t, batch in enumerate(library_actions):
        flat = batch.detach().cpu().numpy().reshape(N, width)
        for i in range(N):
            assert same(envs[i][t], expect(flat[i])), (case, t, i, envs[i][t], flat[i])


def record_library_actions(adapter: Any) -> list[torch.Tensor]:
    """Wrap an adapter's ``step`` to record the actions the library hands it."""
    actions: list[torch.Tensor] = []
    step = adapter.step

    def recording_step(a):
        actions.append(torch.as_tensor(a).clone())
        return step(a)

    adapter.step = recording_step
    return actions


# -- skrl ------------------------------------------------------------------------------------------------
def _skrl_models(env: Any, kind: str) -> dict[str, Any]:
    from skrl.models.torch import (
        CategoricalMixin,
        DeterministicMixin,
        GaussianMixin,
        Model,
        MultiCategoricalMixin,
    )

    if kind == "continuous":

        class Policy(GaussianMixin, Model):
            def __init__(self):
                Model.__init__(self, observation_space=env.observation_space, action_space=env.action_space)
                GaussianMixin.__init__(self)
                self.net = nn.Linear(self.num_observations, self.num_actions)
                self.log_std = nn.Parameter(torch.zeros(self.num_actions))

            def compute(self, inputs, role=""):
                return self.net(inputs["observations"]), {"log_std": self.log_std}

    else:
        mixin = CategoricalMixin if kind == "discrete" else MultiCategoricalMixin

        class Policy(mixin, Model):
            def __init__(self):
                Model.__init__(self, observation_space=env.observation_space, action_space=env.action_space)
                mixin.__init__(self)
                self.net = nn.Linear(self.num_observations, self.num_actions)

            def compute(self, inputs, role=""):
                return self.net(inputs["observations"]), {}

    class Value(DeterministicMixin, Model):
        def __init__(self):
            Model.__init__(
                self,
                observation_space=env.observation_space,
                state_space=env.state_space,
                action_space=env.action_space,
            )
            DeterministicMixin.__init__(self)
            self.net = nn.Linear(self.num_states, 1)

        def compute(self, inputs, role=""):
            return self.net(inputs["states"]), {}

    return {"policy": Policy(), "value": Value()}


@pytest.mark.parametrize("case", list(CASES))
def test_skrl_sequential_trainer(case, tmp_path):
    pytest.importorskip("skrl")
    from skrl.memories.torch import RandomMemory
    from skrl.trainers.torch import SequentialTrainer

    from sensorgym.integrations.skrl import SensorPPO, SkrlWrapper

    space, _, kind, width = CASES[case]
    venv = recording_env(space)
    env = SkrlWrapper(venv, seed=0)
    agent = SensorPPO(
        models=_skrl_models(env, kind),
        memory=RandomMemory(memory_size=STEPS, num_envs=N),
        observation_space=env.observation_space,
        state_space=env.state_space,
        action_space=env.action_space,
        cfg={
            "rollouts": STEPS,
            "mini_batches": 1,
            "learning_epochs": 1,
            "experiment": {"directory": str(tmp_path)},
        },
    )
    library_actions = record_library_actions(env)
    cfg = {"timesteps": STEPS, "disable_progressbar": True, "close_environment_at_exit": False}
    SequentialTrainer(env=env, agents=agent, cfg=cfg).train()
    check_received(venv, library_actions, case)
    # what skrl's models were built for: one value per discrete component, the flat Box size otherwise
    expected_space = {"Box": space, "Box2d": space, "Discrete": Discrete(3)}.get(case)
    if expected_space is not None:
        assert env.action_space == expected_space
    elif kind == "multi":
        assert isinstance(env.action_space, MultiDiscrete) and env.action_space.shape == (width,)
    else:
        assert env.action_space == Box(np.array([-1, -1, 0], np.float32), np.ones(3, np.float32))


def test_skrl_cartpole(tmp_path):
    """The issue's case: CartPole-v1 (Discrete(2)) crashed with "AssertionError: array([1]) invalid"."""
    pytest.importorskip("skrl")
    from skrl.memories.torch import RandomMemory
    from skrl.trainers.torch import SequentialTrainer

    from sensorgym.integrations.skrl import SensorPPO, SkrlWrapper
    from sensorgym.wrappers import make_sensor_vec

    venv = make_sensor_vec("CartPole-v1", N, SENSORS, autoreset_mode="SameStep", seed=0, dt=0.02)
    env = SkrlWrapper(venv, seed=0)
    agent = SensorPPO(
        models=_skrl_models(env, "discrete"),
        memory=RandomMemory(memory_size=STEPS, num_envs=N),
        observation_space=env.observation_space,
        state_space=env.state_space,
        action_space=env.action_space,
        cfg={
            "rollouts": STEPS,
            "mini_batches": 1,
            "learning_epochs": 1,
            "experiment": {"directory": str(tmp_path)},  # not skrl's default ./runs in the checkout
        },
    )
    cfg = {"timesteps": 2 * STEPS, "disable_progressbar": True, "close_environment_at_exit": False}
    SequentialTrainer(env=env, agents=agent, cfg=cfg).train()
    assert env.action_space == Discrete(2)


def test_skrl_refuses_a_mixed_action_space():
    pytest.importorskip("skrl")
    from sensorgym.integrations.skrl import SkrlWrapper

    mixed = Dict({"gear": Discrete(3), "throttle": Box(0, 1, (1,), np.float32)})
    with pytest.raises(ValueError, match=r"Dict\('gear'.*mixes continuous \(Box\) and discrete.*Fix: "):
        SkrlWrapper(recording_env(mixed))


# -- rl_games ----------------------------------------------------------------------------------------------
def _rl_games_config(tmp_path: Path, name: str, kind: str, *, seed: int = 3) -> dict:
    params = rl_games_params(tmp_path, name, N, horizon=STEPS, seed=seed)
    params["config"]["minibatch_size"] = N * STEPS
    params["config"]["central_value_config"]["minibatch_size"] = N * STEPS
    params["config"]["player"]["games_num"] = N
    if kind != "continuous":
        params["algo"]["name"] = "a2c_discrete"
        params["model"]["name"] = "discrete_a2c" if kind == "discrete" else "multi_discrete_a2c"
        params["network"]["space"] = {"discrete": {}} if kind == "discrete" else {"multi_discrete": {}}
    return {"params": params}


@pytest.mark.parametrize("case", list(CASES))
def test_rl_games_runner_train_and_play(case, tmp_path):
    pytest.importorskip("rl_games")
    from rl_games.torch_runner import Runner

    from sensorgym.integrations.rl_games import (
        RlGamesVecEnv,
        SensorA2CAgent,
        SensorDiscreteA2CAgent,
        SensorDiscretePlayer,
        SensorPlayer,
        register,
    )

    space, _, kind, width = CASES[case]
    made: list[SensorObservation] = []
    adapters: list[RlGamesVecEnv] = []
    actions: list[list[torch.Tensor]] = []

    def make_env(num_envs: int = N, seed: int | None = None):
        made.append(recording_env(space, num_envs))
        return made[-1]

    name = f"sensorgym_actions_{case}"
    runner = Runner()
    register(name, make_env, runner=runner)
    algo = "a2c_continuous" if kind == "continuous" else "a2c_discrete"
    build_agent, build_player = runner.algo_factory._builders[algo], runner.player_factory._builders[algo]
    agents, players = [], []

    def agent_with_recorder(**kw):
        agents.append(build_agent(**kw))
        adapters.append(agents[-1].vec_env)
        actions.append(record_library_actions(agents[-1].vec_env))
        return agents[-1]

    def player_with_recorder(**kw):
        players.append(build_player(**kw))
        adapters.append(players[-1].env)
        actions.append(record_library_actions(players[-1].env))
        return players[-1]

    runner.algo_factory.register_builder(algo, agent_with_recorder)
    runner.player_factory.register_builder(algo, player_with_recorder)
    runner.load(_rl_games_config(tmp_path, name, kind))
    runner.run({"train": True, "play": False})
    checkpoint = next((tmp_path / "run" / "nn").glob("last_*.pth"))
    runner.run({"train": False, "play": True, "checkpoint": str(checkpoint)})

    agent_class = SensorA2CAgent if kind == "continuous" else SensorDiscreteA2CAgent
    player_class = SensorPlayer if kind == "continuous" else SensorDiscretePlayer
    assert type(agents[0]) is agent_class and type(players[0]) is player_class
    assert len(made) == 2  # training's env, then the player's
    for venv, library_actions in zip(made, actions, strict=True):
        check_received(venv, library_actions, case)
    # rl_games' own forms: a 1-D Box (it reads shape[0]), Discrete, or its multi-discrete Tuple of Discrete
    shown = adapters[0].get_env_info()["action_space"]
    if kind == "continuous":
        assert isinstance(shown, Box) and shown.shape == (width,)
    elif kind == "discrete":
        assert shown == Discrete(3)
    else:
        assert isinstance(shown, Tuple) and len(shown) == width
        assert all(isinstance(s, Discrete) and s.start == 0 for s in shown)


def test_rl_games_refuses_a_mixed_action_space():
    pytest.importorskip("rl_games")
    from sensorgym.integrations.rl_games import RlGamesVecEnv

    mixed = Tuple([Discrete(3), Box(0, 1, (1,), np.float32)])
    with pytest.raises(ValueError, match=r"Tuple\(Discrete\(3\).*mixes continuous \(Box\) and discrete"):
        RlGamesVecEnv(recording_env(mixed))


# -- rsl_rl ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", CONTINUOUS)
def test_rsl_rl_on_policy_runner(case):
    pytest.importorskip("rsl_rl")
    from rsl_rl.runners import OnPolicyRunner

    from sensorgym.integrations.rsl_rl import RslRlVecEnv

    space, _, _, width = CASES[case]
    venv = recording_env(space)
    env = RslRlVecEnv(venv, seed=0)
    assert env.num_actions == width and env.max_episode_length == LIMIT
    cfg = {
        "num_steps_per_env": STEPS,
        "save_interval": 1000,
        "obs_groups": env.obs_groups,
        "algorithm": {"class_name": "sensorgym.integrations.rsl_rl:TerminalValuePPO", "num_mini_batches": 1},
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [8],
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [8]},
    }
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    library_actions = record_library_actions(env)
    runner.learn(1)
    check_received(venv, library_actions, case)


@pytest.mark.parametrize("case", DISCRETE)
def test_rsl_rl_refuses_a_discrete_action_space(case):
    pytest.importorskip("rsl_rl")
    from sensorgym.integrations.rsl_rl import RslRlVecEnv

    space = CASES[case][0]
    with pytest.raises(
        ValueError, match=r"is discrete, and rsl_rl has no discrete action distribution\. Fix"
    ):
        RslRlVecEnv(recording_env(space))


def test_rsl_rl_refuses_cartpole():
    """The issue's case: rsl_rl built a 2-output Gaussian actor for CartPole's Discrete(2) and crashed."""
    pytest.importorskip("rsl_rl")
    from sensorgym.integrations.rsl_rl import RslRlVecEnv
    from sensorgym.wrappers import make_sensor_vec

    venv = make_sensor_vec("CartPole-v1", N, SENSORS, autoreset_mode="SameStep", seed=0, dt=0.02)
    with pytest.raises(ValueError, match=r"RslRlVecEnv: the action space Discrete\(2\) is discrete.*skrl"):
        RslRlVecEnv(venv)


# -- Stable-Baselines3 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_sb3_learn(case):
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv

    space, _, kind, width = CASES[case]
    venv = recording_env(space)
    env = SB3VecEnv(venv)
    library_actions: list[torch.Tensor] = []
    step_async = env.step_async

    def recording_step_async(actions):
        library_actions.append(torch.as_tensor(np.asarray(actions)).clone())
        step_async(actions)

    env.step_async = recording_step_async
    model = PPO(AsymmetricActorCriticPolicy, env, n_steps=STEPS, batch_size=N * STEPS, n_epochs=1, seed=0)
    model.learn(N * STEPS)
    check_received(venv, library_actions, case)
    if case == "MultiBinary":  # SB3 samples MultiBinary natively
        assert env.action_space == space
    elif kind == "multi":
        assert isinstance(env.action_space, MultiDiscrete) and env.action_space.shape == (width,)
