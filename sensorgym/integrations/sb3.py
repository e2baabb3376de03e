"""Stable-Baselines3: a ``VecEnv`` adapter for Gymnasium vector envs and an asymmetric actor-critic.

* :class:`SB3VecEnv` turns a Gymnasium ``VectorEnv`` in ``SAME_STEP`` or ``DISABLED`` autoreset mode
  (e.g. a :class:`~sensorgym.wrappers.SensorObservation`) into an SB3 ``VecEnv``. Terminal observations
  carry the whole Dict, ``"critic"`` included, so PPO bootstraps truncated episodes through the critic.
* :class:`AsymmetricActorCriticPolicy`: the actor reads only the ``"policy"`` key(s), the critic reads
  ``critic_input`` (default ``"policy"`` + ``"critic"``). Works with PPO and A2C, save/load, and
  ``VecNormalize(norm_obs_keys=...)``.
* :class:`AsymmetricSACPolicy` and :class:`AsymmetricTD3Policy`: the same split for SAC and TD3: the actor
  (and its target) read ``"policy"``, the Q-networks (and their targets) read ``critic_input``; the
  replay buffer stores the whole Dict, so time-limit bootstrapping uses the terminal critic observation.
  (``SAC("MultiInputPolicy")`` would let the actor read ``"critic"``.)

Example:
    >>> import gymnasium as gym, sensorgym as sg
    >>> from stable_baselines3 import PPO
    >>> from sensorgym.wrappers import make_sensor_vec
    >>> from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv
    >>> envs = make_sensor_vec("Pendulum-v1", 2, {
    ...     "angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.02, delay=0.05)},
    ...     autoreset_mode="SameStep", seed=0)
    >>> model = PPO(AsymmetricActorCriticPolicy, SB3VecEnv(envs), n_steps=32, batch_size=32, seed=0)
    >>> _ = model.learn(64)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.preprocessing import get_flattened_obs_dim
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, create_mlp
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.sac.policies import SACPolicy
from stable_baselines3.td3.policies import TD3Policy
from torch import nn

from ..wrappers.common import sub_env_attr
from .adapters import ActionAdapter, SameStepStepper
from .sb3_checkpoint import from_plain, save_checkpoint, to_plain

__all__ = [
    "DEFAULT_CRITIC_INPUT",
    "AsymmetricActorCriticPolicy",
    "AsymmetricSACPolicy",
    "AsymmetricTD3Policy",
    "KeysExtractor",
    "SB3VecEnv",
    "SensorCheckpointCallback",
    "from_plain",
    "to_plain",
    "unbatch_info",
]


#: what the critic reads by default (the same default as the rsl_rl, skrl and rl_games adapters)
DEFAULT_CRITIC_INPUT: tuple[str, ...] = ("policy", "critic")


def _critic_keys(
    critic_input: str | Sequence[str] | None, critic_keys: Sequence[str] | None
) -> tuple[str, ...]:
    """``critic_input`` (``"critic"``, ``"policy+critic"`` or a key sequence), or its older name
    ``critic_keys``."""
    if critic_keys is not None:
        if critic_input is not None and tuple(critic_keys) != _critic_keys(critic_input, None):
            raise ValueError(
                f"critic_input={critic_input!r} and critic_keys={critic_keys!r} disagree. Fix: pass only "
                "critic_input (critic_keys is its older name)."
            )
        return tuple(critic_keys)
    if critic_input is None:
        return DEFAULT_CRITIC_INPUT
    keys = tuple(critic_input.split("+")) if isinstance(critic_input, str) else tuple(critic_input)
    if not keys or len(set(keys)) != len(keys):
        raise ValueError(f"critic_input={critic_input!r}: expected distinct observation keys.")
    return keys


def _to_numpy(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {k: _to_numpy(v) for k, v in x.items()}
    if torch.is_tensor(x):
        return x.detach().cpu().numpy()
    return x


def unbatch_info(info: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Env ``i``'s entries of a Gymnasium vector info dict, honouring the ``_key`` masks."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = info.get("_" + key)
        if mask is not None and not bool(mask[i]):
            continue
        if isinstance(value, Mapping):
            out[key] = unbatch_info(value, i)
        else:
            item = value[i]
            out[key] = item.item() if torch.is_tensor(item) and item.dim() == 0 else _to_numpy(item)
    return out


class SB3VecEnv(VecEnv):
    """An SB3 ``VecEnv`` over a Gymnasium ``VectorEnv`` whose autoreset mode is SAME_STEP or DISABLED.

    Stepped by :class:`~sensorgym.integrations.adapters.SameStepStepper` (the autoreset handling every
    adapter shares, here on the CPU): SAME_STEP: ``info["final_obs"]`` / ``info["final_info"]`` become
    ``terminal_observation`` and the env's info. DISABLED: finished envs are reset with ``reset_mask``
    (one more call). Torch observations are converted to numpy.
    """

    def __init__(self, venv: VectorEnv) -> None:
        # the autoreset handling (and the NEXT_STEP refusal) shared with the other RL adapters
        self._stepper = SameStepStepper(venv, "SB3VecEnv", "cpu", sensor_dict=False)
        self.venv = venv
        self.mode = self._stepper.mode
        self._actions: Any = None
        # SB3 samples Box, Discrete, MultiDiscrete (1-D) and MultiBinary; a (Multi)Discrete start is added
        # back, a Dict/Tuple is one flat Box or MultiDiscrete (see ActionAdapter)
        self._action_adapter = ActionAdapter(
            venv.single_action_space, "SB3VecEnv", "Stable-Baselines3", keep_multibinary=True
        )
        super().__init__(venv.num_envs, venv.single_observation_space, self._action_adapter.space)

    # -- VecEnv API ------------------------------------------------------------------------------------
    def reset(self):
        seeds = (
            None if all(s is None for s in self._seeds) else [s if s is not None else 0 for s in self._seeds]
        )
        options = self._options[0] if self._options and self._options[0] else None
        obs, info = self.venv.reset(seed=seeds, options=options)
        self.reset_infos = [unbatch_info(info, i) for i in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return _to_numpy(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self):
        out = self._stepper.step(self._action_adapter.to_env(self._actions, self.num_envs))
        term, trunc = out.terminated.numpy(), out.truncated.numpy()
        dones = term | trunc
        infos = [unbatch_info(out.info, i) for i in range(self.num_envs)]
        if dones.any():
            final_info = out.info.get("final_info") if self.mode is AutoresetMode.SAME_STEP else None
            terminal = _to_numpy(out.terminal_obs)
            for i in np.flatnonzero(dones):
                if final_info:
                    infos[i] = unbatch_info(final_info, i)
                infos[i]["terminal_observation"] = self._row(terminal, i)
                infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
                if out.reset_info is not None:  # DISABLED: the stepper reset the finished envs
                    self.reset_infos[i] = unbatch_info(out.reset_info, i)
        return _to_numpy(out.obs), out.rewards.numpy(), dones, infos

    @staticmethod
    def _row(batch: Any, i: int) -> Any:
        if isinstance(batch, np.ndarray) and batch.dtype == object:
            return _to_numpy(batch[i])
        if isinstance(batch, Mapping):
            return {k: np.array(_to_numpy(v[i]), copy=True) for k, v in batch.items()}
        return np.array(_to_numpy(batch[i]), copy=True)

    def close(self) -> None:
        self.venv.close()

    def _sub_envs(self) -> Any:
        return self.venv.unwrapped

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        base = self._sub_envs()
        if hasattr(base, "get_attr"):  # a missing attribute raises here, not in an Async worker
            values = sub_env_attr(base, attr_name)
        else:  # a natively batched env: one object for all envs
            values = [getattr(base, attr_name, None)] * self.num_envs
        return [values[i] for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        base = self._sub_envs()
        if not hasattr(base, "set_attr"):
            setattr(base, attr_name, value)
            return
        idx = list(self._get_indices(indices))
        if sorted(idx) == list(range(self.num_envs)):  # every env: nothing to read back
            base.set_attr(attr_name, [value] * self.num_envs)
            return
        current = sub_env_attr(base, attr_name)
        for i in idx:
            current[i] = value
        base.set_attr(attr_name, current)

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        base = self._sub_envs()
        if hasattr(base, "call") and not all(base.call("has_wrapper_attr", method_name)):
            # raised here: a sub-env that raises inside an AsyncVectorEnv worker gets it shut down
            raise AttributeError(f"a sub-env has no method {method_name!r}")
        results = list(base.call(method_name, *method_args, **method_kwargs))
        return [results[i] for i in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        """Whether the sub-envs are wrapped with ``wrapper_class`` (a ``gym.Wrapper``), or the vector env
        with it (a ``VectorWrapper`` between this adapter and the base vector env).

        Sync sub-envs are inspected directly; Async sub-envs by the class names of their wrapper chain
        (``str(env)`` in the worker, compared with ``wrapper_class`` and its subclasses); a natively batched
        env has no sub-envs, so no ``gym.Wrapper`` wraps them."""
        idx = list(self._get_indices(indices))
        if isinstance(wrapper_class, type) and issubclass(wrapper_class, VectorWrapper):
            node, found = self.venv, False
            while isinstance(node, VectorWrapper):
                found = found or isinstance(node, wrapper_class)
                node = node.env
            return [found for _ in idx]
        base = self._sub_envs()
        envs = getattr(base, "envs", None)
        if envs is not None:
            return [is_wrapped(envs[i], wrapper_class) for i in idx]
        if hasattr(base, "call") and hasattr(base, "processes"):  # Async: ask the workers
            names = {c.__name__ for c in _subclasses(wrapper_class)}
            chains = [set(re.findall(r"<(\w+)", str(text))) for text in base.call("__str__")]
            return [bool(chains[i] & names) for i in idx]
        return [False for _ in idx]


def _subclasses(cls: type) -> list[type]:
    out, todo = [cls], [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.append(sub)
                todo.append(sub)
    return out


# -- asymmetric actor-critic ---------------------------------------------------------------------------
class KeysExtractor(BaseFeaturesExtractor):
    """Flatten and concatenate an ordered list of keys of a Dict observation."""

    def __init__(self, observation_space: gym.spaces.Dict, keys: Sequence[str]) -> None:
        missing = [k for k in keys if k not in observation_space.spaces]
        if missing:
            raise ValueError(
                f"KeysExtractor: keys {missing} are not in the observation space "
                f"{list(observation_space.spaces)}."
            )
        dim = sum(get_flattened_obs_dim(observation_space[k]) for k in keys)
        super().__init__(observation_space, features_dim=dim)
        self.keys = tuple(keys)

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([torch.flatten(observations[k], start_dim=1) for k in self.keys], dim=1)


class _TwoInputMlp(nn.Module):
    """``MlpExtractor``'s interface with separate input sizes for the actor and the critic."""

    def __init__(
        self,
        pi_dim: int,
        vf_dim: int,
        net_arch: dict[str, list[int]],
        activation_fn: type[nn.Module],
        device: torch.device | str,
    ) -> None:
        super().__init__()
        pi, vf = net_arch.get("pi", []), net_arch.get("vf", [])
        self.policy_net = nn.Sequential(*create_mlp(pi_dim, -1, pi, activation_fn)).to(device)
        self.value_net = nn.Sequential(*create_mlp(vf_dim, -1, vf, activation_fn)).to(device)
        self.latent_dim_pi = pi[-1] if pi else pi_dim
        self.latent_dim_vf = vf[-1] if vf else vf_dim

    def forward(self, features: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(features[0]), self.forward_critic(features[1])

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        return self.policy_net(features)

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        return self.value_net(features)


class _ActorCriticKeys:
    """The keyword arguments shared by the asymmetric policies (a mixin placed before SB3's policy class):
    which observation keys the actor reads and which the critic reads; features extractors are never
    shared, and both key sets are saved with the policy."""

    def __init__(
        self,
        observation_space: gym.spaces.Dict,
        action_space: gym.spaces.Space,
        lr_schedule: Any,
        *args: Any,
        actor_keys: Sequence[str] = ("policy",),
        critic_input: str | Sequence[str] | None = None,
        critic_keys: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.actor_keys, self.critic_input = tuple(actor_keys), _critic_keys(critic_input, critic_keys)
        kwargs["share_features_extractor"] = False
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    @property
    def critic_keys(self) -> tuple[str, ...]:
        """The older name of :attr:`critic_input`."""
        return self.critic_input

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(actor_keys=self.actor_keys, critic_input=self.critic_input)
        return data


class AsymmetricActorCriticPolicy(_ActorCriticKeys, MultiInputActorCriticPolicy):
    """Actor-critic policy (PPO, A2C) whose actor sees ``actor_keys`` and whose critic sees ``critic_input``.

    Args:
        actor_keys: observation keys the actor reads (default ``("policy",)``).
        critic_input: observation keys the critic reads: ``("policy", "critic")`` (default), ``("critic",)``
            or any keys of the Dict (``"policy+critic"``-style strings are accepted).
        critic_keys: the older name of ``critic_input``.
        Other arguments are those of SB3's ``MultiInputActorCriticPolicy`` (``net_arch`` may be a list or
        ``dict(pi=[...], vf=[...])``); the features extractor is never shared.

    Example: see the module docstring.
    """

    def _build_mlp_extractor(self) -> None:
        # Runs first in _build(), before orthogonal init and the optimizer: both then see these modules.
        self.pi_features_extractor = KeysExtractor(self.observation_space, self.actor_keys)
        self.vf_features_extractor = KeysExtractor(self.observation_space, self.critic_input)
        self.features_extractor = self.pi_features_extractor
        arch = self.net_arch if isinstance(self.net_arch, dict) else dict(pi=self.net_arch, vf=self.net_arch)
        self.mlp_extractor = _TwoInputMlp(
            self.pi_features_extractor.features_dim,
            self.vf_features_extractor.features_dim,
            arch,
            self.activation_fn,
            self.device,
        )


class _AsymmetricQPolicy(_ActorCriticKeys):
    """The actor/Q-network split shared by :class:`AsymmetricSACPolicy` and :class:`AsymmetricTD3Policy`:
    each network gets its own :class:`KeysExtractor` (a mixin placed before SB3's policy class)."""

    def make_actor(self, features_extractor: BaseFeaturesExtractor | None = None) -> Any:
        return super().make_actor(KeysExtractor(self.observation_space, self.actor_keys))

    def make_critic(self, features_extractor: BaseFeaturesExtractor | None = None) -> Any:
        return super().make_critic(KeysExtractor(self.observation_space, self.critic_input))


class AsymmetricSACPolicy(_AsymmetricQPolicy, SACPolicy):
    """SAC policy whose actor reads ``actor_keys`` and whose Q-networks read ``critic_input``.

    The actor and the critics (and the critic targets) each own a :class:`KeysExtractor` (nothing is
    shared). SAC's replay buffer is a ``DictReplayBuffer`` that stores every key, and ``SB3VecEnv``'s
    terminal observations carry ``"critic"``, so a time-out's target Q reads the terminal critic input.

    Args:
        actor_keys: observation keys the actor reads (default ``("policy",)``).
        critic_input: observation keys the Q-networks read (default ``("policy", "critic")``).
        critic_keys: the older name of ``critic_input``.
        Other arguments are those of SB3's ``SACPolicy`` (``share_features_extractor`` is always False).

    Example:
        >>> import sensorgym as sg
        >>> from stable_baselines3 import SAC
        >>> from sensorgym.wrappers import make_sensor_vec
        >>> from sensorgym.integrations.sb3 import AsymmetricSACPolicy, SB3VecEnv
        >>> env = SB3VecEnv(make_sensor_vec("Pendulum-v1", 2, {
        ...     "angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.02, delay=0.05)},
        ...     autoreset_mode="SameStep", seed=0))
        >>> model = SAC(AsymmetricSACPolicy, env, learning_starts=16, batch_size=16, seed=0)
        >>> _ = model.learn(32)
        >>> model.actor.features_dim, model.critic.features_extractor.features_dim
        (2, 7)
    """


class AsymmetricTD3Policy(_AsymmetricQPolicy, TD3Policy):
    """TD3 policy whose actor (and its target) reads ``actor_keys`` and whose Q-networks read
    ``critic_input``; see :class:`AsymmetricSACPolicy` (same arguments, ``TD3Policy``'s otherwise).

    Example:
        >>> import sensorgym as sg
        >>> from stable_baselines3 import TD3
        >>> from sensorgym.wrappers import make_sensor_vec
        >>> from sensorgym.integrations.sb3 import AsymmetricTD3Policy, SB3VecEnv
        >>> env = SB3VecEnv(make_sensor_vec("Pendulum-v1", 2, {
        ...     "angle": sg.StateSensorOptions(key="obs", index=[0, 1], noise=0.02)},
        ...     autoreset_mode="SameStep", seed=0))
        >>> model = TD3(AsymmetricTD3Policy, env, learning_starts=16, batch_size=16, seed=0)
        >>> _ = model.learn(32)
        >>> model.actor.features_extractor.features_dim, model.critic.features_extractor.features_dim
        (2, 7)
    """


class SensorCheckpointCallback(BaseCallback):
    """Save a resumable checkpoint beside the model every ``save_freq`` timesteps and at the end.

    A checkpoint (:func:`~sensorgym.integrations.sb3_checkpoint.save_checkpoint`) holds the model, the
    ``VecNormalize`` statistics, the sensor wrapper's full state with a snapshot of the envs
    (mid-episode), and the torch/numpy/Python random states. It is written at the start of a rollout
    (after the previous update), the one point where resuming gives exactly the run that was interrupted:
    :func:`sensorgym.integrations.sb3_checkpoint.load_checkpoint` onto a freshly built env, then
    ``model.learn(remaining, reset_num_timesteps=False)``. ``sensors.pt`` and ``state.pt`` hold only
    tensors and plain data (loaded with ``weights_only=True``); ``model.zip``, ``vecnormalize.pkl``,
    ``replay_buffer.pkl`` and ``envs.pkl`` are pickle-based: only load checkpoints you trust.

    Example:
        >>> import gymnasium as gym, sensorgym as sg, tempfile
        >>> from stable_baselines3 import PPO
        >>> from sensorgym.wrappers import make_sensor_vec
        >>> from sensorgym.integrations.sb3 import AsymmetricActorCriticPolicy, SB3VecEnv
        >>> from sensorgym.integrations.sb3 import SensorCheckpointCallback
        >>> envs = SB3VecEnv(make_sensor_vec("Pendulum-v1", 2, {
        ...     "angle": sg.StateSensorOptions(key="obs", index=[0, 1], delay=0.05)},
        ...     autoreset_mode="SameStep", seed=0))
        >>> model = PPO(AsymmetricActorCriticPolicy, envs, n_steps=32, batch_size=32, seed=0)
        >>> folder = tempfile.mkdtemp()
        >>> _ = model.learn(128, callback=SensorCheckpointCallback(folder, save_freq=64))
        >>> from pathlib import Path; sorted(p.name for p in Path(folder).iterdir())
        ['envs.pkl', 'model.zip', 'sensors.pt', 'state.pt']
    """

    def __init__(self, save_path: str, save_freq: int, verbose: int = 0) -> None:
        super().__init__(verbose)
        if save_freq < 1:
            raise ValueError(f"SensorCheckpointCallback(save_freq={save_freq}): expected >= 1 timesteps.")
        self.save_path, self.save_freq = save_path, int(save_freq)
        self._next = 0

    def _init_callback(self) -> None:
        self._next = (self.num_timesteps // self.save_freq + 1) * self.save_freq

    def _save(self) -> None:
        save_checkpoint(self.save_path, self.model, self.training_env)
        if self.verbose:
            print(f"checkpoint at {self.num_timesteps} timesteps -> {self.save_path}")

    def _on_rollout_start(self) -> None:
        if self.num_timesteps >= self._next:
            self._save()
            self._next = (self.num_timesteps // self.save_freq + 1) * self.save_freq

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self._save()
