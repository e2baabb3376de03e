"""A warm-up trend at the start of a static window: the bias settling after power-on or after the sensor
was handled, which an Allan fit would otherwise read as a random walk (issue 33: two gyro axes of a bench
log got a walk from their first minute's drift).

**The test.** The window is cut into ``BLOCKS`` blocks of received samples and the differences ``d`` of
consecutive block means are taken. Under the error model alone (white noise, filter, rounding, a random
walk and a Gauss-Markov bias) ``d`` is a stationary Gaussian sequence whose covariance follows from the
model in closed form (:func:`block_difference_covariance`: the stationary parts through their
autocovariance, the walk through its increments), whatever the walk's size: a walk's path is as likely to
drift in the first minute as in any other. A settling bias ``A exp(-(t - t_0) / T)`` adds a known shape
``A s_T`` to ``d``; its generalized least-squares statistic ``chi^2(T) = (s' C^-1 d)^2 / (s' C^-1 s)`` is a
chi-square of one degree of freedom without a trend, maximized over ``T`` from a hundredth of the window
to a third of it (a warm-up settles inside the window; a slower drift is the error model's or a
flicker's). A trend is declared above ``CHI2_TREND`` (a false alarm well under one in a thousand logs
even after the search over ``T``). The model under test is fitted on the window's second
half, which the warm-up touches least; a flicker bias instability (slower parts than half a window shows)
can pass that test, so the trend must also exceed ``CHI2_CONFIRM`` against the model fitted on the whole
window, which takes a trend for a walk and so is hard to convince (on the bench logs of
tests/fitting/bench_log.py: warm-ups 320-8,700 and 68-82, flicker at most 33 and 34, never both).

**What is done with it.** Where the window three time constants in still holds at least half of it, the
window starts there (it was not at rest before); otherwise the fitted trend is subtracted. Either way the
report says so: the config has no term for a bias that settles.

Example:
    >>> import numpy as np
    >>> from sensorgym.fitting.model import ModelParams
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(120_000) * 0.005  # 10 min at 200 Hz
    >>> y = rng.normal(0.0, 0.01, t.size) + 0.004 * np.exp(-t / 30.0)  # white noise and a warm-up
    >>> trend = detect_warmup(t, y, ModelParams(noise_density=0.01 * np.sqrt(0.005)), 0.005)
    >>> bool(abs(trend.amplitude / 0.004 - 1) < 0.15), bool(20 < trend.time_constant < 45)
    (True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import require
from .model import ModelParams

__all__ = ["BLOCKS", "CHI2_CONFIRM", "CHI2_TREND", "Warmup", "block_difference_covariance", "detect_warmup"]

BLOCKS = 64
CHI2_TREND = 30.0
CHI2_CONFIRM = 20.0
_TIME_CONSTANTS = 24
_SETTLED = 3.0  # time constants after which a warm-up has settled to 5%


@dataclass
class Warmup:
    """A settling trend ``amplitude * exp(-(t - start) / time_constant)`` from the window's ``start``
    (s, the log's time base); ``chi2`` its statistic against the noise alone."""

    amplitude: float
    time_constant: float
    start: float
    chi2: float

    def at(self, times: np.ndarray) -> np.ndarray:
        return self.amplitude * np.exp(-(np.asarray(times, float) - self.start) / self.time_constant)


def autocovariance(params: ModelParams, ts: float, lags: np.ndarray) -> np.ndarray:
    """The stationary part's autocovariance at integer ``lags``: white noise (through the filter) and
    rounding, and the Gauss-Markov bias."""
    k = np.abs(lags).astype(np.float64)
    sigma2 = params.noise_density**2 / ts
    if params.bandwidth > 0:
        a = math.exp(-2.0 * math.pi * params.bandwidth * ts)
        out = sigma2 * (1.0 - a) / (1.0 + a) * np.exp(k * math.log(a))
    else:
        out = np.where(k == 0, sigma2, 0.0)
    out = out + np.where(k == 0, params.resolution**2 / 12.0, 0.0)
    if params.bias_instability > 0 and params.bias_correlation_time > 0:
        out = out + params.bias_instability**2 * np.exp(-k * ts / params.bias_correlation_time)
    return out


def block_difference_covariance(params: ModelParams, ts: float, block: int, count: int) -> np.ndarray:
    """The ``(count, count)`` covariance of ``count`` consecutive differences of means of ``block``
    samples, under the model ``params`` sampled every ``ts``.

    Example (white noise: ``2 sigma^2 / B`` on the diagonal, ``-sigma^2 / B`` beside it):
        >>> c = block_difference_covariance(ModelParams(noise_density=0.1), 0.01, 10, 3)
        >>> np.round(c / (0.1**2 / 0.01 / 10), 6).tolist()
        [[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]
    """
    # the difference kernel h (-1/B on a block, +1/B on the next) has the autocorrelation g(u) = (2B - 3|u|)
    # / B^2 up to |u| = B and -(2B - |u|) / B^2 beyond, to 2B: written out, not np.correlate's O(B^2)
    lags = np.arange(-(2 * block - 1), 2 * block)
    u = np.abs(lags).astype(np.float64)
    g = np.where(u <= block, 2.0 * block - 3.0 * u, -(2.0 * block - u)) / float(block) ** 2
    col = np.array([g @ autocovariance(params, ts, lags + lag * block) for lag in range(count)])
    if params.random_walk_density > 0:
        # d_0 = sum_s e_s W_s over the walk's increments e (variance K^2 T_s); W, the reversed cumsum of h,
        # is a triangle s / B up to B and (2B - s) / B beyond: W overlaps itself only at lags 0 and B
        s = np.arange(2 * block, dtype=np.float64)
        w = np.where(s < block, s, 2.0 * block - s) / block
        walk = np.zeros(count)
        walk[0] = w @ w
        if count > 1:
            walk[1] = w[:-block] @ w[block:]
        col = col + params.random_walk_density**2 * ts * walk
    index = np.abs(np.subtract.outer(np.arange(count), np.arange(count)))
    return col[index]


def detect_warmup(
    times: np.ndarray, values: np.ndarray, params: ModelParams, ts: float, threshold: float = CHI2_TREND
) -> Warmup | None:
    """The warm-up trend of a static window (``times``, ``values``) against the noise model ``params``
    (module docstring) whose statistic exceeds ``threshold``, or None."""
    times, values = np.asarray(times, float), np.asarray(values, float)
    block = len(values) // BLOCKS
    if block < 2:
        return None
    used = block * BLOCKS
    t, y = times[:used], values[:used]
    d = np.diff(y.reshape(BLOCKS, block).mean(axis=1))
    cov = block_difference_covariance(params, ts, block, BLOCKS - 1)
    root = np.linalg.cholesky(cov + np.eye(len(d)) * 1e-12 * np.trace(cov) / len(d))
    white_d = np.linalg.solve(root, d)
    duration = t[-1] - t[0]

    def statistic(log_tau: float) -> tuple[float, float]:
        shape = np.exp(-(t - t[0]) / math.exp(log_tau))
        s = np.linalg.solve(root, np.diff(shape.reshape(BLOCKS, block).mean(axis=1)))
        norm = max(float(s @ s), 1e-300)
        proj = float(s @ white_d)
        return proj * proj / norm, proj / norm

    grid = np.log(np.geomspace(duration / 100.0, duration / _SETTLED, _TIME_CONSTANTS))
    chi2 = [statistic(x)[0] for x in grid]
    i = int(np.argmax(chi2))
    if chi2[i] <= threshold:
        return None
    # the time constant between the grid's neighbours of the best one
    opt = require("scipy.optimize", "fit", "the warm-up trend")
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    x = float(opt.minimize_scalar(lambda x: -statistic(x)[0], bounds=(lo, hi), method="bounded").x)
    x = max((x, float(grid[i])), key=lambda x: statistic(x)[0])
    value, amplitude = statistic(x)
    return Warmup(amplitude, math.exp(x), float(t[0]), value)


def settled_from(trend: Warmup, end: float) -> float | None:
    """Where the window starts once the trend has settled (``_SETTLED`` time constants in), if at least
    half of the window is left; None: the trend is to be subtracted instead."""
    start = trend.start + _SETTLED * trend.time_constant
    return start if end - start >= 0.5 * (end - trend.start) else None
