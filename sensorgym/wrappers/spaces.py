"""Observations of every Gymnasium space as state entries and as flat critic columns.

Two views of an env's observation batch, both decided once from the env's ``single_observation_space``:

* **state entries** (what sensors read): a Box observation is ``"obs"``; each leaf of a Dict or Tuple
  observation is ``"obs.<key>"`` / ``"obs.<index>"``, nested as ``"obs.<key>.<key>"``. Values stay raw
  (a Discrete observation is its integer).
* **flat columns** (the env part of ``"critic"``): exactly ``gymnasium.spaces.flatten`` of each env's
  observation, row by row: Box values as they are, Discrete and MultiDiscrete one-hot, MultiBinary as
  0/1, Tuple and Dict concatenated in the space's order (a Dict space sorts its keys).
  :class:`Flattener` writes them into a ``(B, flatdim)`` numpy array or torch tensor.

Example:
    >>> import numpy as np, gymnasium as gym
    >>> from sensorgym.wrappers.spaces import Flattener
    >>> space = gym.spaces.Dict({"b": gym.spaces.Discrete(3), "a": gym.spaces.Box(-1, 1, (2,))})
    >>> obs = {"b": np.array([2, 0]), "a": np.array([[0.5, -0.5], [1.0, 0.0]], np.float32)}
    >>> out = np.empty((2, 5), np.float32)
    >>> Flattener(space)(obs, out).tolist()   # "a" first (sorted keys), then "b" one-hot
    [[0.5, -0.5, 0.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0, 0.0]]
    >>> out[0].tolist() == gym.spaces.flatten(space, {"b": 2, "a": obs["a"][0]}).tolist()
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch

__all__ = [
    "Flattener",
    "entry_bounds",
    "flat_bounds",
    "leaf_paths",
    "space_at",
    "state_entries",
    "template_entries",
    "with_rows",
]

Path = tuple  # keys (Dict) and indices (Tuple) from the observation to one leaf

_LEAVES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def _unsupported(space: gym.Space, where: str) -> TypeError:
    return TypeError(
        f"observation space {where or 'of the env'}: {type(space).__name__} has no fixed-size numeric "
        "form. sensorgym reads Box, Discrete, MultiDiscrete, MultiBinary, and Tuple/Dict of them. Fix: "
        "pass critic_env_obs=False and read what you need through sensors on info entries, or wrap the "
        "env with an observation wrapper that returns one of those spaces."
    )


def leaf_paths(space: gym.Space, prefix: Path = (), skip: bool = False) -> list[tuple[Path, gym.Space]]:
    """``(path, leaf space)`` of every leaf, in ``gymnasium.spaces.flatten`` order; a leaf of a space
    with no fixed-size numeric form raises a ``TypeError`` naming the fix, or is left out (``skip``)."""
    if isinstance(space, gym.spaces.Dict):
        return [leaf for k, sub in space.spaces.items() for leaf in leaf_paths(sub, (*prefix, k), skip)]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for i, sub in enumerate(space.spaces) for leaf in leaf_paths(sub, (*prefix, i), skip)]
    if isinstance(space, _LEAVES):
        return [(prefix, space)]
    if skip:
        return []
    raise _unsupported(space, ".".join(map(str, prefix)))


def _key(path: Path) -> str:
    return ".".join(["obs", *map(str, path)])


def _get(obs: Any, path: Path) -> Any:
    for p in path:
        obs = obs[p]
    return obs


def state_entries(obs: Any, prefix: str = "obs") -> dict[str, Any]:
    """The state entries of a batched observation: ``{"obs": obs}`` for an array, one dotted key per leaf
    of a Dict/Tuple observation."""
    if isinstance(obs, Mapping):
        out: dict[str, Any] = {}
        for k, v in obs.items():
            out.update(state_entries(v, f"{prefix}.{k}"))
        return out
    if isinstance(obs, tuple):
        out = {}
        for i, v in enumerate(obs):
            out.update(state_entries(v, f"{prefix}.{i}"))
        return out
    return {prefix: obs}


def _copy_tree(obs: Any) -> Any:
    if isinstance(obs, Mapping):
        return {k: _copy_tree(v) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_copy_tree(v) for v in obs)
    return obs.clone() if torch.is_tensor(obs) else np.array(obs, copy=True)


def _set_row(batched: Any, i: int, single: Any) -> None:
    if isinstance(batched, Mapping):
        for k, v in batched.items():
            _set_row(v, i, single[k])
    elif isinstance(batched, tuple):
        for v, x in zip(batched, single, strict=True):
            _set_row(v, i, x)
    elif torch.is_tensor(batched):
        batched[i] = torch.as_tensor(np.asarray(single) if not torch.is_tensor(single) else single)
    else:
        batched[i] = single


def _where_rows(rows: np.ndarray, new: Any, old: Any) -> Any:
    if isinstance(old, Mapping):
        return {k: _where_rows(rows, new[k], v) for k, v in old.items()}
    if isinstance(old, tuple):
        return tuple(_where_rows(rows, n, o) for n, o in zip(new, old, strict=True))
    if torch.is_tensor(old):
        row_mask = torch.as_tensor(rows, device=old.device).view(-1, *([1] * (old.dim() - 1)))
        return torch.where(row_mask, torch.as_tensor(new, device=old.device), old)
    out = np.array(old, copy=True)
    out[rows] = np.asarray(new)[rows]
    return out


def with_rows(obs: Any, final: Any, rows: np.ndarray) -> Any:
    """A copy of the batched observation ``obs`` whose ``rows`` (bool ``(B,)``) come from ``final``:
    Gymnasium's object array of per-env observations (SAME_STEP ``final_obs``), or a batched observation
    of the same structure (natively batched envs)."""
    if isinstance(final, np.ndarray) and final.dtype == object:
        out = _copy_tree(obs)
        for i in np.flatnonzero(rows):
            _set_row(out, int(i), final[i])
        return out
    return _where_rows(rows, final, obs)


def space_at(key: str, space: gym.Space | None) -> gym.Space | None:
    """The space of the state entry ``key`` (``"obs"``, ``"obs.<key>.<index>"``...), or None."""
    if space is None or not (key == "obs" or key.startswith("obs.")):
        return None
    for part in key.split(".")[1:]:
        if isinstance(space, gym.spaces.Dict) and part in space.spaces:
            space = space.spaces[part]
        elif isinstance(space, gym.spaces.Tuple) and part.isdigit() and int(part) < len(space.spaces):
            space = space.spaces[int(part)]
        else:
            return None
    return space


def entry_bounds(space: gym.Space) -> tuple[np.ndarray, np.ndarray] | None:
    """Bounds of one env's raw entry, flat (a Discrete entry is its integer), or None if not a leaf."""
    if isinstance(space, gym.spaces.Box):
        return space.low.astype(np.float64).ravel(), space.high.astype(np.float64).ravel()
    if isinstance(space, gym.spaces.Discrete):
        return np.array([space.start], float), np.array([space.start + space.n - 1], float)
    if isinstance(space, gym.spaces.MultiDiscrete):
        start = space.start.astype(np.float64).ravel()
        return start, start + space.nvec.astype(np.float64).ravel() - 1
    if isinstance(space, gym.spaces.MultiBinary):
        n = math.prod(np.atleast_1d(space.n))
        return np.zeros(n), np.ones(n)
    return None


def flat_bounds(space: gym.Space) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``gymnasium.spaces.flatten(space, x)``: Box bounds; one-hot and binary columns in [0, 1]."""
    lows, highs = [], []
    for _, leaf in leaf_paths(space):
        if isinstance(leaf, gym.spaces.Box):
            lo, hi = entry_bounds(leaf)
        else:
            n = gym.spaces.flatdim(leaf)
            lo, hi = np.zeros(n), np.ones(n)
        lows.append(lo)
        highs.append(hi)
    if not lows:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(lows), np.concatenate(highs)


class Flattener:
    """Writes ``gymnasium.spaces.flatten`` of every env's observation into a ``(B, flatdim)`` array.

    The plan (one entry per leaf: its path, columns and kind) is made once from the space; a call runs it
    on numpy arrays or torch tensors alike, so both array types get the same numbers from one definition.

    Example: see the module docstring.
    """

    def __init__(self, space: gym.Space) -> None:
        self.space = space
        self.plan: list[tuple[Path, int, int, str, Any]] = []
        col = 0
        for path, leaf in leaf_paths(space):
            width = gym.spaces.flatdim(leaf)
            if isinstance(leaf, gym.spaces.Discrete):
                kind, extra = "onehot", (np.zeros(1, np.int64), np.array([leaf.start], np.int64))
            elif isinstance(leaf, gym.spaces.MultiDiscrete):
                nvec = leaf.nvec.astype(np.int64).ravel()
                offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]]).astype(np.int64)
                kind, extra = "onehot", (offsets, leaf.start.astype(np.int64).ravel())
            else:  # Box and MultiBinary: the values, flattened
                kind, extra = "values", None
            self.plan.append((path, col, width, kind, extra))
            col += width
        self.width = col
        self._torch_extra: dict[tuple[int, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}
        # one Box leaf (an array observation): a numpy batch goes into its columns in one assignment
        self._one_array = len(self.plan) == 1 and not self.plan[0][0] and self.plan[0][3] == "values"

    def __call__(self, obs: Any, out: Any) -> Any:
        """Fill ``out`` ``(B, flatdim)`` (numpy or torch) from a batched observation; returns ``out``."""
        num_envs = out.shape[0]
        if self._one_array and type(obs) is np.ndarray and type(out) is np.ndarray:  # runs every step
            out[:, : self.width] = obs.reshape(num_envs, -1)
            return out
        is_torch = torch.is_tensor(out)
        for i, (path, col, width, kind, extra) in enumerate(self.plan):
            leaf = _get(obs, path)
            block = out[:, col : col + width]
            if is_torch:
                values = leaf if torch.is_tensor(leaf) else torch.as_tensor(np.asarray(leaf))
                values = values.to(out.device).reshape(num_envs, -1)
                if kind == "values":
                    block.copy_(values)
                else:
                    offsets, starts = self._device_extra(i, extra, out.device)
                    block.zero_()
                    block.scatter_(1, (values.long() - starts) + offsets, 1.0)
            else:
                values = leaf.detach().cpu().numpy() if torch.is_tensor(leaf) else np.asarray(leaf)
                values = values.reshape(num_envs, -1)
                if kind == "values":
                    block[...] = values
                else:
                    offsets, starts = extra
                    block[...] = 0
                    block[np.arange(num_envs)[:, None], (values.astype(np.int64) - starts) + offsets] = 1
        return out

    def _device_extra(self, i: int, extra: Any, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        hit = self._torch_extra.get((i, device))
        if hit is None:
            hit = self._torch_extra[(i, device)] = tuple(torch.as_tensor(a, device=device) for a in extra)
        return hit


def template_entries(space: gym.Space, num_envs: int) -> dict[str, np.ndarray]:
    """Zeros shaped like the state entries of a batched observation of ``space`` (leaves sensors cannot
    read are left out)."""
    leaves = leaf_paths(space, skip=True)
    return {_key(path): np.zeros((num_envs, *(leaf.shape or ())), np.float32) for path, leaf in leaves}
