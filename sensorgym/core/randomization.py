"""Distributions for per-episode, per-env domain randomization of sensor options.

Any of ``delay``, ``jitter``, ``noise``, ``bias``, ``random_walk`` and ``resolution`` may be one of these
instead of a number. The manager samples it for an env at every reset of that env (delay and jitter once per
sensor, the others once per component) and holds the value for the whole episode.

Example:
    >>> import sensorgym as sg
    >>> opts = sg.StateSensorOptions(key="obs", noise=sg.LogUniform(0.01, 0.1), delay=sg.Choice([0.0, 0.02]))
    >>> sg.Uniform(0.0, 0.04).bounds
    (0.0, 0.04)
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .values import as_real

__all__ = ["Choice", "Distribution", "LogUniform", "Normal", "Uniform"]


def _finite(name: str, value: float, cls: str) -> float:
    number = as_real(value)
    if number is None or not math.isfinite(number):
        raise ValueError(f"{cls}({name}={value!r}): {name} must be a finite number.")
    return number


class Distribution(ABC):
    """Base class: a scalar distribution that can fill a tensor in place with i.i.d. samples."""

    @property
    @abstractmethod
    def bounds(self) -> tuple[float, float]:
        """``(smallest, largest)`` value the distribution can produce (either may be infinite)."""

    @abstractmethod
    def sample_(self, out: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Fill ``out`` in place with independent samples drawn from ``generator``; return ``out``."""


@dataclass(frozen=True)
class Uniform(Distribution):
    """Uniform on ``[low, high)``.

    Example:
        >>> import torch, sensorgym as sg
        >>> g = torch.Generator().manual_seed(0)
        >>> x = sg.Uniform(1.0, 2.0).sample_(torch.empty(1000), g)
        >>> bool(((x >= 1) & (x < 2)).all())
        True
    """

    low: float
    high: float

    def __post_init__(self) -> None:
        lo, hi = _finite("low", self.low, "Uniform"), _finite("high", self.high, "Uniform")
        if lo > hi:
            raise ValueError(f"Uniform(low={lo}, high={hi}): low must be <= high; swap the bounds.")
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low, self.high)

    def sample_(self, out: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        if self.low == self.high:
            return out.fill_(self.low)
        return out.uniform_(self.low, self.high, generator=generator)


@dataclass(frozen=True)
class LogUniform(Distribution):
    """Log-uniform on ``[low, high)``, ``0 < low <= high``: good for noise levels spanning decades.

    Example:
        >>> import torch, sensorgym as sg
        >>> g = torch.Generator().manual_seed(0)
        >>> x = sg.LogUniform(1e-3, 1e-1).sample_(torch.empty(1000, dtype=torch.float64), g)
        >>> bool(((x >= 1e-3) & (x <= 1e-1)).all())
        True
    """

    low: float
    high: float

    def __post_init__(self) -> None:
        lo, hi = _finite("low", self.low, "LogUniform"), _finite("high", self.high, "LogUniform")
        if not 0.0 < lo <= hi:
            raise ValueError(
                f"LogUniform(low={lo}, high={hi}): needs 0 < low <= high; use Uniform for ranges that "
                "include zero."
            )
        object.__setattr__(self, "low", lo)
        object.__setattr__(self, "high", hi)

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.low, self.high)

    def sample_(self, out: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        out.uniform_(math.log(self.low), math.log(self.high), generator=generator).exp_()
        # exp(log(x)) can land a rounding error outside the declared support.
        return out.clamp_(self.low, self.high)


@dataclass(frozen=True)
class Normal(Distribution):
    """Gaussian ``N(mean, std)``, optionally clipped to ``[low, high]``.

    Clip bounds are required where an option must stay non-negative or bounded (noise, delay, ...).

    Example:
        >>> import sensorgym as sg
        >>> sg.Normal(0.0, 0.1).bounds, sg.Normal(0.02, 0.01, low=0.0, high=0.05).bounds
        ((-inf, inf), (0.0, 0.05))
    """

    mean: float
    std: float
    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        mean, std = _finite("mean", self.mean, "Normal"), _finite("std", self.std, "Normal")
        if std < 0:
            raise ValueError(f"Normal(mean={mean}, std={std}): std must be >= 0.")
        lo = None if self.low is None else _finite("low", self.low, "Normal")
        hi = None if self.high is None else _finite("high", self.high, "Normal")
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"Normal(low={lo}, high={hi}): low must be <= high.")
        for k, v in (("mean", mean), ("std", std), ("low", lo), ("high", hi)):
            object.__setattr__(self, k, v)

    @property
    def bounds(self) -> tuple[float, float]:
        lo = -math.inf if self.low is None else self.low
        hi = math.inf if self.high is None else self.high
        return (lo, hi)

    def sample_(self, out: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        out.normal_(self.mean, self.std, generator=generator)
        if self.low is not None or self.high is not None:
            out.clamp_(self.low, self.high)
        return out


@dataclass(frozen=True)
class Choice(Distribution):
    """Uniform choice among a finite set of values.

    Example:
        >>> import torch, sensorgym as sg
        >>> g = torch.Generator().manual_seed(0)
        >>> x = sg.Choice([0.0, 0.02, 0.04]).sample_(torch.empty(100, dtype=torch.float64), g)
        >>> sorted(set(x.tolist()))
        [0.0, 0.02, 0.04]
    """

    values: tuple[float, ...]

    def __init__(self, values: Sequence[float]) -> None:
        try:
            vals = tuple(values)
        except TypeError:
            raise ValueError(
                f"Choice(values={values!r}): values must be a non-empty sequence of numbers."
            ) from None
        if not vals:
            raise ValueError("Choice(values=()): give at least one value.")
        object.__setattr__(self, "values", tuple(_finite("values", v, "Choice") for v in vals))

    @property
    def bounds(self) -> tuple[float, float]:
        return (min(self.values), max(self.values))

    def sample_(self, out: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        table = torch.tensor(self.values, dtype=out.dtype, device=out.device)
        idx = torch.randint(len(self.values), out.shape, generator=generator, device=out.device)
        return out.copy_(table[idx])
