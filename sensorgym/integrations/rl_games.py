"""rl_games (1.6): observations as ``{"obs": policy, "states": critic input}`` for a central value network,
usable from rl_games' own ``Runner`` for training **and** playing.

* :class:`RlGamesVecEnv`: an rl_games ``IVecEnv``. ``observation_space`` is the ``"policy"`` part,
  ``state_space`` (also in ``get_env_info()``) the critic input (``critic_input``, default ``"policy"`` +
  ``"critic"``), which rl_games' ``central_value_config`` network reads. The infos are the env's own info
  plus ``"time_outs"`` (truncations, for ``value_bootstrap``) and ``"terminal_obs"`` (the terminal
  observations). ``action_space`` is what rl_games can sample: a ``Box`` as a flat ``Box``
  (``a2c_continuous``); ``Discrete(n, start)`` as ``Discrete(n)`` and ``MultiDiscrete`` (any shape),
  ``MultiBinary`` or a ``Dict``/``Tuple`` of discrete spaces as a ``Tuple`` of ``Discrete``, rl_games'
  multi-discrete form (``a2c_discrete``); a ``Dict``/``Tuple`` of ``Box`` spaces as one flat ``Box``. The
  env gets its own action back (``start`` added, ``Dict`` rebuilt); a space mixing both kinds is refused.
* :func:`register`: makes an env factory available by name to rl_games (``params.config.env_name``),
  both as a vec env (training) and through ``env_creator`` (the default player). It passes rl_games'
  ``seed`` through (to training and to the player), builds ``num_actors`` envs when the factory takes
  ``num_envs``, and refuses a factory that builds another number. Given the ``Runner``, it also installs
  :class:`SensorA2CAgent` / :class:`SensorDiscreteA2CAgent` as its ``a2c_continuous`` / ``a2c_discrete``
  algorithms and :class:`SensorPlayer` / :class:`SensorDiscretePlayer` as their players.
* :class:`SensorA2CAgent`, :class:`SensorDiscreteA2CAgent`: rl_games' PPO whose ``value_bootstrap`` uses
  ``γ·V(terminal state)`` at a time-out instead of rl_games' ``γ·V(state before the last step)``, with
  the hidden state of a recurrent actor or central value network left as rl_games' own agent leaves it,
  and ``seed: 0`` applied (rl_games' ``Runner`` seeds nothing for it).
* :class:`SensorPlayer`, :class:`SensorDiscretePlayer`: rl_games' players, seeded: the env (through the
  factory) and torch/numpy/random get the run's seed, so playing a checkpoint twice gives the same games
  (rl_games' own player drops the seed).

Example:
    >>> import sensorgym as sg
    >>> from sensorgym.envs import BatchedPendulumEnv
    >>> from sensorgym.wrappers import SensorObservation
    >>> from sensorgym.integrations.rl_games import RlGamesVecEnv
    >>> env = RlGamesVecEnv(SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"),
    ...                     {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.01)}))
    >>> obs = env.reset()
    >>> sorted(obs), obs["obs"].shape, env.get_env_info()["state_space"].shape  # states: policy + critic
    (['obs', 'states'], torch.Size([4, 2]), (7,))
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv
from rl_games.algos_torch.a2c_continuous import A2CAgent
from rl_games.algos_torch.a2c_discrete import DiscreteA2CAgent
from rl_games.algos_torch.players import PpoPlayerContinuous, PpoPlayerDiscrete
from rl_games.common import env_configurations, vecenv
from rl_games.common.ivecenv import IVecEnv

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
    "RlGamesVecEnv",
    "SensorA2CAgent",
    "SensorDiscreteA2CAgent",
    "SensorDiscretePlayer",
    "SensorPlayer",
    "register",
]

#: ``infos`` key of the terminal observations ``{"obs", "states"}`` (rows of unfinished envs = next ones)
TERMINAL_OBS_KEY = "terminal_obs"
#: the env names :func:`register` registered (the players hand the seed only to these factories)
_REGISTERED: set[str] = set()
#: env_config key that carries the player's seed past rl_games' ``BasePlayer``, which pops ``"seed"``
_PLAYER_SEED_KEY = "_sensorgym_player_seed"


class RlGamesVecEnv(IVecEnv):
    """rl_games vector env over a Gymnasium vector env with a ``{"policy", "critic"}`` observation.

    Args:
        venv: e.g. a :class:`~sensorgym.wrappers.SensorObservation` (SAME_STEP or DISABLED autoreset).
        device: device of the returned tensors (default: the env's device, else CPU).
        critic_input: what ``"states"`` holds: ``("policy", "critic")`` (default) or ``("critic",)``.
        seed: seed of the first ``reset()`` (then the envs' own streams continue); ``seed()`` sets it again.

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
        self._stepper = SameStepStepper(venv, "RlGamesVecEnv", device)
        self.venv = venv
        self.critic_input = resolve_critic_input(critic_input, "RlGamesVecEnv")
        space = venv.single_observation_space
        self.observation_space = space["policy"]
        self.state_space = critic_space(space, self.critic_input)
        self._actions = ActionAdapter(
            venv.single_action_space, "RlGamesVecEnv", "rl_games", discrete="Tuple", flat_box=True
        )
        #: what rl_games samples (a2c_continuous: a flat Box; a2c_discrete: Discrete or a Tuple of them)
        self.action_space = self._actions.space
        self.value_size = 1
        self.num_envs = venv.num_envs
        self._seed = seed

    def _split(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"obs": obs["policy"], "states": critic_tensor(obs, self.critic_input)}

    def seed(self, seed: int | None) -> None:
        """Seed the next ``reset()``."""
        self._seed = seed

    def reset(self) -> dict[str, torch.Tensor]:
        obs = self._stepper.reset(seed=self._seed)
        self._seed = None
        return self._split(obs)

    def step(self, actions: Any) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, dict]:
        out = self._stepper.step(self._actions.to_env(actions, self.num_envs))
        obs = self._split(out.obs)
        terminal = obs if out.terminal_obs is out.obs else self._split(out.terminal_obs)
        # the env's own info (what rl_games' observers and player read: "episode", "scores", ...) and ours
        infos = {**out.info, "time_outs": out.truncated & ~out.terminated, TERMINAL_OBS_KEY: terminal}
        return obs, out.rewards, (out.terminated | out.truncated), infos

    def get_number_of_agents(self) -> int:
        return 1

    def get_env_info(self) -> dict[str, Any]:
        return {
            "action_space": self.action_space,
            "observation_space": self.observation_space,
            "state_space": self.state_space,
            "agents": 1,
            "value_size": 1,
        }

    def close(self) -> None:
        self.venv.close()


def _seed_zero(params: dict[str, Any]) -> None:
    """Apply ``params["seed"] == 0``, which rl_games' ``Runner.load_config`` skips (``if self.seed:``), as it
    applies any other seed: torch, numpy and random seeded, and the env factory handed the seed."""
    seed = params.get("seed")
    if seed is None or seed != 0:
        return
    _seed_rngs(0)
    env_config = params.setdefault("config", {}).setdefault("env_config", {})
    env_config.setdefault("seed", 0)


def _seed_rngs(seed: int) -> None:
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    np.random.seed(seed)
    random.seed(seed)


class _TerminalValue:
    """rl_games' ``value_bootstrap`` from the terminal state, for the A2C agents (continuous and discrete)."""

    def __init__(self, base_name: str, params: dict[str, Any]) -> None:
        _seed_zero(params)
        super().__init__(base_name, params)  # type: ignore[call-arg]

    def get_action_values(self, obs: dict[str, Any]) -> dict[str, Any]:
        res = super().get_action_values(obs)  # type: ignore[misc]
        self._sensorgym_step = res  # rl_games reads res["values"] again after env_step to bootstrap
        return res

    def get_masked_action_values(self, obs: dict[str, Any], action_masks: Any) -> dict[str, Any]:
        res = super().get_masked_action_values(obs, action_masks)  # type: ignore[misc]
        self._sensorgym_step = res
        return res

    def env_step(self, actions: Any) -> Any:
        obs, rewards, dones, infos = super().env_step(actions)  # type: ignore[misc]
        res = getattr(self, "_sensorgym_step", None)
        time_outs = infos.get("time_outs") if isinstance(infos, dict) else None
        terminal = infos.get(TERMINAL_OBS_KEY) if isinstance(infos, dict) else None
        if self.value_bootstrap and res is not None and time_outs is not None and terminal is not None:  # type: ignore[attr-defined]
            time_outs = self.cast_obs(time_outs).bool()  # type: ignore[attr-defined]
            if bool(time_outs.any()):
                res["values"] = torch.where(
                    time_outs.view(-1, 1), self._terminal_values(terminal), res["values"]
                )
        self._sensorgym_step = None
        return obs, rewards, dones, infos

    def _terminal_values(self, terminal: dict[str, torch.Tensor]) -> torch.Tensor:
        """``V(s_T)`` with the hidden state of the step (``h_t``), which is left as it was: a recurrent
        central value network's ``get_value`` stores the state it ends in, so the extra evaluation would
        advance the hidden state of every env by one phantom step."""
        cv = self.central_value_net if self.has_central_value else None  # type: ignore[attr-defined]
        cv_states = cv.rnn_states if cv is not None else None
        actor_states = self.rnn_states  # type: ignore[attr-defined]
        try:
            return self.get_values(self.obs_to_tensors(terminal))  # type: ignore[attr-defined]
        finally:
            if cv is not None:
                cv.rnn_states = cv_states
            self.rnn_states = actor_states


class SensorA2CAgent(_TerminalValue, A2CAgent):
    """rl_games' ``a2c_continuous`` agent whose ``value_bootstrap`` uses the terminal state.

    rl_games adds ``γ·V(s_t)`` (the value of the state the last action was taken in) to the reward of a
    time-out step; with :class:`RlGamesVecEnv`, whose infos carry the terminal observation, this agent adds
    ``γ·V(s_T)`` instead (central value network or not; a recurrent one evaluated from the step's hidden
    state, which stays as rl_games leaves it). ``seed: 0`` is applied (rl_games' ``Runner`` skips it).
    Everything else is rl_games' agent; ``register(..., runner=runner)`` installs it for
    ``algo: {name: a2c_continuous}`` (:class:`SensorDiscreteA2CAgent` for ``a2c_discrete``).
    """


class SensorDiscreteA2CAgent(_TerminalValue, DiscreteA2CAgent):
    """rl_games' ``a2c_discrete`` agent whose ``value_bootstrap`` uses the terminal state (see
    :class:`SensorA2CAgent`)."""


class _SeededPlayer:
    """rl_games' player with the run's seed: rl_games' ``BasePlayer`` pops ``env_config["seed"]`` (from the
    ``Runner``'s own params, so a second play has none) and uses it nowhere. This one copies the params,
    hands the seed (``env_config["seed"]``, else ``params["seed"]``) to a factory registered with
    :func:`register`, and seeds torch, numpy and random with it, so a play is reproducible."""

    def __init__(self, params: dict[str, Any]) -> None:
        params = dict(params)
        config = params["config"] = dict(params.get("config", {}))
        env_config = config["env_config"] = dict(config.get("env_config", {}))
        if isinstance(config.get("player"), dict):
            player = config["player"] = dict(config["player"])
            if isinstance(player.get("env_config"), dict):
                env_config = player["env_config"] = dict(player["env_config"])
        seed = env_config.get("seed", params.get("seed"))
        if seed is not None and config.get("env_name") in _REGISTERED:
            env_config[_PLAYER_SEED_KEY] = seed  # survives BasePlayer's pop of "seed"
        if seed is not None:
            _seed_rngs(int(seed))
        super().__init__(params)  # type: ignore[call-arg]


class SensorPlayer(_SeededPlayer, PpoPlayerContinuous):
    """rl_games' continuous PPO player, seeded (see :func:`register`)."""


class SensorDiscretePlayer(_SeededPlayer, PpoPlayerDiscrete):
    """rl_games' discrete PPO player, seeded (see :func:`register`)."""


def _parameters(fn: Callable[..., Any]) -> Any:
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


def _named(fn: Callable[..., Any], name: str) -> bool:
    return name in _parameters(fn)


def _required(fn: Callable[..., Any], name: str) -> bool:
    parameter = _parameters(fn).get(name)
    return parameter is not None and parameter.default is inspect.Parameter.empty


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    params = _parameters(fn)
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def register(
    name: str,
    make_env: Callable[..., VectorEnv],
    *,
    critic_input: str | Sequence[str] = DEFAULT_CRITIC_INPUT,
    device: str | torch.device | None = None,
    runner: Any = None,
) -> None:
    """Register ``make_env(**env_config)`` under ``name`` for rl_games (``params.config.env_name``).

    The training vec env and the default player's env (``env_creator``) are both :class:`RlGamesVecEnv`.
    rl_games' ``seed`` is passed to ``make_env`` when it takes ``seed`` (or ``**kwargs``) and seeds the
    first reset either way; ``num_actors`` is passed as ``num_envs`` when ``make_env`` takes it, and a
    factory that builds another number of envs is refused. The default player calls ``env_creator`` with
    ``params.config.player.env_config`` (else ``env_config``) and no ``num_actors``: give ``num_envs`` a
    default (or put it in that ``env_config``). With ``runner`` (an ``rl_games.torch_runner.
    Runner``), its ``a2c_continuous`` / ``a2c_discrete`` algorithms become :class:`SensorA2CAgent` /
    :class:`SensorDiscreteA2CAgent` (time-outs bootstrapped from the terminal state, ``seed: 0`` applied)
    and their players :class:`SensorPlayer` / :class:`SensorDiscretePlayer` (the env and the random
    generators seeded with the run's seed).

    Example:
        >>> import sensorgym as sg
        >>> from rl_games.common import env_configurations
        >>> from sensorgym.envs import BatchedPendulumEnv
        >>> from sensorgym.wrappers import SensorObservation
        >>> from sensorgym.integrations.rl_games import register
        >>> def make(num_envs=4, seed=None):
        ...     return SensorObservation(BatchedPendulumEnv(num_envs, autoreset_mode="SameStep"),
        ...                              {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])}, seed=seed)
        >>> register("pendulum_doc", make)
        >>> env = env_configurations.configurations["pendulum_doc"]["env_creator"]()
        >>> type(env).__name__, env.observation_space.shape
        ('RlGamesVecEnv', (2,))
    """
    keys = resolve_critic_input(critic_input, "register")

    def build(num_actors: int | None, kwargs: dict[str, Any]) -> RlGamesVecEnv:
        kwargs = dict(kwargs)
        seed = kwargs.pop("seed", None)
        player_seed = kwargs.pop(_PLAYER_SEED_KEY, None)
        seed = player_seed if seed is None else seed
        if seed is not None and _accepts(make_env, "seed"):
            kwargs["seed"] = seed
        if num_actors is not None and "num_envs" not in kwargs and _named(make_env, "num_envs"):
            kwargs["num_envs"] = num_actors
        if num_actors is None and "num_envs" not in kwargs and _required(make_env, "num_envs"):
            raise TypeError(
                f"rl_games env {name!r}: the default player builds its env with env_creator(**env_config), "
                "which passes no number of envs, but the factory requires num_envs. Fix: give num_envs a "
                "default in the factory, or set params.config.player.env_config.num_envs."
            )
        venv = make_env(**kwargs)
        if num_actors is not None and venv.num_envs != num_actors:
            venv.close()
            raise ValueError(
                f"rl_games env {name!r}: config num_actors={num_actors}, but the factory built "
                f"{venv.num_envs} envs. Fix: set params.config.num_actors={venv.num_envs}, or let the "
                "factory take a num_envs argument (register passes num_actors to it)."
            )
        return RlGamesVecEnv(venv, device, critic_input=keys, seed=seed)

    vecenv.register(name, lambda config_name, num_actors, **kwargs: build(num_actors, kwargs))
    env_configurations.register(
        name, {"vecenv_type": name, "env_creator": lambda **kwargs: build(None, kwargs)}
    )
    _REGISTERED.add(name)
    if runner is not None:
        runner.algo_factory.register_builder("a2c_continuous", lambda **kw: SensorA2CAgent(**kw))
        runner.algo_factory.register_builder("a2c_discrete", lambda **kw: SensorDiscreteA2CAgent(**kw))
        runner.player_factory.register_builder("a2c_continuous", lambda **kw: SensorPlayer(**kw))
        runner.player_factory.register_builder("a2c_discrete", lambda **kw: SensorDiscretePlayer(**kw))
