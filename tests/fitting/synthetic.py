"""Synthetic sensor logs with known parameters, generated here with numpy and scipy.signal only (not
through sensorgym), so that a recovery test checks the estimator against an independent generator.

The model is the error model of docs/fit.md, per sample ``k`` at interval ``T_s``: white noise of std
``N / sqrt(T_s)`` through ``y_k = a y_{k-1} + (1 - a) x_k`` (``a = exp(-2 pi f_c T_s)``), a random walk
with increments of std ``K sqrt(T_s)``, a Gauss-Markov bias ``g_k = phi g_{k-1} + sigma_g sqrt(1 - phi^2)
w_k`` (``phi = exp(-T_s / tau_c)``), rounding to ``resolution``, and losses from a two-state chain with
mean burst ``L`` and loss fraction ``p``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal


@dataclass(frozen=True)
class Truth:
    rate: float = 200.0
    noise_density: float = 0.003
    bandwidth: float = 20.0
    random_walk_density: float = 6e-4
    bias_instability: float = 4e-3
    bias_correlation_time: float = 5.0
    resolution: float = 0.0
    dropout: float = 0.0
    burst: float = 1.0
    level: float = 0.3

    @property
    def sample_interval(self) -> float:
        return 1.0 / self.rate


def _ar1(rng: np.random.Generator, n: int, phi: float, std: float) -> np.ndarray:
    """A stationary AR(1) sequence of marginal std ``std``."""
    w = rng.normal(0.0, std * math.sqrt(1.0 - phi * phi), n)
    zi = np.array([phi * rng.normal(0.0, std)])
    return signal.lfilter([1.0], [1.0, -phi], w, zi=zi)[0]


def loss_mask(rng: np.random.Generator, n: int, p: float, burst: float) -> np.ndarray:
    """``True`` where a sample is kept: alternating runs, kept ones geometric with mean ``1/q``, lost ones
    geometric with mean ``burst`` (``q = p / (L (1 - p))``); the first sample is kept."""
    keep = np.ones(n, dtype=bool)
    if p <= 0:
        return keep
    q = p / (burst * (1.0 - p))
    i = 0
    # draw many runs at once; the expected number of (kept, lost) pairs is n * q / (1 + q L)
    pairs = int(n * q * 2 + 100)
    kept = rng.geometric(q, pairs)
    lost = rng.geometric(1.0 / burst, pairs)
    for k, run in zip(kept, lost, strict=True):
        i += k
        if i >= n:
            break
        keep[i : i + run] = False
        i += run
    return keep


def generate(
    truth: Truth, duration: float, seed: int, signal_in: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(times, values)`` of the received samples of a ``duration``-second log (the sensor at rest at
    ``truth.level``, or reading ``signal_in`` per sample)."""
    rng = np.random.default_rng(seed)
    ts = truth.sample_interval
    n = round(duration / ts)
    x = np.full(n, truth.level) if signal_in is None else np.asarray(signal_in, float)[:n]
    white = rng.normal(0.0, truth.noise_density / math.sqrt(ts), n)
    if truth.bandwidth > 0:
        a = math.exp(-2.0 * math.pi * truth.bandwidth * ts)
        u = x + white
        stationary = rng.normal(0.0, truth.noise_density / math.sqrt(ts) * math.sqrt((1 - a) / (1 + a)))
        y = signal.lfilter([1.0 - a], [1.0, -a], u, zi=np.array([a * (x[0] + stationary)]))[0]
    else:
        y = x + white
    if truth.random_walk_density > 0:
        y = y + np.cumsum(rng.normal(0.0, truth.random_walk_density * math.sqrt(ts), n))
    if truth.bias_instability > 0:
        y = y + _ar1(rng, n, math.exp(-ts / truth.bias_correlation_time), truth.bias_instability)
    if truth.resolution > 0:
        y = np.round(y / truth.resolution) * truth.resolution
    keep = loss_mask(rng, n, truth.dropout, truth.burst)
    times = np.arange(n) * ts
    return times[keep], y[keep]
