"""The delay of a channel behind a reference signal of the same quantity (a command, motion capture).

First the whole-sample lag that maximizes the cross-correlation of the two (both resampled on a common
grid of the channel's ``T_s``, ``scipy.signal.correlate``); then, to a fraction of a sample, the ``d``
that minimizes the residual of ``y(t_i) = alpha r(t_i - d) + beta`` at the channel's own time stamps,
the reference interpolated by a cubic spline (``scipy.optimize.minimize_scalar``). Its standard error is
the Gauss-Newton one, ``s^2 / (alpha^2 sum r'(t_i - d)^2)``, widened by ``(1 + rho) / (1 - rho)`` for the
lag-one correlation ``rho`` of the residual.

A sensor's own low-pass filter delays it too (by ``a / (1 - a)`` samples at low frequency); with
``bandwidth`` the reference is passed through the same filter first, so the delay found is the
transport delay that the ``delay`` option models, on top of the filter.

Example:
    >>> import numpy as np
    >>> t = np.arange(4000) * 0.005
    >>> ref = np.sin(2 * np.pi * 0.7 * t) + 0.5 * np.sin(2 * np.pi * 1.9 * t + 1.0)
    >>> y = np.sin(2 * np.pi * 0.7 * (t - 0.0163)) + 0.5 * np.sin(2 * np.pi * 1.9 * (t - 0.0163) + 1.0)
    >>> est = estimate_delay(t, y, t, ref, 0.005)
    >>> round(est.delay, 4)
    0.0163
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import FitError, require

__all__ = ["DelayEstimate", "estimate_delay"]

_MIN_CORRELATION = 0.3


@dataclass
class DelayEstimate:
    """``delay`` (s; positive: the channel lags the reference) with its 1-sigma ``se``, or ``delay=None``
    and why (``note``); ``correlation`` is the two signals' correlation coefficient at that delay."""

    delay: float | None
    se: float | None
    correlation: float
    samples: int
    note: str = ""


def _lowpass(values: np.ndarray, bandwidth: float, sample_interval: float, signal) -> np.ndarray:
    a = math.exp(-2.0 * math.pi * bandwidth * sample_interval)
    zi = signal.lfilter_zi([1.0 - a], [1.0, -a]) * values[0]
    return signal.lfilter([1.0 - a], [1.0, -a], values, zi=zi)[0]


def estimate_delay(
    times: np.ndarray,
    values: np.ndarray,
    ref_times: np.ndarray,
    ref_values: np.ndarray,
    sample_interval: float,
    bandwidth: float = 0.0,
    max_delay: float | None = None,
) -> DelayEstimate:
    """Estimate how far ``values`` (at ``times``) lag ``ref_values`` (at ``ref_times``), in seconds.

    ``max_delay`` bounds the search (default: a quarter of the overlap of the two).
    """
    signal = require("scipy.signal", "fit", "the delay estimate")
    opt = require("scipy.optimize", "fit", "the delay estimate")
    interp = require("scipy.interpolate", "fit", "the delay estimate")
    times, values = np.asarray(times, float), np.asarray(values, float)
    ref_times, ref_values = np.asarray(ref_times, float), np.asarray(ref_values, float)
    start, end = max(times[0], ref_times[0]), min(times[-1], ref_times[-1])
    ts = sample_interval
    if end - start < 20 * ts:
        raise FitError(
            f"the channel and the --reference overlap for {max(end - start, 0.0):.3g} s",
            "record the reference during the same time as the channel (at least 20 samples together)",
        )
    grid = np.arange(start, end, ts)
    ref_grid = np.interp(grid, ref_times, ref_values)
    if bandwidth > 0:
        ref_grid = _lowpass(ref_grid, bandwidth, ts, signal)
    y_grid = np.interp(grid, times, values)
    yc, rc = y_grid - y_grid.mean(), ref_grid - ref_grid.mean()
    max_lag = round((max_delay if max_delay is not None else (end - start) / 4) / ts)
    corr = signal.correlate(yc, rc, mode="full", method="fft")
    lags = signal.correlation_lags(len(yc), len(rc), mode="full")
    window = np.abs(lags) <= max_lag
    corr, lags = corr[window], lags[window]
    lag = int(lags[np.argmax(corr)])
    peak = float(corr.max() / (np.linalg.norm(yc) * np.linalg.norm(rc) + 1e-300))

    spline = interp.CubicSpline(grid, ref_grid)
    inside = (times >= start + (lag + 2) * ts) & (times <= end + (lag - 2) * ts)
    t_in, y_in = times[inside], values[inside]
    if len(t_in) < 10:
        return DelayEstimate(None, None, peak, len(t_in), "too few samples overlap at that lag")

    def fit_at(d: float) -> tuple[float, float, np.ndarray]:
        r = spline(t_in - d)
        design = np.stack([r, np.ones_like(r)], axis=1)
        coef, *_ = np.linalg.lstsq(design, y_in, rcond=None)
        return float(coef[0]), float(coef[1]), y_in - design @ coef

    def cost(d: float) -> float:
        return float(np.sum(fit_at(d)[2] ** 2))

    res = opt.minimize_scalar(
        cost, bounds=((lag - 1) * ts, (lag + 1) * ts), method="bounded", options={"xatol": 1e-4 * ts}
    )
    d = float(res.x)
    gain, _, resid = fit_at(d)
    n = len(resid)
    r_fit = spline(t_in - d)
    rho_fit = float(np.corrcoef(r_fit, y_in)[0, 1]) if np.std(r_fit) > 0 else 0.0
    if abs(rho_fit) < _MIN_CORRELATION or peak < _MIN_CORRELATION:
        return DelayEstimate(
            None,
            None,
            rho_fit,
            n,
            f"the channel and the reference barely correlate (r = {rho_fit:.2f}): not identifiable "
            "from this log",
        )
    slope = spline(t_in - d, 1)
    s2 = float(np.sum(resid**2) / max(n - 3, 1))
    rho = float(np.clip(np.corrcoef(resid[:-1], resid[1:])[0, 1], -0.99, 0.99)) if n > 3 else 0.0
    widen = (1.0 + max(rho, 0.0)) / (1.0 - max(rho, 0.0))
    se = math.sqrt(s2 * widen / max(gain**2 * float(np.sum(slope**2)), 1e-300))
    return DelayEstimate(d, se, rho_fit, n)
