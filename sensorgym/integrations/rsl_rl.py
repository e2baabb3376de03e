"""rsl_rl (5.x): observations as a ``TensorDict`` of groups, ``obs_groups`` for the runner, the env's own
episode clock, and time-outs bootstrapped from the terminal state.

* :class:`RslRlVecEnv`: an rsl_rl ``VecEnv``. The sensor observation's ``"policy"`` and ``"critic"`` keys
  become rsl_rl observation groups; :attr:`RslRlVecEnv.obs_groups` points the actor at ``["policy"]`` and
  the critic at ``critic_input`` (default ``["policy", "critic"]``). ``episode_length_buf`` and
  ``max_episode_length`` are the wrapped env's own step counters and time limit (as in Isaac Lab's
  wrapper), so ``runner.learn(n, init_at_random_ep_len=True)`` really spreads the episode starts.
  ``extras`` carry ``"time_outs"``, ``"terminal_observations"`` and, under ``"log"`` (what rsl_rl's logger
  records), the numeric entries of the env's own info (nested keys joined with ``/``; an env that finished
  reports its terminal step's info). The action space must be continuous: a ``Box``, or a ``Dict``/``Tuple``
  of them (one flat action vector, unflattened for the env); rsl_rl has no discrete action distribution, so
  a discrete action space is refused at construction.
* :class:`TerminalValuePPO`: rsl_rl's PPO, except that a time-out is bootstrapped with
  ``γ·V(terminal observation)`` instead of rsl_rl's ``γ·V(observation before the last step)``. Select it
  in the runner config:
  ``"algorithm": {"class_name": "sensorgym.integrations.rsl_rl:TerminalValuePPO", ...}``.

Example:
    >>> import sensorgym as sg
    >>> from sensorgym.envs import BatchedPendulumEnv
    >>> from sensorgym.wrappers import SensorObservation
    >>> from sensorgym.integrations.rsl_rl import RslRlVecEnv
    >>> env = RslRlVecEnv(SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"),
    ...                   {"angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.01)}))
    >>> obs = env.get_observations()
    >>> sorted(obs.keys()), obs["policy"].shape, env.obs_groups, env.max_episode_length
    (['critic', 'policy'], torch.Size([4, 2]), {'actor': ['policy'], 'critic': ['policy', 'critic']}, 200)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from gymnasium.vector import VectorEnv
from rsl_rl.algorithms import PPO
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from .adapters import (
    DEFAULT_CRITIC_INPUT,
    ActionAdapter,
    EpisodeClock,
    SameStepStepper,
    info_log,
    resolve_critic_input,
)

__all__ = ["OBS_GROUPS", "TERMINAL_OBS_KEY", "RslRlVecEnv", "TerminalValuePPO"]

#: rsl_rl ``obs_groups`` for the default critic input (``RslRlVecEnv.obs_groups`` follows ``critic_input``)
OBS_GROUPS = {"actor": ["policy"], "critic": list(DEFAULT_CRITIC_INPUT)}

#: ``extras`` key of the terminal observations (a TensorDict; rows of unfinished envs = next observation)
TERMINAL_OBS_KEY = "terminal_observations"


class RslRlVecEnv(VecEnv):
    """An rsl_rl ``VecEnv`` over a Gymnasium vector env (SAME_STEP or DISABLED autoreset).

    Args:
        venv: e.g. a :class:`~sensorgym.wrappers.SensorObservation`.
        max_episode_length: the env's time limit; read from the env (its ``TimeLimit`` sub-env wrappers,
            a batched env's ``max_episode_steps``/``max_episode_length``, its spec). Passing a different
            value than the env's is an error: time-outs would be reported at the wrong step.
        device: device of the returned tensors (default: the env's device, else CPU).
        critic_input: observation keys the critic reads, ``("policy", "critic")`` (default) or
            ``("critic",)``; :attr:`obs_groups` is the matching runner config.
        seed: seed of the env's first reset (rsl_rl never passes one), for reproducible runs; None: unseeded.

    ``num_actions`` is the size of the flat action vector (a ``Dict`` of ``Box`` spaces: all of them, in the
    space's order). A discrete action space (``Discrete``, ``MultiDiscrete``, ``MultiBinary``) raises a
    ``ValueError``: rsl_rl's actors sample only continuous distributions (Gaussian, Beta).

    Example: see the module docstring.
    """

    def __init__(
        self,
        venv: VectorEnv,
        max_episode_length: int | None = None,
        device: str | torch.device | None = None,
        *,
        critic_input: str | Sequence[str] = DEFAULT_CRITIC_INPUT,
        seed: int | None = None,
    ) -> None:
        self._stepper = SameStepStepper(venv, "RslRlVecEnv", device)
        self.venv = venv
        self.critic_input = resolve_critic_input(critic_input, "RslRlVecEnv")
        self.num_envs = venv.num_envs
        self._actions = ActionAdapter(
            venv.single_action_space,
            "RslRlVecEnv",
            "rsl_rl",
            discrete=None,
            flat_box=True,
            refusal_fix=(
                "train it with skrl (SkrlWrapper), rl_games (register) or Stable-Baselines3 (SB3VecEnv), "
                "whose adapters take discrete actions, or give the env a Box action space"
            ),
        )
        self.num_actions = self._actions.width
        self.device = self._stepper.device
        self.cfg: dict[str, Any] = {}
        # rsl_rl's runner never resets with a seed: the first reset takes ``seed`` (None: unseeded)
        self._obs = self._group(self._stepper.reset(seed))
        self._clock = EpisodeClock(venv, max_episode_length)
        if self._clock.max_episode_length is None:
            raise ValueError(
                "RslRlVecEnv: cannot find the env's time limit (no TimeLimit in its sub-envs, no "
                "max_episode_steps/max_episode_length on a batched env, no spec). Fix: pass "
                "max_episode_length=<steps>."
            )
        self.max_episode_length = self._clock.max_episode_length

    @property
    def obs_groups(self) -> dict[str, list[str]]:
        """The runner's ``obs_groups`` for this env's critic input."""
        return {"actor": ["policy"], "critic": list(self.critic_input)}

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """The env's own per-env episode step counters (a copy); assigning writes them into the env."""
        return self._clock.get().to(self.device)

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self._clock.set(value)

    def _group(self, obs: dict[str, torch.Tensor]) -> TensorDict:
        return TensorDict(dict(obs), batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._obs

    def reset(self, seed: int | None = None) -> TensorDict:
        self._obs = self._group(self._stepper.reset(seed))
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        out = self._stepper.step(self._actions.to_env(actions, self.num_envs))
        dones = out.terminated | out.truncated
        self._clock.advance(dones)
        self._obs = self._group(out.obs)
        # SAME_STEP: the info of an env that finished is its reset info; its last step's is in final_info
        finished = dones if out.reset_info is None else None
        extras = {
            "time_outs": out.truncated & ~out.terminated,
            TERMINAL_OBS_KEY: self._obs if out.terminal_obs is out.obs else self._group(out.terminal_obs),
            "log": info_log(out.info, self.num_envs, finished),
        }
        return self._obs, out.rewards, dones.long(), extras

    def close(self) -> None:
        self.venv.close()


class TerminalValuePPO(PPO):
    """rsl_rl PPO that bootstraps time-outs from the terminal observation: ``r + γ·V(s_T)``.

    rsl_rl's own PPO adds ``γ·V(s_{T-1})`` (the value of the observation the last action was taken on),
    because Isaac Lab envs do not return the terminal observation. :class:`RslRlVecEnv` does
    (``extras["terminal_observations"]``), so this class uses it; without it, it falls back to rsl_rl's
    behaviour. Everything else is rsl_rl's PPO.

    Example:
        >>> import sensorgym as sg
        >>> from rsl_rl.runners import OnPolicyRunner
        >>> from sensorgym.envs import BatchedPendulumEnv
        >>> from sensorgym.wrappers import SensorObservation
        >>> from sensorgym.integrations.rsl_rl import RslRlVecEnv
        >>> env = RslRlVecEnv(SensorObservation(BatchedPendulumEnv(4, autoreset_mode="SameStep"),
        ...                   {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])}))
        >>> cfg = {"num_steps_per_env": 8, "save_interval": 100, "obs_groups": env.obs_groups,
        ...        "algorithm": {"class_name": "sensorgym.integrations.rsl_rl:TerminalValuePPO"},
        ...        "actor": {"class_name": "MLPModel", "hidden_dims": [8],
        ...                  "distribution_cfg": {"class_name": "GaussianDistribution"}},
        ...        "critic": {"class_name": "MLPModel", "hidden_dims": [8]}}
        >>> runner = OnPolicyRunner(env, cfg, device="cpu")  # doctest: +ELLIPSIS
        -----...
        >>> type(runner.alg).__name__
        'TerminalValuePPO'
    """

    def process_env_step(
        self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict[str, Any]
    ) -> None:
        time_outs, terminal = extras.get("time_outs"), extras.get(TERMINAL_OBS_KEY)
        if time_outs is None or terminal is None:
            super().process_env_step(obs, rewards, dones, extras)
            return
        time_outs = time_outs.to(self.device)
        rewards = rewards.clone()
        if bool(time_outs.any()):
            hidden = self.critic.get_hidden_state()
            with torch.no_grad():
                terminal_values = self.critic(terminal.to(self.device)).detach().squeeze(-1)
            self.critic.reset(hidden_state=hidden)
            rewards += self.gamma * terminal_values * time_outs.float()
        # rsl_rl's own bootstrap (from the value before the step) is replaced, not added to
        super().process_env_step(obs, rewards, dones, {k: v for k, v in extras.items() if k != "time_outs"})
