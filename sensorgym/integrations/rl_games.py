"""rl_games (1.6): observations as ``{"obs": policy, "states": critic input}`` for a central value network,
usable from rl_games' own ``Runner`` for training **and** playing.

* :class:`RlGamesVecEnv`: an rl_games ``IVecEnv``. ``observation_space`` is the ``"policy"`` part,
  ``state_space`` (also in ``get_env_info()``) the critic input (``critic_input``, default ``"policy"`` +
  ``"critic"``), which rl_games' ``central_value_config`` network reads. ``infos["time_outs"]`` marks
  truncations for ``value_bootstrap``; ``infos["terminal_obs"]`` holds the terminal observations.
* :func:`register`: makes an env factory available by name to rl_games (``params.config.env_name``),
  both as a vec env (training) and through ``env_creator`` (the default player). It passes rl_games'
  ``seed`` through, builds ``num_actors`` envs when the factory takes ``num_envs``, and refuses a factory
  that builds another number. Given the ``Runner``, it also installs :class:`SensorA2CAgent` as its
  ``a2c_continuous`` algorithm.
* :class:`SensorA2CAgent`: rl_games' continuous PPO whose ``value_bootstrap`` uses ``γ·V(terminal state)``
  at a time-out instead of rl_games' ``γ·V(state before the last step)``.

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
from collections.abc import Callable, Sequence
from typing import Any

import torch
from gymnasium.vector import VectorEnv
from rl_games.algos_torch.a2c_continuous import A2CAgent
from rl_games.common import env_configurations, vecenv
from rl_games.common.ivecenv import IVecEnv

from .adapters import DEFAULT_CRITIC_INPUT, SameStepStepper, critic_space, critic_tensor, resolve_critic_input

__all__ = ["TERMINAL_OBS_KEY", "RlGamesVecEnv", "SensorA2CAgent", "register"]

#: ``infos`` key of the terminal observations ``{"obs", "states"}`` (rows of unfinished envs = next ones)
TERMINAL_OBS_KEY = "terminal_obs"


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
        self.action_space = venv.single_action_space
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
        batch = actions if torch.is_tensor(actions) else torch.as_tensor(actions)
        out = self._stepper.step(batch.reshape(self.num_envs, -1))
        obs = self._split(out.obs)
        terminal = obs if out.terminal_obs is out.obs else self._split(out.terminal_obs)
        infos = {"time_outs": out.truncated & ~out.terminated, TERMINAL_OBS_KEY: terminal}
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


class SensorA2CAgent(A2CAgent):
    """rl_games' ``a2c_continuous`` agent whose ``value_bootstrap`` uses the terminal state.

    rl_games adds ``γ·V(s_t)`` (the value of the state the last action was taken in) to the reward of a
    time-out step; with :class:`RlGamesVecEnv`, whose infos carry the terminal observation, this agent adds
    ``γ·V(s_T)`` instead (central value network or not). Everything else is rl_games' agent;
    ``register(..., runner=runner)`` installs it for the standard ``algo: {name: a2c_continuous}``.
    """

    def get_action_values(self, obs: dict[str, Any]) -> dict[str, Any]:
        res = super().get_action_values(obs)
        self._sensorgym_step = res  # rl_games reads res["values"] again after env_step to bootstrap
        return res

    def env_step(self, actions: Any) -> Any:
        obs, rewards, dones, infos = super().env_step(actions)
        res = getattr(self, "_sensorgym_step", None)
        time_outs = infos.get("time_outs") if isinstance(infos, dict) else None
        terminal = infos.get(TERMINAL_OBS_KEY) if isinstance(infos, dict) else None
        if self.value_bootstrap and res is not None and time_outs is not None and terminal is not None:
            time_outs = self.cast_obs(time_outs).bool()
            if bool(time_outs.any()):
                values = self.get_values(self.obs_to_tensors(terminal))
                res["values"] = torch.where(time_outs.view(-1, 1), values, res["values"])
        self._sensorgym_step = None
        return obs, rewards, dones, infos


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
    Runner``), its ``a2c_continuous`` algorithm becomes :class:`SensorA2CAgent` (time-outs bootstrapped
    from the terminal state).

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
    if runner is not None:
        runner.algo_factory.register_builder("a2c_continuous", lambda **kw: SensorA2CAgent(**kw))
