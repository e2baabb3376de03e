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

Lost samples (:class:`Gaps`): a log's Allan deviation is computed on the samples as received, one after
the other, so ``m`` counts received samples, and a gap of ``g`` sample intervals between two of them
(``g - 1`` lost) changes what they share. For lost samples that do not depend on the values (the sampler
of docs/error_model.md, whose gaps are independent after every received sample), the received sequence is, in
expectation, again of the same kind: white noise and quantization stay white; an AR(1) term of
coefficient ``a`` becomes one of coefficient ``psi(a) = E[a^g]`` with the same variance (the covariance of
two received samples ``l`` apart is ``v E[a^(g_1 + ... + g_l)] = v psi(a)^l``); a random walk's increments
between received samples have ``E[g]`` times the variance. Without losses ``psi(a) = a`` and ``E[g] = 1``.

:func:`psd` is the same model as a power spectral density of the received sequence (cycles per sample),
which :mod:`~sensorgym.fitting.estimate` uses for the covariance of the Allan variance estimates.

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
    "Gaps",
    "ModelParams",
    "allan_variance",
    "ar1_allan_variance",
    "gauss_markov_allan_variance",
    "psd",
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


@dataclass(frozen=True)
class Gaps:
    """The gaps between consecutive received samples, in sample intervals (1: none lost), as a
    distribution: ``values`` with their ``weights`` (summing to 1).

    Example:
        >>> g = Gaps.from_steps(np.array([1, 1, 1, 3]))  # one run of two lost samples
        >>> g.mean, round(g.psi(0.5), 4)  # E[g], E[0.5^g]
        (1.5, 0.4062)
    """

    values: np.ndarray
    weights: np.ndarray

    @staticmethod
    def none() -> Gaps:
        return Gaps(np.array([1]), np.array([1.0]))

    @staticmethod
    def from_steps(steps: np.ndarray) -> Gaps:
        """From the gaps as whole numbers of sample intervals (``rint(diff(times) / T_s)``, at least 1)."""
        steps = np.maximum(np.asarray(steps, dtype=np.int64), 1)
        if not len(steps):
            return Gaps.none()
        values, counts = np.unique(steps, return_counts=True)
        return Gaps(values, counts / counts.sum())

    @property
    def lossless(self) -> bool:
        return bool(np.all(self.values == 1))

    @property
    def mean(self) -> float:
        """``E[g]``: sample intervals per received sample."""
        return float(np.sum(self.values * self.weights))

    def psi(self, a: float) -> float:
        """``E[a^g]``: the lag-one coefficient an AR(1) term of coefficient ``a`` has between received
        samples."""
        if a <= 0.0:
            return 0.0
        return float(np.sum(self.weights * np.exp(self.values * math.log(a))))


def _ar1_bracket(m: np.ndarray, b: float) -> np.ndarray:
    """``m (1 + a)/(1 - a) - a (1 - a^m)(3 - a^m)/(1 - a)^2`` with ``a = exp(-b)``, stable for small
    ``b m``."""
    m = np.asarray(m, dtype=np.float64)
    bm = b * m
    small = bm < _SERIES_BELOW
    out = None
    if small.any():
        out = (
            b * m * (2 * m**2 + 1) / 3
            - b**2 * m**4 / 2
            + b**3 * m * (21 * m**4 - 5 * m**2 - 1) / 90
            - b**4 * m**4 * (2 * m**2 - 1) / 24
        )
        if small.all():
            return out
    one_minus_a = -math.expm1(-b)
    a = 1.0 - one_minus_a
    e = -np.expm1(-bm)  # 1 - a^m
    closed = m * (2.0 - one_minus_a) / one_minus_a - a * e * (2.0 + e) / one_minus_a**2
    return closed if out is None else np.where(small, out, closed)


def ar1_allan_variance(variance: float, a: float, m: np.ndarray) -> np.ndarray:
    """Allan variance at ``m`` of a stationary AR(1) sequence of ``variance`` and coefficient
    ``0 <= a < 1``."""
    m = np.asarray(m, dtype=np.float64)
    if a <= 0.0:
        return variance / m
    return variance * _ar1_bracket(m, -math.log(a)) / m**2


def white_allan_variance(
    noise_density: float,
    bandwidth: float,
    m: np.ndarray,
    sample_interval: float,
    gaps: Gaps | None = None,
) -> np.ndarray:
    """White noise of density ``N``, per-sample std ``N / sqrt(T_s)``, through the first-order low-pass
    filter of cut-off ``bandwidth`` (0: none), on the received samples (``gaps``; default: none lost)."""
    sigma2 = noise_density**2 / sample_interval
    if bandwidth <= 0.0:
        return sigma2 / np.asarray(m, dtype=np.float64)
    a = math.exp(-2.0 * math.pi * bandwidth * sample_interval)
    b = a if gaps is None else gaps.psi(a)
    return ar1_allan_variance(sigma2 * (1.0 - a) / (1.0 + a), b, m)


def quantization_allan_variance(resolution: float, m: np.ndarray) -> np.ndarray:
    """Rounding to a step ``r``, as white noise of variance ``r^2 / 12``."""
    return resolution**2 / 12.0 / np.asarray(m, dtype=np.float64)


def random_walk_allan_variance(
    random_walk_density: float, m: np.ndarray, sample_interval: float, gaps: Gaps | None = None
) -> np.ndarray:
    """A random walk of density ``K``: per-sample increments of variance ``K^2 T_s`` (``E[g]`` times that
    between received samples)."""
    m = np.asarray(m, dtype=np.float64)
    per = 1.0 if gaps is None else gaps.mean
    return random_walk_density**2 * sample_interval * per * (2.0 * m**2 + 1.0) / (6.0 * m)


def gauss_markov_allan_variance(
    sigma: float,
    correlation_time: float,
    m: np.ndarray,
    sample_interval: float,
    gaps: Gaps | None = None,
) -> np.ndarray:
    """A first-order Gauss-Markov bias of std ``sigma_g`` and correlation time ``tau_c``, stepped every
    ``T_s`` (on the received samples: ``gaps``)."""
    if sigma <= 0.0 or correlation_time <= 0.0:
        return np.zeros(len(np.atleast_1d(m)))
    phi = math.exp(-sample_interval / correlation_time)
    return ar1_allan_variance(sigma**2, phi if gaps is None else gaps.psi(phi), m)


def allan_variance(
    params: ModelParams, m: np.ndarray, sample_interval: float, gaps: Gaps | None = None
) -> np.ndarray:
    """The Allan variance of the whole model at averaging factors ``m`` (``m`` received samples; without
    ``gaps``, none lost: ``tau = m T_s``)."""
    m = np.asarray(m, dtype=np.float64)
    total = white_allan_variance(params.noise_density, params.bandwidth, m, sample_interval, gaps)
    if params.resolution > 0:
        total = total + quantization_allan_variance(params.resolution, m)
    if params.random_walk_density > 0:
        total = total + random_walk_allan_variance(params.random_walk_density, m, sample_interval, gaps)
    if params.bias_instability > 0:
        total = total + gauss_markov_allan_variance(
            params.bias_instability, params.bias_correlation_time, m, sample_interval, gaps
        )
    return total


def _ar1_psd(variance: float, b: float, f: np.ndarray) -> np.ndarray:
    """Two-sided PSD (cycles per sample) of a stationary AR(1) sequence of ``variance`` and coefficient
    ``b``: ``v (1 - b^2) / |1 - b e^(-2 pi i f)|^2``, written stably for ``b`` near 1."""
    if b <= 0.0:
        return np.full(len(f), variance)
    return variance * (1.0 - b) * (1.0 + b) / ((1.0 - b) ** 2 + 4.0 * b * np.sin(np.pi * f) ** 2)


def psd(params: ModelParams, f: np.ndarray, sample_interval: float, gaps: Gaps | None = None) -> np.ndarray:
    """The model's two-sided power spectral density on the received samples at frequencies ``f`` (cycles
    per received sample, ``0 < f <= 1/2``), normalized so that the Allan variance at ``m`` is
    ``integral over [-1/2, 1/2] of psd * 2 sin^4(pi f m) / (m^2 sin^2(pi f))`` (a random walk's spectrum is
    not integrable at 0, that product is).

    Example:
        >>> p = ModelParams(noise_density=0.01)
        >>> float(psd(p, np.array([0.25]), 0.01)[0])  # white: sigma^2 = N^2 / T_s
        0.01
    """
    f = np.asarray(f, dtype=np.float64)
    ts = sample_interval
    sigma2 = params.noise_density**2 / ts
    if params.bandwidth > 0:
        a = math.exp(-2.0 * math.pi * params.bandwidth * ts)
        out = _ar1_psd(sigma2 * (1.0 - a) / (1.0 + a), a if gaps is None else gaps.psi(a), f)
    else:
        out = np.full(len(f), sigma2)
    out = out + params.resolution**2 / 12.0
    if params.random_walk_density > 0:
        per = 1.0 if gaps is None else gaps.mean
        out = out + params.random_walk_density**2 * ts * per / (4.0 * np.sin(np.pi * f) ** 2)
    if params.bias_instability > 0 and params.bias_correlation_time > 0:
        phi = math.exp(-ts / params.bias_correlation_time)
        out = out + _ar1_psd(params.bias_instability**2, phi if gaps is None else gaps.psi(phi), f)
    return out
