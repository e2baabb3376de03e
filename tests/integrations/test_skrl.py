"""skrl's own entry point, ``SequentialTrainer.train``, with sensorgym's ``SensorPPO`` on a sensor env: the
policy reads only ``"policy"``, the value model the configured critic input (skrl's ``states``), and the
value target skrl stores for a truncated step is ``r + γ·V(terminal state)``."""

from __future__ import annotations

import tempfile

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

pytest.importorskip("skrl")
from skrl.envs.wrappers.torch import wrap_env as skrl_wrap_env
from skrl.memories.torch import RandomMemory
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model
from skrl.trainers.torch import SequentialTrainer

import sensorgym as sg
import sensorgym.integrations.skrl as sensor_skrl
from sensorgym.integrations.skrl import TERMINAL_STATES_KEY, SensorPPO, SkrlWrapper, wrap_env

from .common import (
    CRITIC_DIM,
    CRITIC_INPUTS,
    POLICY_DIM,
    InputRecorder,
    N,
    critic_view,
    recording_env,
    sensor_env,
)

STEPS = 16
GAMMA = 0.9


def _models(env):
    class Policy(GaussianMixin, Model):
        def __init__(self):
            Model.__init__(
                self,
                observation_space=env.observation_space,
                action_space=env.action_space,
                device=env.device,
            )
            GaussianMixin.__init__(self)
            self.net = nn.Sequential(nn.Linear(self.num_observations, 16), nn.Tanh(), nn.Linear(16, 1))
            self.log_std = nn.Parameter(torch.zeros(1))

        def compute(self, inputs, role=""):
            return self.net(inputs["observations"]), {"log_std": self.log_std}

    class Value(DeterministicMixin, Model):
        def __init__(self):
            Model.__init__(
                self,
                observation_space=env.observation_space,
                state_space=env.state_space,
                action_space=env.action_space,
                device=env.device,
            )
            DeterministicMixin.__init__(self)
            self.net = nn.Sequential(nn.Linear(self.num_states, 16), nn.Tanh(), nn.Linear(16, 1))

        def compute(self, inputs, role=""):
            return self.net(inputs["states"]), {}

    return {"policy": Policy(), "value": Value()}


_EXPERIMENTS = tempfile.mkdtemp(prefix="sensorgym_skrl_")


def _agent(env, models, agent_class=SensorPPO):
    return agent_class(
        models=models,
        memory=RandomMemory(memory_size=STEPS, num_envs=N, device="cpu"),
        observation_space=env.observation_space,
        state_space=env.state_space,
        action_space=env.action_space,
        device="cpu",
        cfg={
            "rollouts": STEPS,
            **({"learning_epochs": 1} if agent_class is not sensor_skrl.SensorA2C else {}),
            "mini_batches": 2,
            "discount_factor": GAMMA,
            "experiment": {"directory": _EXPERIMENTS},  # not skrl's default ./runs in the checkout
        },
    )


def _trainer(env, agent):
    cfg = {
        "timesteps": STEPS,
        "headless": True,
        "disable_progressbar": True,
        "close_environment_at_exit": False,
    }
    return SequentialTrainer(env=env, agents=agent, cfg=cfg)


@pytest.mark.parametrize(
    ("critic_input", "agent_name"),
    [(c, "SensorPPO") for c in CRITIC_INPUTS]
    + [(CRITIC_INPUTS[0], a) for a in ("SensorA2C", "SensorRPO", "SensorTRPO")],
)
def test_sequential_trainer_inputs_and_terminal_value_target(critic_input, agent_name):
    """SensorPPO (both critic inputs), and skrl's other on-policy agents with the same bootstrap."""
    env = SkrlWrapper(sensor_env(), critic_input=critic_input)
    width = (POLICY_DIM if "policy" in critic_input else 0) + CRITIC_DIM
    assert env.observation_space.shape == (POLICY_DIM,) and env.state_space.shape == (width,)
    models = _models(env)
    agent = _agent(env, models, getattr(sensor_skrl, agent_name))
    actor_in = InputRecorder(models["policy"].net[0])
    critic_in = InputRecorder(models["value"].net[0])
    critic_out = InputRecorder(models["value"].net)
    steps, step = [], env.step

    def recording_step(actions):
        out = step(actions)  # skrl adds the bootstrap to the reward tensor in place: record a copy
        steps.append(((out[0].clone(), out[1].clone(), *out[2:]), env.state().clone()))
        return out

    env.step = recording_step
    _trainer(env, agent).train()

    policy_obs = [None] + [s[0][0] for s in steps]
    states = [None] + [s[1] for s in steps]
    assert all(x.shape[-1] == POLICY_DIM for x in actor_in.inputs)
    assert all(x.shape[-1] == width for x in critic_in.inputs)
    for t in range(1, STEPS):  # the rollout's actor and critic inputs are the env's, in order
        assert torch.equal(actor_in.inputs[t], policy_obs[t])
        assert critic_in.find(states[t]) is not None

    rewards_stored = agent.memory.get_tensor_by_name("rewards")[:, :, 0]
    returns = agent.memory.get_tensor_by_name("returns")[:, :, 0]
    checked = 0
    for t, ((_, reward, terminated, truncated, info), next_state) in enumerate(steps):
        rows = truncated[:, 0] & ~terminated[:, 0]
        if not rows.any():
            continue
        terminal_state = info[TERMINAL_STATES_KEY]
        # the terminal state is the sensor wrapper's terminal observation (final_obs)
        assert torch.equal(terminal_state[rows], critic_view(info["final_obs"], critic_input)[rows])
        assert not torch.equal(terminal_state[rows], next_state[rows])  # not the next episode's start
        call = critic_in.find(terminal_state)
        assert call is not None, "the value model never saw the terminal state"
        target = reward[:, 0] + GAMMA * critic_out.outputs[call][:, 0]
        torch.testing.assert_close(rewards_stored[t][rows], target[rows])
        torch.testing.assert_close(returns[t][rows], target[rows])  # skrl's value target at the time-out
        checked += int(rows.sum())
    assert checked >= N  # every env was truncated at least once (episodes of 12 steps, 16 steps)


def test_skrl_wrap_env_misuse_is_refused():
    venv = sensor_env()
    leaky = skrl_wrap_env(venv, verbose=False)  # skrl's "auto": GymnasiumWrapper, actor input = policy+critic
    assert set(leaky.observation_space.spaces) == {"policy", "critic"}
    with pytest.raises(ValueError, match="leak to the actor"):
        _agent(leaky, {})
    for name in ("gymnasium", "isaaclab"):
        with pytest.raises(ValueError, match=r"Fix: use sensorgym\.integrations\.skrl\.wrap_env"):
            wrap_env(venv, wrapper=name)
    assert isinstance(wrap_env(venv), SkrlWrapper)


class _TerminatesAtTheLimit(gym.Env):
    """Terminates on step 4, which is also its time limit: Gymnasium sets both flags (a true terminal)."""

    observation_space = gym.spaces.Box(-10, 10, (3,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    metadata = {"render_fps": 20}  # noqa: RUF012 (Gymnasium reads it as a class attribute)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0, 1, 2], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t, 1, 2], np.float32), 1.0, self.t >= 4, False, {}


def test_an_episode_that_terminates_on_its_time_limit_step_is_not_bootstrapped():
    from sensorgym.wrappers import make_sensor_vec

    env_id = "sensorgym-test/TerminatesAtTheLimit-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=_TerminatesAtTheLimit, max_episode_steps=4)
    sensors = {"x": sg.StateSensorOptions(key="obs", index=[0])}
    env = SkrlWrapper(make_sensor_vec(env_id, N, sensors, autoreset_mode="SameStep", seed=0, dt=0.05))
    models = _models(env)
    nn.init.constant_(models["value"].net[-1].bias, 5.0)  # V(.) clearly non-zero: a bootstrap would show
    agent = _agent(env, models)
    flags, step = [], env.step

    def recording_step(actions):
        out = step(actions)
        flags.append((out[2].clone(), out[3].clone()))
        return out

    env.step = recording_step
    _trainer(env, agent).train()
    ends = [t for t, (terminated, _) in enumerate(flags) if terminated.all()]
    assert ends and all(not truncated.any() for _, truncated in flags)  # a terminal is never a time-out
    rewards_stored = agent.memory.get_tensor_by_name("rewards")[:, :, 0]
    for t in ends:
        torch.testing.assert_close(rewards_stored[t], torch.ones(N))  # r, not r + γ·V(s_T)


# -- off-policy agents: the replay memory's next state of a finished episode is its terminal one ----------
def _q_models(env, kind: str) -> dict[str, Model]:
    """Small models for skrl's off-policy agents: policies read ``observations``, Q-functions ``states``."""
    from skrl.models.torch import DeterministicMixin, GaussianMixin

    obs_dim, state_dim = env.observation_space.shape[0], env.state_space.shape[0]

    def spaces():
        return {
            "observation_space": env.observation_space,
            "state_space": env.state_space,
            "action_space": env.action_space,
        }

    class Critic(DeterministicMixin, Model):  # Q(s, a) from the critic input and the action
        def __init__(self):
            Model.__init__(self, **spaces())
            DeterministicMixin.__init__(self)
            self.net = nn.Linear(state_dim + 1, 1)

        def compute(self, inputs, role=""):
            return self.net(torch.cat([inputs["states"], inputs["taken_actions"]], dim=1)), {}

    class QNetwork(DeterministicMixin, Model):  # one Q-value per discrete action, from the critic input
        def __init__(self):
            Model.__init__(self, **spaces())
            DeterministicMixin.__init__(self)
            self.net = nn.Linear(state_dim, env.action_space.n)

        def compute(self, inputs, role=""):
            return self.net(inputs["states"]), {}

    class Deterministic(DeterministicMixin, Model):
        def __init__(self):
            Model.__init__(self, **spaces())
            DeterministicMixin.__init__(self, clip_actions=True)
            self.net = nn.Linear(obs_dim, 1)

        def compute(self, inputs, role=""):
            return torch.tanh(self.net(inputs["observations"])) * 2, {}

    class Stochastic(GaussianMixin, Model):
        def __init__(self):
            Model.__init__(self, **spaces())
            GaussianMixin.__init__(self, clip_actions=True)
            self.net, self.log_std = nn.Linear(obs_dim, 1), nn.Parameter(torch.zeros(1))

        def compute(self, inputs, role=""):
            return self.net(inputs["observations"]), {"log_std": self.log_std}

    if kind in ("DQN", "DDQN"):
        return {"q_network": QNetwork(), "target_q_network": QNetwork()}
    critics = {
        "critic_1": Critic(),
        "critic_2": Critic(),
        "target_critic_1": Critic(),
        "target_critic_2": Critic(),
    }
    if kind == "SAC":
        return {"policy": Stochastic(), **critics}
    if kind == "TD3":
        return {"policy": Deterministic(), "target_policy": Deterministic(), **critics}
    return {  # DDPG
        "policy": Deterministic(),
        "target_policy": Deterministic(),
        "critic": Critic(),
        "target_critic": Critic(),
    }


@pytest.mark.parametrize("kind", ["SAC", "TD3", "DDPG", "DQN", "DDQN"])
def test_off_policy_agents_store_the_terminal_state(kind):
    """skrl's SAC/TD3/DDPG/DQN/DDQN store ``next_observations`` / ``next_states``, which after an autoreset
    are the next episode's first, and bootstrap every transition that is not ``terminated`` from them: a
    time-out was bootstrapped from the reset state (the issue: all 9 time-out rows). The Sensor versions
    store the terminal observation and state (the sensor wrapper's ``final_obs``)."""
    # DQN/DDQN: discrete actions (the recording env, Discrete(3), episodes of 5 steps); else Pendulum (12)
    discrete = kind in ("DQN", "DDQN")
    venv = recording_env(gym.spaces.Discrete(3), N) if discrete else sensor_env()
    env = SkrlWrapper(venv, seed=0)
    agent_class = getattr(sensor_skrl, f"Sensor{kind}")
    memory = RandomMemory(memory_size=STEPS, num_envs=N)
    agent = agent_class(
        models=_q_models(env, kind),
        memory=memory,
        observation_space=env.observation_space,
        state_space=env.state_space,
        action_space=env.action_space,
        cfg={"batch_size": 8, "learning_starts": STEPS - 2, "experiment": {"directory": _EXPERIMENTS}},
    )
    steps, step = [], env.step

    def recording_step(actions):
        out = step(actions)
        steps.append((out, {k: v.clone() for k, v in env._obs.items()}))
        return out

    env.step = recording_step
    _trainer(env, agent).train()  # a few updates run too (learning_starts < timesteps)

    next_obs = memory.get_tensor_by_name("next_observations")
    next_states = memory.get_tensor_by_name("next_states")
    terminated_stored = memory.get_tensor_by_name("terminated")
    time_out_rows = 0
    for t, ((_, _, terminated, truncated, info), reset) in enumerate(steps):
        finished = (terminated | truncated)[:, 0]
        for i in range(N):
            if not finished[i]:  # an env that runs on: its next observation
                assert torch.equal(next_obs[t, i], reset["policy"][i])
                continue
            final = info["final_obs"]  # the sensor wrapper's terminal observations
            terminal = final[i] if isinstance(final, np.ndarray) else {k: v[i] for k, v in final.items()}
            terminal = {k: torch.as_tensor(v).float()[None] for k, v in terminal.items()}
            assert torch.equal(next_obs[t, i], terminal["policy"][0])
            assert not torch.equal(next_obs[t, i], reset["policy"][i])  # not the next episode's start
            assert torch.equal(next_states[t, i], critic_view(terminal, ("policy", "critic"))[0])
            assert not terminated_stored[t, i, 0]  # a time-out: bootstrapped (from the terminal state)
            time_out_rows += int(truncated[i, 0])
    assert time_out_rows >= N


@pytest.mark.parametrize("agent_name", ["SensorPPO", "SensorSAC"])
def test_recurrent_models_are_refused(agent_name):
    """The Sensor agents are skrl's feed-forward ones, which pass no hidden state: a recurrent model is
    refused at construction (skrl's recurrent agents have no terminal-state version)."""
    from skrl.models.torch import DeterministicMixin

    env = SkrlWrapper(sensor_env())

    class RecurrentValue(DeterministicMixin, Model):  # skrl's recurrent-model form: an "rnn" specification
        def __init__(self):
            Model.__init__(self, observation_space=env.observation_space, state_space=env.state_space)
            DeterministicMixin.__init__(self)
            self.lstm, self.head = nn.LSTM(self.num_states, 8, batch_first=True), nn.Linear(8, 1)

        def get_specification(self):
            return {"rnn": {"sequence_length": 4, "sizes": [(1, N, 8), (1, N, 8)]}}

        def compute(self, inputs, role=""):
            out, (h, c) = self.lstm(inputs["states"][:, None], [s.contiguous() for s in inputs["rnn"]])
            return self.head(out[:, -1]), {"rnn": [h, c]}

    models = _models(env)
    models["value"] = RecurrentValue()
    with pytest.raises(ValueError, match=r"the 'value' model is recurrent.*Fix: use a feed-forward model"):
        getattr(sensor_skrl, agent_name)(
            models=models,
            memory=RandomMemory(memory_size=STEPS, num_envs=N),
            observation_space=env.observation_space,
            state_space=env.state_space,
            action_space=env.action_space,
        )
