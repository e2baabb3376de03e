"""The overlapping Allan deviation of a log, with its 95% confidence band.

The deviation itself is ``allantools.oadev`` (NIST SP 1065 eq. 11) on the samples as received; the band
comes from the chi-square distribution with Greenhall's equivalent degrees of freedom
(``allantools.edf_greenhall``, overlapping estimator), for the power-law noise that the local slope of
the log's own Allan variance shows at each ``tau`` (:func:`noise_alpha`).
:func:`allan_variance_batch` is the same estimator vectorized over many equally long series (the
simulated envs), pooled; a test holds it equal to allantools.

Example:
    >>> import numpy as np
    >>> y = np.random.default_rng(0).normal(0.0, 0.1, 20000)   # white noise, 100 Hz
    >>> a = allan_deviation(y, 0.01, octave_m(len(y), hi=len(y) // 10))
    >>> bool(abs(a.adev[0] / 0.1 - 1) < 0.02), bool(np.all(a.lo < a.adev) and np.all(a.adev < a.hi))
    (True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import require

__all__ = ["Allan", "allan_deviation", "allan_variance_batch", "fit_m", "noise_alpha", "octave_m"]


@dataclass
class Allan:
    """An Allan deviation at averaging factors ``m`` (``tau = m * T_s``).

    Attributes:
        taus: ``(k,)`` seconds.
        m: ``(k,)`` samples per average.
        adev: ``(k,)`` overlapping Allan deviation.
        edf: ``(k,)`` equivalent degrees of freedom of each estimate.
        lo, hi: ``(k,)`` its 95% confidence band.
        n: samples it was computed from.
    """

    taus: np.ndarray
    m: np.ndarray
    adev: np.ndarray
    edf: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    n: int

    @property
    def avar(self) -> np.ndarray:
        return self.adev**2

    def select(self, keep: np.ndarray) -> Allan:
        """The deviation at the ``tau`` where ``keep`` is true."""
        return Allan(
            self.taus[keep],
            self.m[keep],
            self.adev[keep],
            self.edf[keep],
            self.lo[keep],
            self.hi[keep],
            self.n,
        )


def octave_m(n: int, lo: int = 1, hi: int | None = None) -> np.ndarray:
    """Octave-spaced averaging factors ``lo * 2^k`` up to ``hi`` (default: the largest the overlapping
    estimator allows for ``n`` samples, ``(n - 1) // 2``)."""
    top = (n - 1) // 2 if hi is None else min(hi, (n - 1) // 2)
    out, m = [], max(1, int(lo))
    while m <= top:
        out.append(m)
        m *= 2
    return np.asarray(out, dtype=np.int64)


def fit_m(n: int, hi: int) -> np.ndarray:
    """Half-octave averaging factors ``round(2^(k/2))`` from 1 to ``hi``: dense where a filter shows (the
    first few samples), about two per octave beyond."""
    top = min(hi, (n - 1) // 2)
    if top < 1:
        return np.zeros(0, dtype=np.int64)
    k = np.arange(0, int(np.floor(2 * np.log2(top))) + 1)
    return np.unique(np.round(2.0 ** (k / 2)).astype(np.int64).clip(1, top))


def noise_alpha(m: np.ndarray, avar: np.ndarray) -> np.ndarray:
    """The power-law noise exponent ``alpha`` of frequency data at each ``m`` (0 white, -1 flicker, -2
    random-walk frequency noise), from the slope of ``log AVAR`` against ``log m`` fitted over the octave
    on either side (single estimates scatter too much to read a slope from neighbours). Slopes steeper
    than white noise (a filter's roll-off, quantization) count as white: their degrees of freedom are
    at least those of white noise."""
    x, y = np.log(np.asarray(m, float)), np.log(np.maximum(np.asarray(avar, float), 1e-300))
    slope = np.full(len(x), -1.0)
    if len(x) < 3:
        return np.zeros(len(x), dtype=int)
    for i in range(len(x)):
        distance = np.abs(x - x[i])
        near = (distance <= np.log(2.0) + 1e-9) | (distance <= np.sort(distance)[2])  # at least 3 points
        slope[i] = np.polyfit(x[near], y[near], 1)[0]
    return np.select([slope <= -0.5, slope <= 0.5], [0, -1], default=-2).astype(int)


def allan_deviation(values: np.ndarray, sample_interval: float, m: np.ndarray) -> Allan:
    """The overlapping Allan deviation of ``values`` (taken every ``sample_interval`` s) at averaging
    factors ``m``, with Greenhall's degrees of freedom and the 95% chi-square band."""
    at = require("allantools", "fit", "the Allan deviation")
    values = np.asarray(values, dtype=np.float64)
    values = values - values.mean()  # the deviation ignores a constant; the phase sums keep their precision
    rate = 1.0 / sample_interval
    m = np.asarray(m, dtype=np.int64)
    taus, adev, _, _ = at.oadev(values, rate=rate, data_type="freq", taus=m * sample_interval)
    used = np.rint(np.asarray(taus) * rate).astype(np.int64)
    alpha = noise_alpha(used, np.asarray(adev) ** 2)
    n_phase = len(values) + 1
    edf = np.array(
        [
            at.edf_greenhall(alpha=int(a), d=2, m=int(k), N=n_phase, overlapping=True, modified=False)
            for a, k in zip(alpha, used, strict=True)
        ],
        dtype=np.float64,
    )
    band = np.array(
        [at.confidence_interval(float(d), float(e), ci=0.95) for d, e in zip(adev, edf, strict=True)]
    )
    band = band.reshape(-1, 2)
    return Allan(
        np.asarray(taus, float), used, np.asarray(adev, float), edf, band[:, 0], band[:, 1], len(values)
    )


def allan_variance_batch(values: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The overlapping Allan variance of the rows of ``values`` ``(B, n)`` (each a series taken every
    sample), pooled over rows, at averaging factors ``m`` (in units of the values squared)."""
    values = np.asarray(values, dtype=np.float64)
    values = values - values.mean(axis=1, keepdims=True)
    phase = np.zeros((values.shape[0], values.shape[1] + 1))
    np.cumsum(values, axis=1, out=phase[:, 1:])
    out = np.empty(len(m))
    buffer = np.empty_like(phase)  # the second differences, written in place (half the memory traffic)
    for i, k in enumerate(np.asarray(m, dtype=np.int64)):
        d = buffer[:, : phase.shape[1] - 2 * k]
        np.subtract(phase[:, 2 * k :], phase[:, k:-k], out=d)
        d -= phase[:, k:-k]
        d += phase[:, : -2 * k]
        out[i] = np.einsum("ij,ij->", d, d) / (2.0 * d.size * k * k)
    return out
