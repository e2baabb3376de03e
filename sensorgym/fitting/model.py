"""The closed-form Allan variance of the sensor error model (``noise_density``, ``bandwidth``, ...),
sampled every ``T_s``.

At averaging factor ``m`` (``tau = m T_s``) the terms add:

* white noise of density ``N`` (per-sample std ``sigma = N / sqrt(T_s)``) through the sensor's first-order
  low-pass filter ``y <- a y + (1 - a)(x + sigma w)``, ``a = exp(-2 pi f_c T_s)``: an AR(1) sequence of
  variance ``v = sigma^2 (1 - a) / (1 + a)``; without a filter (``a = 0``) ``sigma^2 / m``;
* quantization with step ``r``: white, ``r^2 / (12 m)`` (the rounding error of a signal that moves by more
  than a step between samples);
* bias random walk ``K``: increments of variance ``q^2 = K^2 T_s`` per sample, ``q^2 (2 m^2 + 1) / (6 m)``;
* Gauss-Markov bias ``sigma_g``, ``tau_c``: AR(1) of variance ``sigma_g^2`` and ``phi = exp(-T_s / tau_c)``.

An AR(1) sequence of variance ``v`` and coefficient ``a = exp(-b)`` has, from the variance ``V_m`` of a
sum of ``m`` consecutive values, ``AVAR(m) = (4 V_m - V_2m) / (2 m^2)``, that is
``v / m^2 * [m (1 + a) / (1 - a) - a (1 - a^m)(3 - a^m) / (1 - a)^2]``. Where ``b m`` is small (a
correlation time far beyond ``tau``) the two terms nearly cancel, so there the bracket is its Taylor
series in ``b`` (four terms, exact to ``(b m)^4``).

The drift terms pass the low-pass filter too in the simulation; at the ``tau`` where they matter the
filter is transparent, so the model leaves it out.

Example:
    >>> import numpy as np
    >>> p = ModelParams(noise_density=0.01)
    >>> float(allan_variance(p, np.array([4]), 0.01)[0])  # N^2 / tau
    0.0025
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

__all__ = [
    "ModelParams",
    "allan_variance",
    "ar1_allan_variance",
    "gauss_markov_allan_variance",
    "quantization_allan_variance",
    "random_walk_allan_variance",
    "white_allan_variance",
]

_SERIES_BELOW = 1e-3  # b * m under which the AR(1) bracket is evaluated by its series


@dataclass(frozen=True)
class ModelParams:
    """One channel's error-model terms (0: the term is off).

    Attributes:
        noise_density: ``N``, unit/sqrt(Hz).
        bandwidth: ``f_c``, Hz (0: no filter).
        random_walk_density: ``K``, unit/s/sqrt(Hz).
        bias_instability: ``sigma_g``, unit.
        bias_correlation_time: ``tau_c``, s.
        resolution: quantization step ``r``, unit.
    """

    noise_density: float = 0.0
    bandwidth: float = 0.0
    random_walk_density: float = 0.0
    bias_instability: float = 0.0
    bias_correlation_time: float = 0.0
    resolution: float = 0.0

    def replace(self, **changes: float) -> ModelParams:
        return replace(self, **changes)


def _ar1_bracket(m: np.ndarray, b: float) -> np.ndarray:
    """``m (1 + a)/(1 - a) - a (1 - a^m)(3 - a^m)/(1 - a)^2`` with ``a = exp(-b)``, stable for small
    ``b m``."""
    m = np.asarray(m, dtype=np.float64)
    out = np.empty_like(m)
    small = b * m < _SERIES_BELOW
    if np.any(small):
        k = m[small]
        out[small] = (
            b * k * (2 * k**2 + 1) / 3
            - b**2 * k**4 / 2
            + b**3 * k * (21 * k**4 - 5 * k**2 - 1) / 90
            - b**4 * k**4 * (2 * k**2 - 1) / 24
        )
    if np.any(~small):
        k = m[~small]
        one_minus_a = -math.expm1(-b)
        a = 1.0 - one_minus_a
        e = -np.expm1(-b * k)  # 1 - a^m
        out[~small] = k * (2.0 - one_minus_a) / one_minus_a - a * e * (2.0 + e) / one_minus_a**2
    return out


def ar1_allan_variance(variance: float, a: float, m: np.ndarray) -> np.ndarray:
    """Allan variance at ``m`` of a stationary AR(1) sequence of ``variance`` and coefficient
    ``0 <= a < 1``."""
    m = np.asarray(m, dtype=np.float64)
    if a <= 0.0:
        return variance / m
    return variance * _ar1_bracket(m, -math.log(a)) / m**2


def white_allan_variance(
    noise_density: float, bandwidth: float, m: np.ndarray, sample_interval: float
) -> np.ndarray:
    """White noise of density ``N``, per-sample std ``N / sqrt(T_s)``, through the first-order low-pass
    filter of cut-off ``bandwidth`` (0: none)."""
    sigma2 = noise_density**2 / sample_interval
    if bandwidth <= 0.0:
        return sigma2 / np.asarray(m, dtype=np.float64)
    a = math.exp(-2.0 * math.pi * bandwidth * sample_interval)
    return ar1_allan_variance(sigma2 * (1.0 - a) / (1.0 + a), a, m)


def quantization_allan_variance(resolution: float, m: np.ndarray) -> np.ndarray:
    """Rounding to a step ``r``, as white noise of variance ``r^2 / 12``."""
    return resolution**2 / 12.0 / np.asarray(m, dtype=np.float64)


def random_walk_allan_variance(
    random_walk_density: float, m: np.ndarray, sample_interval: float
) -> np.ndarray:
    """A random walk of density ``K``: per-sample increments of variance ``K^2 T_s``."""
    m = np.asarray(m, dtype=np.float64)
    return random_walk_density**2 * sample_interval * (2.0 * m**2 + 1.0) / (6.0 * m)


def gauss_markov_allan_variance(
    sigma: float, correlation_time: float, m: np.ndarray, sample_interval: float
) -> np.ndarray:
    """A first-order Gauss-Markov bias of std ``sigma_g`` and correlation time ``tau_c``, stepped every
    ``T_s``."""
    if sigma <= 0.0 or correlation_time <= 0.0:
        return np.zeros(len(np.atleast_1d(m)))
    return ar1_allan_variance(sigma**2, math.exp(-sample_interval / correlation_time), m)


def allan_variance(params: ModelParams, m: np.ndarray, sample_interval: float) -> np.ndarray:
    """The Allan variance of the whole model at averaging factors ``m`` (``tau = m T_s``)."""
    m = np.asarray(m, dtype=np.float64)
    total = white_allan_variance(params.noise_density, params.bandwidth, m, sample_interval)
    if params.resolution > 0:
        total = total + quantization_allan_variance(params.resolution, m)
    if params.random_walk_density > 0:
        total = total + random_walk_allan_variance(params.random_walk_density, m, sample_interval)
    if params.bias_instability > 0:
        total = total + gauss_markov_allan_variance(
            params.bias_instability, params.bias_correlation_time, m, sample_interval
        )
    return total
