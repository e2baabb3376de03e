"""skrl (2.x): the measured readings as observations, the critic input as skrl's ``states``, and
time-outs bootstrapped from the terminal state.

* :class:`SkrlWrapper`: a skrl ``Wrapper``. ``observation_space`` is the ``"policy"`` part;
  ``state_space`` / ``state()`` are the critic input (``critic_input``, default ``"policy"`` +
  ``"critic"``), which skrl's trainers pass to the agents as ``states``. Each step's info also holds the
  terminal observations and states of the envs that finished (``"terminal_observations"``,
  ``"terminal_states"``).
* The action space skrl sees: a ``Box`` as it is; ``Discrete(n, start)`` as ``Discrete(n)`` (skrl's
  ``CategoricalMixin``; the wrapper adds ``start``); ``MultiDiscrete`` (any shape), ``MultiBinary`` and a
  ``Dict``/``Tuple`` of discrete spaces as one flat ``MultiDiscrete`` (``MultiCategoricalMixin``); a
  ``Dict``/``Tuple`` of ``Box`` spaces as one flat ``Box``. A space that mixes both kinds is refused.
* :class:`SensorPPO` (and :class:`SensorA2C`, :class:`SensorRPO`, :class:`SensorTRPO`): skrl's on-policy
  agent, except that truncated episodes are bootstrapped from the terminal state (``r + γ·V(terminal)``).
  skrl's own bootstraps them from ``next_states``, which after an autoreset is the **first state of the
  next episode** (or, with ``time_limit_bootstrap=False``, does the same through the next step's value).
* :class:`SensorSAC` (and :class:`SensorTD3`, :class:`SensorDDPG`, :class:`SensorDQN`,
  :class:`SensorDDQN`): skrl's off-policy agent, except that the replay memory stores a finished
  episode's terminal observation and state as its next ones (skrl's own stores the next episode's first,
  and bootstraps a time-out from it).
* :func:`wrap_env`: like skrl's ``wrap_env``, but a sensor env gets :class:`SkrlWrapper`; skrl's own
  choices for it are refused with the reason (``"auto"``/``"gymnasium"`` → ``GymnasiumWrapper`` flattens
  ``"policy"`` and ``"critic"`` into the actor's input, so the privileged observation leaks to the actor;
  ``"isaaclab"`` reads the inner env's spaces and fails with ``'Box' object is not subscriptable``).

Example:
    >>> import sensorgym as sg
    >>> from sensorgym.envs import BatchedPendulumEnv
    >>> from sensorgym.wrappers import SensorObservation
    >>> from sensorgym.integrations.skrl import SkrlWrapper
    >>> env = SkrlWrapper(SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"),
    ...                   {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.01)}))
    >>> obs, _ = env.reset()
    >>> obs.shape, env.state().shape, env.state_space.shape  # states = policy (2) + critic (2 + 3)
    (torch.Size([4, 2]), torch.Size([4, 7]), (7,))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import VectorEnv
from skrl.agents.torch.a2c import A2C
from skrl.agents.torch.ddpg import DDPG
from skrl.agents.torch.ddqn import DDQN
from skrl.agents.torch.dqn import DQN
from skrl.agents.torch.ppo import PPO
from skrl.agents.torch.rpo import RPO
from skrl.agents.torch.sac import SAC
from skrl.agents.torch.td3 import TD3
from skrl.agents.torch.trpo import TRPO
from skrl.envs.wrappers.torch import wrap_env as skrl_wrap_env
from skrl.envs.wrappers.torch.base import Wrapper

from .adapters import (
    DEFAULT_CRITIC_INPUT,
    ActionAdapter,
    SameStepStepper,
    critic_space,
    critic_tensor,
    resolve_critic_input,
)

__all__ = [
    "TERMINAL_OBS_KEY",
    "TERMINAL_STATES_KEY",
    "SensorA2C",
    "SensorDDPG",
    "SensorDDQN",
    "SensorDQN",
    "SensorPPO",
    "SensorRPO",
    "SensorSAC",
    "SensorTD3",
    "SensorTRPO",
    "SkrlWrapper",
    "wrap_env",
]

#: info keys of the terminal observations / states (rows of unfinished envs = the next ones)
TERMINAL_OBS_KEY, TERMINAL_STATES_KEY = "terminal_observations", "terminal_states"


def _is_sensor_env(env: Any) -> bool:
    space = getattr(env, "single_observation_space", None)
    return isinstance(space, gym.spaces.Dict) and {"policy", "critic"} <= set(space.spaces)


class SkrlWrapper(Wrapper):
    """skrl wrapper over a Gymnasium vector env with a ``{"policy", "critic"}`` observation.

    Args:
        venv: e.g. a :class:`~sensorgym.wrappers.SensorObservation` (SAME_STEP or DISABLED autoreset).
        device: device of the returned tensors (default: the env's device, else CPU).
        critic_input: what ``state()`` holds: ``("policy", "critic")`` (default) or ``("critic",)``.
        seed: seed of the env's first reset (skrl's trainer never passes one), for reproducible runs; None:
            unseeded.

    ``action_space`` is the space skrl's models are built from (see the module docstring); skrl's actions
    are turned back into the env's (``start`` added, ``Dict`` rebuilt). Each step's info is the env's own
    info plus the terminal observations and states.

    Example: see the module docstring.
    """

    def __init__(
        self,
        venv: VectorEnv,
        device: str | torch.device | None = None,
        *,
        critic_input: str | Sequence[str] = DEFAULT_CRITIC_INPUT,
        seed: int | None = None,
    ) -> None:
        super().__init__(venv)
        self._stepper = SameStepStepper(venv, "SkrlWrapper", device)
        self._seed = seed  # skrl's trainer never resets with a seed: the first reset takes this one
        self._device = self._stepper.device
        self.critic_input = resolve_critic_input(critic_input, "SkrlWrapper")
        self._state_space = critic_space(venv.single_observation_space, self.critic_input)
        self._actions = ActionAdapter(
            venv.single_action_space, "SkrlWrapper", "skrl", discrete="MultiDiscrete"
        )
        self._obs: dict[str, torch.Tensor] | None = None

    @property
    def observation_space(self) -> gym.Space:
        return self._env.single_observation_space["policy"]

    @property
    def state_space(self) -> gym.Space:
        return self._state_space

    @property
    def action_space(self) -> gym.Space:
        """The action space skrl's models are built from (see the class docstring)."""
        return self._actions.space

    @property
    def num_envs(self) -> int:
        return self._env.num_envs

    def reset(self) -> tuple[torch.Tensor, dict[str, Any]]:
        # vector envs autoreset: skrl calls reset() once at the start of training
        if self._obs is None:
            self._obs = self._stepper.reset(seed=self._seed)
        return self._obs["policy"], {}

    def step(self, actions: torch.Tensor):
        out = self._stepper.step(self._actions.to_env(actions, self.num_envs))
        self._obs = out.obs
        num_envs = self.num_envs
        info = dict(out.info)
        info[TERMINAL_OBS_KEY] = out.terminal_obs["policy"]
        info[TERMINAL_STATES_KEY] = critic_tensor(out.terminal_obs, self.critic_input)
        # skrl bootstraps every `truncated` env from V(s_T): an episode that terminates on its time-limit
        # step (both flags set) is a true terminal, so only time-outs are reported as truncated
        time_outs = out.truncated & ~out.terminated
        return (
            out.obs["policy"],
            out.rewards.view(num_envs, 1),
            out.terminated.view(num_envs, 1),
            time_outs.view(num_envs, 1),
            info,
        )

    def state(self) -> torch.Tensor | None:
        return None if self._obs is None else critic_tensor(self._obs, self.critic_input)

    def render(self, *args: Any, **kwargs: Any) -> Any:
        return None

    def close(self) -> None:
        self._env.close()


def wrap_env(env: Any, wrapper: str = "auto", verbose: bool = True, **kwargs: Any) -> Wrapper:
    """skrl's ``wrap_env`` that knows sensor envs: ``"auto"`` (or ``"sensorgym"``) gives them a
    :class:`SkrlWrapper` (``kwargs`` go to it); skrl's other wrappers are refused for them, with the reason.
    Any other env goes to skrl's ``wrap_env`` unchanged.

    Example:
        >>> import sensorgym as sg
        >>> from sensorgym.envs import BatchedPendulumEnv
        >>> from sensorgym.wrappers import SensorObservation
        >>> from sensorgym.integrations.skrl import wrap_env
        >>> venv = SensorObservation(BatchedPendulumEnv(2, autoreset_mode="SameStep"),
        ...                          {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])})
        >>> type(wrap_env(venv)).__name__
        'SkrlWrapper'
        >>> wrap_env(venv, wrapper="gymnasium")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: skrl's 'gymnasium' wrapper (GymnasiumWrapper) would flatten 'policy' and 'critic' ...
    """
    if not _is_sensor_env(env):
        return skrl_wrap_env(env, wrapper=wrapper, verbose=verbose)
    if wrapper in ("auto", "sensorgym"):
        return SkrlWrapper(env, **kwargs)
    if wrapper in ("gymnasium", "gym"):
        reason = (
            f"skrl's {wrapper!r} wrapper (GymnasiumWrapper) would flatten 'policy' and 'critic' into the "
            "actor's input: the privileged observation would leak to the actor"
        )
    elif wrapper.startswith("isaaclab"):
        reason = (
            f"skrl's {wrapper!r} wrapper reads the spaces of env.unwrapped (the env inside the sensors) and "
            "fails with \"'Box' object is not subscriptable\"; it would also bootstrap time-outs from the "
            "next episode's first state"
        )
    else:
        reason = f"skrl's {wrapper!r} wrapper does not know the {{'policy', 'critic'}} observation"
    raise ValueError(f"{reason}. Fix: use sensorgym.integrations.skrl.wrap_env(env) or SkrlWrapper(env).")


def _terminal(agent: Any, infos: Any, next_observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The terminal observations and states of a step (rows of unfinished envs = the next ones)."""
    name = type(agent).__name__
    if not isinstance(infos, dict) or TERMINAL_OBS_KEY not in infos:
        raise RuntimeError(
            f"{name}: an episode ended but the env's info has no terminal observation, so the transition "
            "cannot be stored with its terminal state. Fix: wrap the env with "
            "sensorgym.integrations.skrl.SkrlWrapper."
        )
    observations, states = infos[TERMINAL_OBS_KEY], infos[TERMINAL_STATES_KEY]
    if observations.shape[0] != next_observations.shape[0]:
        raise RuntimeError(
            f"{name}: the terminal observations cover all envs but this agent gets a slice of them "
            "(simultaneous agents); run one agent per env."
        )
    return observations, states


class _SensorAgent:
    """What every sensorgym skrl agent checks at construction (before skrl's own ``__init__``)."""

    def __init__(
        self,
        *,
        models: dict[str, Any],
        memory: Any = None,
        observation_space: gym.Space | None = None,
        state_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
        device: str | torch.device | None = None,
        cfg: Any = None,
    ) -> None:
        name = type(self).__name__
        base = name.removeprefix("Sensor")
        if isinstance(observation_space, gym.spaces.Dict) and "critic" in observation_space.spaces:
            raise ValueError(
                f"{name}: the observation space (the actor's input) contains the 'critic' part: the "
                "privileged observation would leak to the actor. This is what skrl's own wrap_env(env) "
                "(GymnasiumWrapper) makes of a sensor env. Fix: wrap it with "
                "sensorgym.integrations.skrl.SkrlWrapper(env) (or sensorgym.integrations.skrl.wrap_env)."
            )
        for role, model in (models or {}).items():
            spec = model.get_specification() if hasattr(model, "get_specification") else {}
            if spec.get("rnn"):
                raise ValueError(
                    f"{name}: the {role!r} model is recurrent (its get_specification() has 'rnn'), but "
                    f"{name} is skrl's feed-forward {base}, which passes no hidden state. skrl's recurrent "
                    f"agents ({base}_RNN) have no sensorgym version. Fix: use a feed-forward model (the "
                    "sensors' history_length gives it past readings), or skrl's own recurrent agent, which "
                    "bootstraps time-outs without the terminal state."
                )
        super().__init__(  # type: ignore[call-arg]
            models=models,
            memory=memory,
            observation_space=observation_space,
            state_space=state_space,
            action_space=action_space,
            device=device,
            cfg=cfg if cfg is not None else {},
        )


class _TerminalValue(_SensorAgent):
    """On-policy agents (PPO, A2C, RPO, TRPO): a time-out's reward gets ``γ·V(terminal state)``.

    skrl's ``time_limit_bootstrap`` evaluates the value of ``next_states`` at a truncation; this passes the
    terminal observations and states there instead, and keeps the real next ones for the rollout's last
    value.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cfg.time_limit_bootstrap = True  # type: ignore[attr-defined]

    def record_transition(
        self,
        *,
        observations: torch.Tensor,
        states: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_observations: torch.Tensor,
        next_states: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        infos: Any,
        timestep: int,
        timesteps: int,
    ) -> None:
        boot_obs, boot_states = next_observations, next_states
        if self.training and bool(truncated.any()):  # type: ignore[attr-defined]
            boot_obs, boot_states = _terminal(self, infos, next_observations)
        super().record_transition(  # type: ignore[misc]
            observations=observations,
            states=states,
            actions=actions,
            rewards=rewards,
            next_observations=boot_obs,
            next_states=boot_states,
            terminated=terminated,
            truncated=truncated,
            infos=infos,
            timestep=timestep,
            timesteps=timesteps,
        )
        if self.training:  # type: ignore[attr-defined]  # the rollout continues from the next episode's start
            self._current_next_observations = next_observations
            self._current_next_states = next_states


class _TerminalNextState(_SensorAgent):
    """Off-policy agents (SAC, TD3, DDPG, DQN, DDQN): the replay memory's next observation and state of a
    finished episode are its terminal ones, not the next episode's first (skrl stores ``next_observations``,
    which after an autoreset is the reset observation, and bootstraps every transition not ``terminated``
    from it). Rows of envs that did not finish are the next observation either way."""

    def record_transition(
        self,
        *,
        observations: torch.Tensor,
        states: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        next_observations: torch.Tensor,
        next_states: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        infos: Any,
        timestep: int,
        timesteps: int,
    ) -> None:
        if self.training and (  # type: ignore[attr-defined]
            (isinstance(infos, dict) and TERMINAL_OBS_KEY in infos) or bool((terminated | truncated).any())
        ):
            next_observations, next_states = _terminal(self, infos, next_observations)
        super().record_transition(  # type: ignore[misc]
            observations=observations,
            states=states,
            actions=actions,
            rewards=rewards,
            next_observations=next_observations,
            next_states=next_states,
            terminated=terminated,
            truncated=truncated,
            infos=infos,
            timestep=timestep,
            timesteps=timesteps,
        )


class SensorPPO(_TerminalValue, PPO):
    """skrl PPO that bootstraps truncated episodes from their terminal state: ``r + γ·V(s_T)``.

    A drop-in replacement for ``skrl.agents.torch.ppo.PPO`` (same arguments) for envs wrapped with
    :class:`SkrlWrapper`: at a truncation, the value is computed from the info's terminal observation and
    state instead of ``next_states`` (the next episode's first state after an autoreset).
    ``cfg.time_limit_bootstrap`` is always on (that is what this class is for). It refuses an observation
    space that contains the ``"critic"`` part (what skrl's own ``wrap_env(env)`` produces for a sensor env:
    the actor would read the privileged observation) and recurrent models (skrl's feed-forward PPO passes no
    hidden state). :class:`SensorA2C`, :class:`SensorRPO` and :class:`SensorTRPO` do the same for skrl's
    A2C, RPO and TRPO.

    Example:
        >>> import sensorgym as sg, torch
        >>> from skrl.models.torch import DeterministicMixin, GaussianMixin, Model
        >>> from skrl.trainers.torch import SequentialTrainer
        >>> from skrl.memories.torch import RandomMemory
        >>> from sensorgym.envs import BatchedPendulumEnv
        >>> from sensorgym.wrappers import SensorObservation
        >>> from sensorgym.integrations.skrl import SensorPPO, SkrlWrapper
        >>> env = SkrlWrapper(SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"),
        ...                   {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])}))
        >>> class Actor(GaussianMixin, Model):
        ...     def __init__(self):
        ...         Model.__init__(self, observation_space=env.observation_space,
        ...                        action_space=env.action_space, device=env.device)
        ...         GaussianMixin.__init__(self)
        ...         self.net, self.log_std = torch.nn.Linear(2, 1), torch.nn.Parameter(torch.zeros(1))
        ...     def compute(self, inputs, role=""):
        ...         return self.net(inputs["observations"]), {"log_std": self.log_std}
        >>> class Critic(DeterministicMixin, Model):
        ...     def __init__(self):
        ...         Model.__init__(self, observation_space=env.observation_space, state_space=env.state_space,
        ...                        action_space=env.action_space, device=env.device)
        ...         DeterministicMixin.__init__(self)
        ...         self.net = torch.nn.Linear(env.state_space.shape[0], 1)
        ...     def compute(self, inputs, role=""):
        ...         return self.net(inputs["states"]), {}
        >>> agent = SensorPPO(models={"policy": Actor(), "value": Critic()},
        ...                   memory=RandomMemory(memory_size=8, num_envs=4),
        ...                   observation_space=env.observation_space, state_space=env.state_space,
        ...                   action_space=env.action_space, device=env.device,
        ...                   cfg={"rollouts": 8, "mini_batches": 1,  # no logs, no checkpoints
        ...                        "experiment": {"write_interval": 0, "checkpoint_interval": 0}})
        >>> cfg = {"timesteps": 8, "disable_progressbar": True, "close_environment_at_exit": False}
        >>> SequentialTrainer(env=env, agents=agent, cfg=cfg).train()
        >>> agent.cfg.time_limit_bootstrap
        True
    """


class SensorA2C(_TerminalValue, A2C):
    """skrl A2C that bootstraps truncated episodes from their terminal state (see :class:`SensorPPO`)."""


class SensorRPO(_TerminalValue, RPO):
    """skrl RPO that bootstraps truncated episodes from their terminal state (see :class:`SensorPPO`)."""


class SensorTRPO(_TerminalValue, TRPO):
    """skrl TRPO that bootstraps truncated episodes from their terminal state (see :class:`SensorPPO`)."""


class SensorSAC(_TerminalNextState, SAC):
    """skrl SAC whose replay memory holds a finished episode's terminal state as its next state.

    skrl's SAC stores ``next_observations``/``next_states``, which after an autoreset are the next episode's
    first, and bootstraps every transition that is not ``terminated`` (a time-out included) from them. This
    class stores the terminal observation and state of the env's info instead (as Stable-Baselines3 does
    with ``terminal_observation``), so a time-out's target is ``r + γ·Q(s_T, π(s_T))``. Same arguments as
    ``skrl.agents.torch.sac.SAC``; an observation space with the ``"critic"`` part and recurrent models are
    refused, as for :class:`SensorPPO`. :class:`SensorTD3`, :class:`SensorDDPG`, :class:`SensorDQN` and
    :class:`SensorDDQN` do the same for skrl's TD3, DDPG, DQN and DDQN.
    """


class SensorTD3(_TerminalNextState, TD3):
    """skrl TD3 whose replay memory holds terminal states as next states (see :class:`SensorSAC`)."""


class SensorDDPG(_TerminalNextState, DDPG):
    """skrl DDPG whose replay memory holds terminal states as next states (see :class:`SensorSAC`)."""


class SensorDQN(_TerminalNextState, DQN):
    """skrl DQN whose replay memory holds terminal states as next states (see :class:`SensorSAC`)."""


class SensorDDQN(_TerminalNextState, DDQN):
    """skrl DDQN whose replay memory holds terminal states as next states (see :class:`SensorSAC`)."""
