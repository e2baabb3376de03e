"""Where the manager's random numbers come from.

``BatchRandom`` (the default) draws every random tensor of a step with one seeded ``torch.Generator``:
fastest, and "same seed, same calls, same numbers". ``PerEnvRandom`` gives env ``b`` its own generator
seeded with ``seed + b`` (Gymnasium's convention for sub-env seeds) and draws row by row, only for the envs
a call touches: the numbers an env sees then do not depend on the batch it runs in, so a batched run
equals ``B`` single-env runs exactly. It loops over envs on the host: use it for reproducibility and
reference tests, not for speed.

Example:
    >>> import torch
    >>> from sensorgym.core.rng import PerEnvRandom
    >>> a, b = PerEnvRandom(3, "cpu", seed=10), PerEnvRandom(1, "cpu", seed=12)
    >>> x, y = torch.empty(3, 4), torch.empty(1, 4)
    >>> _ = a.normal_(x, None, 0); _ = b.normal_(y, None, 0)
    >>> torch.equal(x[2], y[0])   # env 2 of the batch == a single env seeded with 10 + 2
    True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .randomization import Distribution

__all__ = ["BatchRandom", "PerEnvRandom", "RandomSource"]


class RandomSource:
    """Interface: fill ``out`` in place; ``rows`` (a (B,) bool mask or None for all) says which envs the
    call is for and ``row_dim`` which axis of ``out`` indexes envs."""

    generator: torch.Generator  # for custom hooks (``md.random.generator``)
    #: ``fill_normal(out)``: standard normals into every row of ``out`` as one C call, where the source
    #: draws every row alike (one generator); None: call :meth:`normal_` with the rows
    fill_normal: Any = None

    def seed(self, seed: int | Sequence[int] | None) -> None:
        raise NotImplementedError

    def normal_(self, out: torch.Tensor, rows: torch.Tensor | None, row_dim: int) -> torch.Tensor:
        raise NotImplementedError

    def uniform_(self, out: torch.Tensor, rows: torch.Tensor | None, row_dim: int) -> torch.Tensor:
        raise NotImplementedError

    def sample_(
        self, dist: Distribution, out: torch.Tensor, rows: torch.Tensor | None, row_dim: int
    ) -> torch.Tensor:
        raise NotImplementedError

    def get_state(self) -> Any:
        raise NotImplementedError

    def set_state(self, state: Any) -> None:
        raise NotImplementedError


class BatchRandom(RandomSource):
    """One generator for everything; ``rows`` is ignored (every row is drawn, unused rows discarded)."""

    def __init__(self, device: torch.device | str, seed: int | None = None) -> None:
        self.generator = torch.Generator(device=device)
        #: ``fill_normal(out)``: :meth:`normal_` of every row, as the bound C method (what a step calls)
        self.fill_normal = functools.partial(torch.Tensor.normal_, generator=self.generator)
        self.seed(seed)

    def seed(self, seed: int | Sequence[int] | None) -> None:
        """``seed``: an int, None (OS entropy), or one seed per env (one generator takes the first)."""
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed if isinstance(seed, (int, np.integer)) else seed[0]))

    def normal_(self, out, rows, row_dim):
        return out.normal_(generator=self.generator)

    def uniform_(self, out, rows, row_dim):
        return out.uniform_(generator=self.generator)

    def sample_(self, dist, out, rows, row_dim):
        return dist.sample_(out, self.generator)

    def get_state(self) -> Any:
        return self.generator.get_state()

    def set_state(self, state: Any) -> None:
        self.generator.set_state(state)


class PerEnvRandom(RandomSource):
    """One generator per env (env ``b`` seeded with ``seed + b``); draws only the rows a call is for."""

    def __init__(self, num_envs: int, device: torch.device | str, seed: int | None = None) -> None:
        self.generators = [torch.Generator(device=device) for _ in range(num_envs)]
        self.generator = torch.Generator(device=device)
        self._buffers: dict[tuple, torch.Tensor] = {}
        self.seed(seed)

    def seed(self, seed: int | Sequence[int] | None) -> None:
        """``seed``: env ``b`` gets ``seed + b``; a sequence gives env ``b`` its own ``seed[b]`` (as Gymnasium
        seeds sub-env ``b`` with ``seed[b]`` in ``reset(seed=[...])``); None draws a base from OS entropy."""
        if seed is not None and not isinstance(seed, (int, np.integer)):
            seeds = [int(s) for s in seed]
            if len(seeds) != len(self.generators):
                raise ValueError(
                    f"seed: {len(seeds)} seeds for {len(self.generators)} envs. Fix: one seed per env, or "
                    "one int (env b then gets seed + b)."
                )
        else:
            base = int(torch.randint(0, 2**62, (1,)).item()) if seed is None else int(seed)
            seeds = [base + b for b in range(len(self.generators))]
        self.generator.manual_seed(seeds[0])
        for g, s in zip(self.generators, seeds, strict=True):
            g.manual_seed(s)

    def _rows(self, rows: torch.Tensor | None) -> list[int]:
        if rows is None:
            return list(range(len(self.generators)))
        return torch.nonzero(rows).flatten().tolist()

    def _scratch(self, row: torch.Tensor) -> torch.Tensor:
        # Draw into a contiguous buffer, then copy: torch's CPU normal_ uses a different (vectorized)
        # kernel for contiguous tensors of 16+ elements, so drawing straight into a row view would give
        # env b different numbers in a batch (strided row) than alone (contiguous row).
        key = (tuple(row.shape), row.dtype)
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = torch.empty(row.shape, dtype=row.dtype, device=row.device)
        return buf

    def normal_(self, out, rows, row_dim):
        for b in self._rows(rows):
            row = out.select(row_dim, b)
            row.copy_(self._scratch(row).normal_(generator=self.generators[b]))
        return out

    def uniform_(self, out, rows, row_dim):
        for b in self._rows(rows):
            row = out.select(row_dim, b)
            row.copy_(self._scratch(row).uniform_(generator=self.generators[b]))
        return out

    def sample_(self, dist, out, rows, row_dim):
        for b in self._rows(rows):
            row = out.select(row_dim, b)
            buf = self._scratch(row)
            dist.sample_(buf, self.generators[b])
            row.copy_(buf)
        return out

    def get_state(self) -> Any:
        return {"batch": self.generator.get_state(), "envs": [g.get_state() for g in self.generators]}

    def set_state(self, state: Any) -> None:
        self.generator.set_state(state["batch"])
        for g, s in zip(self.generators, state["envs"], strict=True):
            g.set_state(s)
