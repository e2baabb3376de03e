"""Shared plumbing of the RL-library adapters (SB3, rsl_rl, skrl, rl_games).

* :func:`resolve_critic_input`: the one critic-input option every adapter takes, ``critic_input``: the
  observation keys the critic reads, ``("policy", "critic")`` (default) or ``("critic",)``.
* :class:`SameStepStepper`: SB3, rsl_rl, skrl and rl_games expect the observation after a finished episode to
  be the reset observation of the next one (same-step autoreset). The stepper provides exactly that from a
  Gymnasium vector env in ``SAME_STEP`` mode (native) or ``DISABLED`` mode (it resets finished envs with
  ``reset_mask``), hands everything over as torch tensors on one device, and also returns the **terminal**
  observation of every finished env, which truncated episodes must be bootstrapped from.
* :class:`EpisodeClock`: the wrapped env's own per-env step counter and time limit (read and written),
  so a library's randomized episode starts really shorten the env's episodes.
* :class:`ActionAdapter`: the action space a library is shown and the translation of its batched action
  tensor into the vector env's batched action (one index per env for ``Discrete``, the space's ``start``
  added, a flat vector unflattened into a ``Dict``/``Tuple``), with a clear refusal of what the library
  cannot take.
* :func:`info_log`: the numeric entries of a step's info, per env that reported them, for a library's
  logger.

Example:
    >>> import gymnasium as gym, sensorgym as sg, torch
    >>> from sensorgym.wrappers import make_sensor_vec
    >>> from sensorgym.integrations.adapters import SameStepStepper
    >>> envs = make_sensor_vec("Pendulum-v1", 2, {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])},
    ...                        autoreset_mode="SameStep", seed=0)
    >>> stepper = SameStepStepper(envs, "example")
    >>> obs = stepper.reset(seed=0)
    >>> obs["policy"].dtype, obs["critic"].shape
    (torch.float32, torch.Size([2, 5]))
    >>> out = stepper.step(torch.zeros(2, 1))
    >>> torch.equal(out.terminal_obs["critic"], out.obs["critic"])  # nothing finished yet
    True
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv

from ..wrappers.common import sub_env_attr

__all__ = [
    "DEFAULT_CRITIC_INPUT",
    "ActionAdapter",
    "EpisodeClock",
    "SameStepStepper",
    "StepResult",
    "critic_space",
    "critic_tensor",
    "info_log",
    "resolve_critic_input",
    "to_numpy",
    "to_torch",
]

#: what every adapter's critic reads by default: the measured readings and the privileged part
DEFAULT_CRITIC_INPUT: tuple[str, ...] = ("policy", "critic")
_KEYS = ("policy", "critic")


def resolve_critic_input(critic_input: str | Sequence[str], who: str) -> tuple[str, ...]:
    """Validate a ``critic_input`` option: a key or an ordered sequence of keys of ``("policy", "critic")``.

    ``"critic"`` and ``"policy+critic"`` are accepted as short forms.
    """
    if isinstance(critic_input, str):
        critic_input = tuple(critic_input.split("+"))
    keys = tuple(critic_input)
    if not keys or any(k not in _KEYS for k in keys) or len(set(keys)) != len(keys):
        raise ValueError(
            f"{who}: critic_input={critic_input!r}: expected distinct keys of {_KEYS}. Fix: pass "
            "critic_input=('policy', 'critic') (the default: measured readings + privileged part) or "
            "critic_input=('critic',) (privileged part only)."
        )
    return keys


def critic_space(space: gym.spaces.Dict, critic_input: Sequence[str]) -> gym.spaces.Box:
    """The flat Box of ``critic_input``'s keys of a ``{"policy", "critic"}`` space, concatenated in order."""
    parts = [space[k] for k in critic_input]
    if len(parts) == 1:
        return parts[0]
    low = np.concatenate([np.broadcast_to(p.low, p.shape).reshape(-1) for p in parts])
    high = np.concatenate([np.broadcast_to(p.high, p.shape).reshape(-1) for p in parts])
    return gym.spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)


def critic_tensor(obs: Mapping[str, torch.Tensor], critic_input: Sequence[str]) -> torch.Tensor:
    """``critic_input``'s keys of a batched observation, flattened and concatenated (a new tensor only when
    there is more than one key)."""
    if len(critic_input) == 1:
        return obs[critic_input[0]]
    return torch.cat([obs[k].flatten(1) for k in critic_input], dim=1)


def to_torch(x: Any, device: torch.device, dtype: torch.dtype | None = None) -> Any:
    """Arrays (or mappings of them) as torch tensors on ``device``."""
    if isinstance(x, Mapping):
        return {k: to_torch(v, device, dtype) for k, v in x.items()}
    tensor = x if torch.is_tensor(x) else torch.as_tensor(np.asarray(x))
    return tensor.to(device=device, dtype=dtype) if dtype is not None else tensor.to(device)


def host_mask(mask: Any) -> np.ndarray:
    """A numpy bool copy of a mask that may be a torch tensor on any device (never handed to numpy)."""
    if torch.is_tensor(mask):
        return mask.detach().to("cpu").numpy().astype(bool)
    return np.array(mask, dtype=bool, copy=True)


class StepResult(NamedTuple):
    """One step of :class:`SameStepStepper`, all torch tensors on the stepper's device."""

    obs: Any  #: next observation (the reset observation for finished envs); a dict of tensors for sensor envs
    rewards: torch.Tensor  #: ``(B,)`` float32
    terminated: torch.Tensor  #: ``(B,)`` bool
    truncated: torch.Tensor  #: ``(B,)`` bool
    info: dict[str, Any]  #: the vector env's info of the step
    #: ``obs`` with finished envs' rows replaced by their terminal one (``obs`` itself when none finished)
    terminal_obs: Any
    #: DISABLED mode: the info of the ``reset(options={"reset_mask": ...})`` that restarted finished envs
    reset_info: dict[str, Any] | None = None


class SameStepStepper:
    """Drive a ``SAME_STEP`` or ``DISABLED`` vector env as a same-step autoreset env, in torch.

    The one definition of autoreset handling that every RL adapter (SB3, rsl_rl, skrl, rl_games) uses.

    Args:
        venv: a vector env whose observation is ``{"policy", "critic"}`` (e.g. a ``SensorObservation``).
        who: the adapter's name, for error messages.
        device: device of the returned tensors (default: the env's device, else CPU).
        sensor_dict: whether to require the ``{"policy", "critic"}`` observation; without it, any
            observation made of arrays (one, or a Dict of them) is stepped.

    Actions are handed to the env as given, except that torch actions become numpy for a numpy env. See
    the module docstring for an example.
    """

    def __init__(
        self,
        venv: VectorEnv,
        who: str,
        device: str | torch.device | None = None,
        *,
        sensor_dict: bool = True,
    ) -> None:
        mode = AutoresetMode(venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        if mode is AutoresetMode.NEXT_STEP:
            raise ValueError(
                f"{who}: the env resets in NEXT_STEP mode, which would feed the learner a fake transition "
                "into every reset observation. Fix: build it with autoreset_mode=AutoresetMode.SAME_STEP "
                "(or DISABLED)."
            )
        space = venv.single_observation_space
        if sensor_dict and (not isinstance(space, gym.spaces.Dict) or not set(_KEYS) <= set(space.spaces)):
            raise TypeError(
                f"{who}: the env's observation space must be a Dict with 'policy' and 'critic' keys, got "
                f"{space}. Fix: wrap the vector env with sensorgym.wrappers.SensorObservation first."
            )
        self.venv, self.mode, self.who = venv, mode, who
        if device is None:
            device = getattr(venv.unwrapped, "device", None) or "cpu"
        self.device = torch.device(device)
        self._numpy_actions = not hasattr(venv.unwrapped, "device")
        env_device = getattr(venv.unwrapped, "device", None)
        self._env_device = torch.device(env_device) if env_device is not None else None

    def reset(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        obs, _ = self.venv.reset(seed=seed)
        return to_torch(obs, self.device)

    def step(self, actions: Any) -> StepResult:
        """One step; finished envs' ``obs`` rows are the reset observation of their next episode, their
        ``terminal_obs`` rows the last observation of the episode that finished."""
        # torch actions (or a dict/tuple of them) as numpy for a numpy env, on its device for a torch env
        actions = to_numpy(actions) if self._numpy_actions else _to_device(actions, self._env_device)
        obs, rewards, terminated, truncated, info = self.venv.step(actions)
        term = to_torch(terminated, self.device, torch.bool)
        trunc = to_torch(truncated, self.device, torch.bool)
        rewards = to_torch(rewards, self.device, torch.float32)
        done = host_mask(term | trunc)
        if not done.any():
            obs = to_torch(obs, self.device)
            return StepResult(obs, rewards, term, trunc, info, obs)
        if self.mode is AutoresetMode.DISABLED:
            terminal = to_torch(obs, self.device)
            obs, reset_info = self.venv.reset(options={"reset_mask": done.copy()})
            return StepResult(to_torch(obs, self.device), rewards, term, trunc, info, terminal, reset_info)
        obs = to_torch(obs, self.device)
        return StepResult(obs, rewards, term, trunc, info, self._terminal(obs, info, done))

    def _terminal(self, obs: Any, info: Mapping, done: np.ndarray) -> Any:
        """``obs`` with the rows of envs that finished replaced by ``info["final_obs"]`` (SAME_STEP)."""
        final = info.get("final_obs")
        if final is None:
            raise RuntimeError(
                f"{self.who}: a SAME_STEP env finished an episode without info['final_obs']; the terminal "
                "observation is lost. Fix: return it (gymnasium's Sync/Async vector envs do)."
            )
        rows = host_mask(info.get("_final_obs", done)) & done
        if isinstance(obs, Mapping):
            return {k: self._terminal_rows(v, final, rows, k) for k, v in obs.items()}
        return self._terminal_rows(obs, final, rows, None)

    def _terminal_rows(
        self, batch: torch.Tensor, final: Any, rows: np.ndarray, key: str | None
    ) -> torch.Tensor:
        """One observation array: ``batch`` with ``final``'s rows where ``rows`` (``final`` is Gymnasium's
        object array of per-env observations, or a natively batched env's batched observation)."""
        if isinstance(final, np.ndarray) and final.dtype == object:  # Sync/Async: one observation per env
            out = batch.clone()
            for i in np.flatnonzero(rows):
                value = final[i] if key is None else final[i][key]
                out[i] = torch.as_tensor(np.asarray(value), device=self.device)
            return out
        value = to_torch(final if key is None else final[key], self.device, batch.dtype)
        mask = torch.as_tensor(rows, device=self.device).view(-1, *([1] * (batch.dim() - 1)))
        return torch.where(mask, value, batch)


# -- the env's own episode clock -----------------------------------------------------------------------
class EpisodeClock:
    """The wrapped env's per-env episode step counter and time limit, read and written in place.

    Found, in this order: a natively batched env's ``episode_length_buf`` / ``max_episode_length`` (Isaac
    Lab's names) or ``steps`` / ``max_episode_steps`` (sensorgym's batched envs); the ``TimeLimit`` wrappers
    of Sync/Async sub-envs (``_elapsed_steps`` / ``_max_episode_steps``). ``found`` is False when the env
    has none (then the counter is a local one that the env does not read).

    Example:
        >>> import gymnasium as gym, torch
        >>> from sensorgym.integrations.adapters import EpisodeClock
        >>> envs = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
        >>> _ = envs.reset(seed=0)
        >>> clock = EpisodeClock(envs)
        >>> clock.max_episode_length, clock.found
        (200, True)
        >>> clock.set(torch.tensor([150, 3]))
        >>> envs.get_attr("_elapsed_steps")
        (150, 3)
    """

    _NATIVE = (("episode_length_buf", "max_episode_length"), ("steps", "max_episode_steps"))

    def __init__(self, venv: VectorEnv, max_episode_length: int | None = None) -> None:
        self.venv, self.num_envs = venv, venv.num_envs
        self._base = venv.unwrapped
        self._native: str | None = None
        self._timelimit = False
        limit: int | None = None
        for counter, limit_attr in self._NATIVE:
            value = getattr(self._base, counter, None)
            if value is not None and np.shape(value) == (self.num_envs,):
                self._native = counter
                limit = getattr(self._base, limit_attr, None)
                break
        if self._native is None and hasattr(self._base, "get_attr"):
            with contextlib.suppress(Exception):
                limits = set(sub_env_attr(self._base, "_max_episode_steps"))
                if len(limits) == 1 and None not in limits:
                    limit = int(limits.pop())
                    self._timelimit = True
        spec_limit = getattr(getattr(venv, "spec", None), "max_episode_steps", None)
        limit = limit if limit is not None else spec_limit
        if max_episode_length is not None and limit is not None and int(max_episode_length) != int(limit):
            raise ValueError(
                f"max_episode_length={max_episode_length}, but the env truncates its episodes after {limit} "
                "steps; time-outs would be reported at the wrong step. Fix: leave max_episode_length unset "
                "(it is read from the env), or change the env's own time limit."
            )
        if max_episode_length is not None:
            limit = int(max_episode_length)
        self.max_episode_length = int(limit) if limit is not None else None
        self._local = torch.zeros(self.num_envs, dtype=torch.long)

    @property
    def found(self) -> bool:
        """Whether the env's own counter is read and written (else a local counter)."""
        return self._native is not None or self._timelimit

    def get(self) -> torch.Tensor:
        """The per-env episode step counters, ``(B,)`` long."""
        if self._native is not None:
            value = getattr(self._base, self._native)
            return (value if torch.is_tensor(value) else torch.as_tensor(np.asarray(value))).long().clone()
        if self._timelimit:
            return torch.as_tensor([int(s or 0) for s in self._base.get_attr("_elapsed_steps")])
        return self._local.clone()

    def set(self, values: torch.Tensor) -> None:
        """Write the counters into the env: an env whose counter reaches the limit truncates."""
        values = torch.as_tensor(values).reshape(self.num_envs)
        if self._native is not None:
            current = getattr(self._base, self._native)
            if torch.is_tensor(current):
                setattr(self._base, self._native, values.to(device=current.device, dtype=current.dtype))
            else:
                setattr(self._base, self._native, values.cpu().numpy().astype(np.asarray(current).dtype))
        elif self._timelimit:
            self._base.set_attr("_elapsed_steps", [int(v) for v in values.cpu()])
        else:
            warnings.warn(
                "the env exposes no episode step counter (no TimeLimit in its sub-envs, no "
                "episode_length_buf/steps on a batched env): setting episode lengths (e.g. rsl_rl's "
                "init_at_random_ep_len) does not change its episodes.",
                stacklevel=3,
            )
            self._local = values.long().cpu().clone()

    def advance(self, dones: torch.Tensor) -> None:
        """Keep the local counter (used only when the env has none) in step with the env."""
        if not self.found:
            done = dones.detach().cpu().bool()
            self._local = torch.where(done, torch.zeros_like(self._local), self._local + 1)


# -- actions ---------------------------------------------------------------------------------------------
_DISCRETE = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def _torch_dtype(dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype


def _leaves(space: gym.Space) -> list[gym.Space]:
    """The non-composite spaces of ``space`` in its own order (a Dict's ``spaces`` order, a Tuple's index)."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in _leaves(sub)]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in _leaves(sub)]
    return [space]


def _components(leaf: gym.Space) -> list[int]:
    """The number of choices of each discrete component of a discrete leaf, in row-major order."""
    if isinstance(leaf, gym.spaces.Discrete):
        return [int(leaf.n)]
    if isinstance(leaf, gym.spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(leaf.nvec).reshape(-1)]
    return [2] * int(np.prod(leaf.shape))  # MultiBinary


class ActionAdapter:
    """The action space a library is shown, and its batched actions turned into the vector env's.

    RL libraries sample from a handful of action distributions over a flat action vector; a Gymnasium vector
    env takes its own batched action: ``(B,)`` indices for ``Discrete``, ``(B, *nvec.shape)`` for
    ``MultiDiscrete``, a dict of batched arrays for a ``Dict``. This class keeps the two apart:

    * a ``Box`` is shown as it is (``flat_box``: as a 1-D Box, for libraries that read ``shape[0]``);
    * ``Discrete(n, start)`` as ``Discrete(n)``: libraries sample ``0..n-1``, the adapter adds ``start``;
    * several discrete components (``MultiDiscrete`` of any shape, ``MultiBinary``, a ``Dict``/``Tuple`` of
      discrete spaces) as one ``MultiDiscrete`` of their sizes (``discrete="MultiDiscrete"``: SB3, skrl) or a
      ``Tuple`` of ``Discrete`` (``discrete="Tuple"``: rl_games' multi-discrete form), starts added back;
      ``keep_multibinary`` shows a lone ``MultiBinary`` as it is (SB3 samples it natively);
    * a ``Dict``/``Tuple`` of ``Box`` spaces as one flat ``Box``, leaves in the space's own order.

    Refused at construction, with a ``ValueError`` naming the space and the fix: a library that has no
    discrete policy (``discrete=None``), a space that mixes ``Box`` and discrete components (every library
    samples one kind per policy), and spaces that are no actions (``Text``, ``Graph``, ...).

    Example:
        >>> import gymnasium as gym, torch
        >>> from sensorgym.integrations.adapters import ActionAdapter
        >>> adapter = ActionAdapter(gym.spaces.Discrete(3, start=-1), "example", "a library")
        >>> adapter.space, adapter.width
        (Discrete(3), 1)
        >>> adapter.to_env(torch.tensor([[0], [2]]), 2)  # one index per env, start added
        tensor([-1,  1])
    """

    def __init__(
        self,
        space: gym.Space,
        who: str,
        library: str,
        *,
        discrete: str | None = "MultiDiscrete",
        flat_box: bool = False,
        keep_multibinary: bool = False,
        refusal_fix: str = "",
    ) -> None:
        if discrete not in (None, "MultiDiscrete", "Tuple"):
            raise ValueError(
                f"{who}: discrete={discrete!r}: expected None, 'MultiDiscrete' or 'Tuple'. Fix: pass how "
                "the library takes several discrete components (None when it takes none)."
            )
        self.env_space, self.who, self.library = space, who, library
        leaves = _leaves(space)
        unknown = [leaf for leaf in leaves if not isinstance(leaf, (gym.spaces.Box, *_DISCRETE))]
        if unknown:
            raise ValueError(
                f"{who}: the action space {space} contains {unknown[0]}, which is not an action a policy can "
                "sample. Fix: give the env a Box, Discrete, MultiDiscrete or MultiBinary action space (or a "
                "Dict/Tuple of them)."
            )
        boxes = [leaf for leaf in leaves if isinstance(leaf, gym.spaces.Box)]
        if boxes and len(boxes) != len(leaves):
            raise ValueError(
                f"{who}: the action space {space} mixes continuous (Box) and discrete components; {library} "
                "samples one kind of action per policy. Fix: make every component a Box (and threshold it "
                "in the env) or every component discrete."
            )
        self.discrete = not boxes
        if self.discrete and discrete is None:
            raise ValueError(
                f"{who}: the action space {space} is discrete, and {library} has no discrete action "
                f"distribution. Fix: {refusal_fix or 'give the env a Box action space'}."
            )
        if self.discrete:
            sizes = [n for leaf in leaves for n in _components(leaf)]
            self.width = len(sizes)
            if isinstance(space, gym.spaces.Discrete):
                self.space: gym.Space = gym.spaces.Discrete(int(space.n))
            elif keep_multibinary and isinstance(space, gym.spaces.MultiBinary):
                self.space = space
            elif discrete == "Tuple":
                self.space = gym.spaces.Tuple([gym.spaces.Discrete(n) for n in sizes])
            else:
                self.space = gym.spaces.MultiDiscrete(np.asarray(sizes, dtype=np.int64))
        else:
            self.width = int(sum(int(np.prod(b.shape)) for b in boxes))
            if isinstance(space, gym.spaces.Box) and (len(space.shape) <= 1 or not flat_box):
                self.space = space
            else:
                low = np.concatenate([np.broadcast_to(b.low, b.shape).reshape(-1) for b in boxes])
                high = np.concatenate([np.broadcast_to(b.high, b.shape).reshape(-1) for b in boxes])
                self.space = gym.spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
        #: a Box shown as it is: the library's actions only get the env's batch shape
        self.identity = self.space is space and isinstance(space, gym.spaces.Box)
        self._starts: dict[torch.device, list[tuple[int, torch.Tensor | None]]] = {}

    def to_env(self, actions: Any, num_envs: int, device: torch.device | None = None) -> Any:
        """The env's batched action for the library's ``actions`` (any shape with ``width`` values per env:
        ``(B, width)``, ``(B,)``, or squeezed further); torch tensors on ``device`` (default: the
        actions')."""
        if self.identity and not torch.is_tensor(actions):  # a numpy Box batch (SB3): only its shape changes
            array = np.asarray(actions)
            if array.size == num_envs * self.width:
                return array.reshape(num_envs, *self.env_space.shape)
        tensor = actions if torch.is_tensor(actions) else torch.as_tensor(np.asarray(actions))
        if device is not None:
            tensor = tensor.to(device)
        if tensor.numel() != num_envs * self.width:
            kind = "a categorical policy" if self.discrete else f"a policy with {self.width} outputs"
            raise ValueError(
                f"{self.who}: got actions of shape {tuple(tensor.shape)} for {num_envs} envs, but the action "
                f"space {self.env_space}, shown to {self.library} as {self.space}, takes {self.width} "
                f"value(s) per env. Fix: build the policy from the env's action_space ({kind})."
            )
        if self.identity:
            return tensor.reshape(num_envs, *self.env_space.shape)
        flat = tensor.reshape(num_envs, self.width)
        if self.discrete:
            flat = flat.long()
        value, _ = self._assemble(self.env_space, flat, iter(self._columns(flat.device)))
        return value

    def _columns(self, device: torch.device) -> list[tuple[int, torch.Tensor | None]]:
        """Per leaf (in order): its first column in the flat action and its ``start`` (None when 0)."""
        columns = self._starts.get(device)
        if columns is None:
            columns, col = [], 0
            for leaf in _leaves(self.env_space):
                start = getattr(leaf, "start", None)
                nonzero = start is not None and bool(np.any(np.asarray(start) != 0))
                columns.append((col, torch.as_tensor(np.asarray(start), device=device) if nonzero else None))
                col += len(_components(leaf)) if isinstance(leaf, _DISCRETE) else int(np.prod(leaf.shape))
            self._starts[device] = columns
        return columns

    def _assemble(self, space: gym.Space, flat: torch.Tensor, columns: Any) -> tuple[Any, Any]:
        """``space``'s batched value, its leaves read from ``flat`` at the next entries of ``columns``."""
        if isinstance(space, gym.spaces.Dict):
            return {key: self._assemble(sub, flat, columns)[0] for key, sub in space.spaces.items()}, columns
        if isinstance(space, gym.spaces.Tuple):
            return tuple(self._assemble(sub, flat, columns)[0] for sub in space.spaces), columns
        col, start = next(columns)
        if isinstance(space, gym.spaces.Discrete):
            value = flat[:, col]
        else:
            shape = (
                np.asarray(space.nvec).shape if isinstance(space, gym.spaces.MultiDiscrete) else space.shape
            )
            value = flat[:, col : col + int(np.prod(shape))].reshape(flat.shape[0], *shape)
        if start is not None:
            value = value + start
        return value.to(_torch_dtype(space.dtype)), columns


def _to_device(x: Any, device: torch.device | None) -> Any:
    """Torch tensors (or dicts/tuples of them) on ``device``; anything else unchanged."""
    if device is None:
        return x
    if torch.is_tensor(x):
        return x.to(device)
    if isinstance(x, Mapping):
        return {k: _to_device(v, device) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(_to_device(v, device) for v in x)
    return x


def to_numpy(x: Any) -> Any:
    """Torch tensors (or dicts/tuples of them) as numpy arrays; anything else unchanged."""
    if torch.is_tensor(x):
        return x.detach().cpu().numpy()
    if isinstance(x, Mapping):
        return {k: to_numpy(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(to_numpy(v) for v in x)
    return x


# -- the env's own info, for a library's logger ------------------------------------------------------------
#: info entries that are the wrapper's plumbing, not the env's measurements
_PLUMBING = frozenset({"final_obs", "final_info", "sensorgym", "sensorgym_layout"})


def _numeric_rows(info: Mapping, rows: np.ndarray, prefix: str, out: dict[str, list[torch.Tensor]]) -> None:
    """Append the values of ``info``'s numeric entries in the rows of ``rows`` that reported them (on the
    entries' own device: no copy to the host)."""
    for key, value in info.items():
        if not isinstance(key, str) or key.startswith("_") or key in _PLUMBING:
            continue
        mask = info.get("_" + key)
        reported = rows & host_mask(mask) if mask is not None and np.shape(mask) == rows.shape else rows
        name = prefix + key
        if isinstance(value, Mapping):
            _numeric_rows(value, reported, name + "/", out)
            continue
        if torch.is_tensor(value):
            tensor = value.detach()
        elif isinstance(value, (bool, int, float, np.number, np.ndarray)):
            array = np.asarray(value)
            if array.dtype.kind not in "biuf":
                continue
            tensor = torch.as_tensor(array)
        else:
            continue
        if tensor.dim() == 0:  # one value for the whole batch
            if rows.any():
                out.setdefault(name, []).append(tensor.reshape(1).float())
            continue
        if tensor.shape[0] != rows.shape[0] or not reported.any():
            continue
        selected = tensor[torch.as_tensor(reported, device=tensor.device)]
        out.setdefault(name, []).append(selected.reshape(-1).float())


def info_log(info: Mapping, num_envs: int, finished: Any = None) -> dict[str, torch.Tensor]:
    """The numeric entries of a vector env's step ``info``: ``{key: 1-D float tensor}`` of the values of the
    envs that reported them (Gymnasium's ``"_key"`` masks; an entry without one is a ``(num_envs, ...)``
    batch, or one value for all), nested keys joined with ``/``.

    ``finished`` (a ``(B,)`` mask, SAME_STEP mode): those envs report the info of their terminal step,
    ``info["final_info"]``, not the reset info that ``info`` holds for them. The wrapper's plumbing
    (``final_obs``, the ``sensorgym`` state) and non-numeric entries are left out.

    Example:
        >>> import numpy as np
        >>> from sensorgym.integrations.adapters import info_log
        >>> info_log({"energy": np.array([1.0, 2.0, 3.0]), "_energy": np.array([True, False, True])}, 3)
        {'energy': tensor([1., 3.])}
    """
    out: dict[str, list[torch.Tensor]] = {}
    done = host_mask(finished) if finished is not None else None
    rows = np.ones(num_envs, dtype=bool)
    final = info.get("final_info")
    if done is not None and done.any() and isinstance(final, Mapping):
        _numeric_rows(info, rows & ~done, "", out)
        final_mask = info.get("_final_info")
        final_rows = done & host_mask(final_mask) if final_mask is not None else done
        _numeric_rows(final, final_rows, "", out)
    else:
        _numeric_rows(info, rows, "", out)
    return {k: torch.cat(v) for k, v in out.items()}
