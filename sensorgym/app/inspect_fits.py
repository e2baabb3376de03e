"""The fits ``sensorgym inspect`` makes of a channel's filter and scale factor, and the reading they say a
noiseless sensor would have given (the reference its noise, bias and drift are measured against).

A delivered sample ``z_k`` of a sensor with a first-order filter and a scale-factor error ``k``
(docs/error_model.md) follows, between two samples ``m`` of its own samples apart,

    z_k = c z_{k-1} + g x_k + (1 - c) b + eps_k,    c = a^m,  g = (1 - c)(1 + k),

with ``x_k`` the ground truth of the step the sample was taken at and ``b`` the bias added after the filter.
Without a scale factor ``g = 1 - c`` and :func:`regress_filter` regresses ``z_k - x_k`` on ``z_{k-1} - x_k``
(the slope is ``c``); with one, it regresses ``z_k`` on ``z_{k-1}``, ``x_k`` and 1 (``1 + k = g / (1 - c)``).
Without a filter, :func:`regress_scale` regresses ``z_k`` on ``x_k`` and 1 over every sample. The
reference is the ground truth through the fitted filter and scale (:func:`fit_reading`), so a filter's
lag on a moving signal and the ``k x`` term stay out of the noise, bias and drift estimates.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.sin(np.arange(2000) * 0.05)
    >>> z = 1.05 * x + 0.1 + 0.01 * rng.standard_normal(2000)     # a 5% scale error, a bias, no filter
    >>> fit = regress_scale(z, x)
    >>> round(fit["scale"], 3), fit["scale_se"] < 0.001
    (0.05, True)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .inspect_options import as_number as _number
from .inspect_options import option_component as _component

__all__ = [
    "filter_decay",
    "fit_reading",
    "match_delay",
    "new_samples",
    "offset_errors",
    "reference_offsets",
    "regress_filter",
    "regress_scale",
]


def _ols(y: np.ndarray, columns: list[np.ndarray], lags: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """Least squares of ``y`` on ``columns`` (an intercept included by the caller): the coefficients,
    their covariance and the residual spread. ``lags > 0``: the covariance is Newey and West's (Bartlett
    weights up to ``lags``), which stays honest when the residual is correlated in time (a drift)."""
    design = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    n, p = design.shape
    spread = float(math.sqrt(np.sum(resid**2) / max(n - p, 1)))
    inverse = np.linalg.pinv(design.T @ design)
    if lags <= 0:
        return coef, spread**2 * inverse, spread
    scores = design * resid[:, None]
    meat = scores.T @ scores
    for lag in range(1, min(lags, n - 1) + 1):
        cross = scores[lag:].T @ scores[:-lag]
        meat += (1.0 - lag / (lags + 1.0)) * (cross + cross.T)
    return coef, inverse @ meat @ inverse * n / max(n - p, 1), spread


def _demean(groups: np.ndarray, *columns: np.ndarray) -> list[np.ndarray]:
    """Each column minus its mean over each group (one intercept per group)."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    return [c - (np.bincount(inverse, weights=c) / counts)[inverse] for c in columns]


def _blocks(pairs: np.ndarray, block: int) -> np.ndarray:
    """A group per run of ``block`` consecutive pairs within one stretch of ``pairs`` (one episode)."""
    stretch = np.cumsum(~pairs)
    return stretch * (pairs.size + 1) + np.arange(pairs.size) // block


def regress_filter(
    z: np.ndarray,
    x: np.ndarray,
    pairs: np.ndarray,
    gaps: np.ndarray,
    gain: bool = False,
    blocks: int = 0,
) -> dict[str, float]:
    """The slope ``c``, its standard error and the residual spread of ``z_k - x_k`` on ``z_{k-1} - x_k``
    over the consecutive samples ``pairs`` marks (same episode) that lie the most common gap apart
    (``gaps``, in control steps: a lost sample makes a longer one); ``gap`` is that gap.

    ``gain=True`` (a scale factor is configured): ``z_k`` on ``z_{k-1}``, ``x_k`` and 1 instead, which also
    gives the gain ``g`` of ``x_k`` and the scale factor ``k = g / (1 - c) - 1`` (``scale``, ``scale_se`` by
    the delta method through the covariance of ``c`` and ``g``). Without it the gain is ``1 - c``.

    ``blocks > 0`` (a random walk or a Gauss-Markov bias is configured): one intercept per ``blocks``
    consecutive pairs instead of one for all, so that the slow drift, which enters as ``(1 - c) d_k``,
    stays out of the slope and the scatter (:mod:`sensorgym.app.inspect_drift`).

    Example:
        >>> rng = np.random.default_rng(1)
        >>> x, z = np.sin(np.arange(3000) * 0.1), np.zeros(3000)
        >>> for k in range(1, 3000):                             # a = 0.5, scale factor 0.1
        ...     z[k] = 0.5 * z[k - 1] + 0.5 * 1.1 * x[k] + 0.01 * rng.normal()
        >>> fit = regress_filter(z, x, np.ones(2999, bool), np.ones(2999, int), gain=True)
        >>> round(fit["slope"], 2), round(fit["scale"], 2)
        (0.5, 0.1)
    """
    z, x = np.asarray(z, float), np.asarray(x, float)
    pairs, gaps = np.asarray(pairs, bool), np.asarray(gaps, int)
    nan = float("nan")
    empty = {"slope": nan, "slope_se": nan, "spread": nan, "gap": 0, "pairs": 0, "gain": nan, "gain_se": nan}
    if not pairs.any():
        return empty
    gap = int(np.bincount(gaps[pairs & (gaps > 0)]).argmax()) if (pairs & (gaps > 0)).any() else 0
    keep = pairs & (gaps == gap)
    if blocks > 0:
        return _regress_blocks(z, x, keep, _blocks(pairs, blocks)[keep], gap, gain, empty)
    if not gain:
        u = (z[1:] - x[1:])[keep]
        v = (z[:-1] - x[1:])[keep]
        n = u.size
        sxx = float(np.sum((v - v.mean()) ** 2)) if n else 0.0
        if n < 10 or sxx <= 0.0:
            return {**empty, "gap": gap, "pairs": n}
        slope = float(np.sum((v - v.mean()) * (u - u.mean())) / sxx)
        resid = u - u.mean() - slope * (v - v.mean())
        spread = float(math.sqrt(np.sum(resid**2) / (n - 2)))
        slope_se = spread / math.sqrt(sxx)
        return {
            "slope": slope,
            "slope_se": slope_se,
            "spread": spread,
            "gap": gap,
            "pairs": n,
            "gain": 1.0 - slope,
            "gain_se": slope_se,
        }
    y, previous, now = z[1:][keep], z[:-1][keep], x[1:][keep]
    n = y.size
    if n < 10 or np.ptp(now) == 0.0 or np.ptp(previous) == 0.0:
        return {**empty, "gap": gap, "pairs": n}
    coef, cov, spread = _ols(y, [previous, now, np.ones(n)])
    return _gain_fit(coef, cov, {"spread": spread, "gap": gap, "pairs": n})


def _gain_fit(coef: np.ndarray, cov: np.ndarray, base: dict) -> dict[str, float]:
    """The row of a regression on ``z_{k-1}`` and ``x_k`` (coefficients ``c``, ``g`` first, their
    covariance ``cov``): the slope, the gain and the scale factor ``k = g / (1 - c) - 1`` with its
    delta-method standard error (none when ``c >= 1``)."""
    c, g = float(coef[0]), float(coef[1])
    out = {
        **base,
        "slope": c,
        "slope_se": float(math.sqrt(max(cov[0, 0], 0.0))),
        "gain": g,
        "gain_se": float(math.sqrt(max(cov[1, 1], 0.0))),
        "scale": float("nan"),
        "scale_se": float("nan"),
    }
    if c < 1.0:
        grad = np.array([g / (1.0 - c) ** 2, 1.0 / (1.0 - c)])  # d(1 + k)/dc, d(1 + k)/dg
        out["scale"] = g / (1.0 - c) - 1.0
        out["scale_se"] = float(math.sqrt(max(grad @ cov[:2, :2] @ grad, 0.0)))
    return out


def _regress_blocks(
    z: np.ndarray, x: np.ndarray, keep: np.ndarray, groups: np.ndarray, gap: int, gain: bool, empty: dict
) -> dict[str, float]:
    """:func:`regress_filter` with one intercept per group (the kept pairs' ``groups``)."""
    y, previous, now = z[1:][keep], z[:-1][keep], x[1:][keep]
    n, g = y.size, np.unique(groups).size
    if n - g < 10:
        return {**empty, "gap": gap, "pairs": n}
    # the samples z_k of the pairs and their blocks: how much of a drift the scatter keeps
    # (inspect_drift.within_block_variance)
    empty = {**empty, "members": (np.flatnonzero(keep) + 1, groups)}
    if not gain:  # u = z_k - x_k on v = z_{k-1} - x_k
        u, v = _demean(groups, y - now, previous - now)
        sxx = float(np.sum(v * v))
        if sxx <= 0.0:
            return {**empty, "gap": gap, "pairs": n}
        slope = float(np.sum(v * u) / sxx)
        spread = float(math.sqrt(np.sum((u - slope * v) ** 2) / (n - g - 1)))
        se = spread / math.sqrt(sxx)
        return {
            **empty,
            "slope": slope,
            "slope_se": se,
            "spread": spread,
            "gap": gap,
            "pairs": n,
            "dof": n - g - 1,
            "gain": 1.0 - slope,
            "gain_se": se,
        }
    yy, pp, xx = _demean(groups, y, previous, now)
    if np.ptp(xx) == 0.0 or np.ptp(pp) == 0.0:
        return {**empty, "gap": gap, "pairs": n}
    design = np.column_stack([pp, xx])
    coef, *_ = np.linalg.lstsq(design, yy, rcond=None)
    spread = float(math.sqrt(np.sum((yy - design @ coef) ** 2) / (n - g - 2)))
    cov = spread**2 * np.linalg.pinv(design.T @ design)
    return _gain_fit(coef, cov, {**empty, "spread": spread, "gap": gap, "pairs": n, "dof": n - g - 2})


def regress_scale(z: np.ndarray, x: np.ndarray, blocks: int = 0) -> dict[str, float]:
    """The scale factor ``k`` of ``z = (1 + k) x + b + e`` by least squares over every sample, with a
    standard error that stays honest when ``e`` drifts (Newey-West, ``4 (n / 100)^(2/9)`` lags);
    ``blocks > 0``: one intercept ``b`` per ``blocks`` consecutive samples (a configured drift term)."""
    z, x = np.asarray(z, float), np.asarray(x, float)
    n = z.size
    if n < 10 or np.ptp(x) == 0.0:
        return {"scale": float("nan"), "scale_se": float("nan"), "samples": n}
    lags = math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0))
    if blocks > 0:
        groups = np.arange(n) // blocks
        zz, xx = _demean(groups, z, x)
        if np.ptp(xx) == 0.0:
            return {"scale": float("nan"), "scale_se": float("nan"), "samples": n}
        coef, cov, _ = _ols(zz, [xx], lags=lags)
        g = int(groups[-1]) + 1
        cov = cov * (n - 1) / max(n - g - 1, 1)  # the intercepts' degrees of freedom
        return {
            "scale": float(coef[0]) - 1.0,
            "scale_se": float(math.sqrt(max(cov[0, 0], 0.0))),
            "samples": n,
        }
    coef, cov, _ = _ols(z, [x, np.ones(n)], lags=lags)
    return {"scale": float(coef[0]) - 1.0, "scale_se": float(math.sqrt(max(cov[0, 0], 0.0))), "samples": n}


def _through(x: np.ndarray, restart: np.ndarray, due: np.ndarray, slope: float, gain: float) -> np.ndarray:
    """``x`` through ``f <- slope f + gain x`` at every due step (held otherwise), from ``f = gain /
    (1 - slope) x`` at every restart (a reset: the sensor's filter starts at its input there)."""
    f = np.empty_like(x)
    steady = gain / (1.0 - slope)
    for t in range(x.size):
        if restart[t]:
            f[t] = steady * x[t]
        elif due[t]:
            f[t] = slope * f[t - 1] + gain * x[t]
        else:
            f[t] = f[t - 1]
    return f


def fit_reading(
    z: np.ndarray,
    x: np.ndarray,
    at: np.ndarray,
    fit: dict[str, float],
    *,
    episode_step: np.ndarray | None = None,
    due: np.ndarray | None = None,
    scale: bool = False,
    lowpass: bool = False,
    blocks: int = 0,
) -> dict[str, Any]:
    """What a noiseless sensor would have delivered at each sample (``z``, taken at the steps ``at`` of the
    ground truth ``x``): ``x`` through the filter :func:`regress_filter` fitted (``lowpass``: advanced at the
    ``due`` steps, every step by default, restarted at each episode's first step) and times the fitted
    ``1 + k`` (``scale``; without a filter from :func:`regress_scale`).

    Returns ``references``: the reference at the samples, then the references with each fitted parameter one
    standard error away (the estimates' own error through the reference, :func:`reference_offsets`);
    ``scale``: the scale factor's fit (when ``scale``); ``slope``: the filter's ``a^m`` it used (0 without
    a filter); ``gain``: the gain of ``x``."""
    x, at = np.asarray(x, float), np.asarray(at, int)
    restart = np.zeros(x.size, bool)
    restart[0] = True
    if episode_step is not None:
        restart |= np.asarray(episode_step)[: x.size] == 0
    due = np.ones(x.size, bool) if due is None else np.asarray(due, bool)[: x.size]
    out: dict[str, Any] = {"slope": 0.0, "gain": 1.0}
    if lowpass:
        c, c_se = fit.get("slope", float("nan")), fit.get("slope_se", float("nan"))
        k, k_se = (fit.get("scale", float("nan")), fit.get("scale_se", float("nan"))) if scale else (0.0, 0.0)
        if scale:
            out["scale"] = {"scale": k, "scale_se": k_se}
        if not all(math.isfinite(v) for v in (c, c_se, k, k_se)):
            return {**out, "references": [x[at]]}
        c = min(max(c, 0.0), 0.99)  # a^m of an identified filter; 0: none seen (or one too fast to see)

        def through(slope: float, factor: float) -> np.ndarray:  # the filter a^m = slope, times 1 + k
            return _through(x, restart, due, slope, (1.0 - slope) * factor)[at]

        # each parameter one standard error away, the other kept (1 + k, not the gain: c and the gain are
        # strongly correlated where the signal is smooth, 1 + k = gain / (1 - c) is not)
        references = [through(c, 1.0 + k), through(min(c + c_se, 0.99), 1.0 + k)]
        if scale:
            references.append(through(c, 1.0 + k + k_se))
        return {**out, "slope": c, "gain": (1.0 - c) * (1.0 + k), "references": references}
    if scale:
        z = np.asarray(z, float)
        sf = regress_scale(z, x[at], blocks=blocks)
        k, k_se = sf["scale"], sf["scale_se"]
        if not (math.isfinite(k) and math.isfinite(k_se)):
            return {**out, "scale": sf, "references": [x[at]]}
        return {
            **out,
            "scale": sf,
            "gain": 1.0 + k,
            "references": [(1.0 + k) * x[at], (1.0 + k + k_se) * x[at]],
        }
    return {**out, "references": [x[at]]}


def reference_offsets(z: np.ndarray, references: list[np.ndarray], window: int) -> tuple[float, float]:
    """How far the bias (median residual of the first ``window`` samples) and the drift (median of the last
    ``window`` minus the bias) move when the reference moves by one standard error of each fitted
    parameter (in quadrature over the parameters)."""
    z = np.asarray(z, float)

    def offsets(ref: np.ndarray) -> tuple[float, float]:
        r = z - ref
        bias = float(np.median(r[:window])) if r.size else 0.0
        return bias, (float(np.median(r[-window:])) - bias) if r.size else 0.0

    base = offsets(references[0])
    moved = np.array([offsets(ref) for ref in references[1:]]).reshape(-1, 2) - np.array(base)
    return float(np.sqrt(np.sum(moved[:, 0] ** 2))), float(np.sqrt(np.sum(moved[:, 1] ** 2)))


def offset_errors(
    noise: float, window: int, z: np.ndarray, model: dict[str, Any] | None, scale: bool, lowpass: bool
) -> dict[str, Any]:
    """The standard errors of the bias (median of the first ``window`` residuals) and of the drift (the
    last window's median minus it), from the step-to-step ``noise``; with a fitted reading ``model``
    (:func:`fit_reading`) also its ``scale`` fit and ``reference``.

    A filter's residual is its filtered noise, an AR(1) with coefficient ``c = a^m``: a window's mean of
    it varies ``(1 + c) / (1 - c)`` times as much as of independent values of the same spread, whose
    spread is ``noise / sqrt(1 - c)`` (the step-to-step noise shows ``sqrt(1 - c)`` of it), so the
    median's error grows by ``sqrt(1 + c) / (1 - c)``. The reference's own error (the fit's parameters one
    standard error away, :func:`reference_offsets`) adds in quadrature."""
    bias_se = 1.2533 * noise / math.sqrt(window)
    if model is None:
        return {"bias_se": float(bias_se), "drift_se": float(math.sqrt(2.0) * bias_se)}
    c = float(model["slope"])
    bias_se *= math.sqrt(1.0 + c) / (1.0 - c)
    extra_bias, extra_drift = reference_offsets(z, model["references"], window)
    factor = float(model["gain"]) / (1.0 - c)
    return {
        "bias_se": float(math.hypot(bias_se, extra_bias)),
        "drift_se": float(math.hypot(math.sqrt(2.0) * bias_se, extra_drift)),
        "scale": model.get("scale"),
        "reference": {"slope": c, "factor": factor, "scale": scale, "lowpass": lowpass},
    }


def new_samples(measured: np.ndarray, episode_step: np.ndarray | None = None) -> np.ndarray:
    """The steps at which a new sample shows in the reading: its value changed since the previous step of
    the same episode (a held sample repeats bit for bit, docs/pipeline.md; a lost one is never shown). An
    episode's first step is left out: what it shows depends on the padding, not on the delay.

    Example:
        >>> new_samples(np.array([1.0, 1.0, 2.0, 2.0, 2.0, 3.0]), np.arange(6)).tolist()
        [2, 5]
    """
    z = np.asarray(measured, float)
    step = np.arange(z.size) if episode_step is None else np.asarray(episode_step, int)[: z.size]
    changed = np.zeros(z.size, bool)
    changed[1:] = (z[1:] != z[:-1]) & (step[1:] >= 1)
    return np.flatnonzero(changed)


def match_delay(
    measured: np.ndarray,
    gt: np.ndarray,
    max_lag: int,
    episode_step: np.ndarray | None = None,
    *,
    lowpass: bool = False,
    at: np.ndarray | None = None,
    decay: Any = None,
) -> dict[str, Any]:
    """The delay (in control steps) at which the samples the reading shows match the ground truth best,
    from the traces alone: at every step where a new sample shows (``at``; default :func:`new_samples`, a
    changed value; a quantized reading changes only where the signal crosses a step of the grid, which
    favours some lags, so a caller that knows the steps passes them), the reading ``z_t``
    is regressed on the ground truth ``x_{t-L}`` of lag ``L`` and 1 (a scale factor and a bias change the
    slope and the intercept, not the best lag); with a filter (``lowpass``) on the previous new sample
    ``z'`` too, the filter's recursion ``z = c z' + g x + const`` (:func:`regress_filter`), so that its lag
    on a moving signal is not read as delay (a 2 Hz filter read at 20 Hz looked one step late); with the
    configured filter's ``c`` (``decay``, a function of the gap in steps) ``z - c z'`` on ``x`` and 1, as
    a free ``c`` also interpolates between ``z'`` and a younger ``x`` (a 50 Hz filter read every 5 own
    samples, ``c`` near 0, matched one step too early). The
    delay is the ``L`` with the smallest residual variance, over the candidates ``0..max_lag`` whose source
    step lies in the reading's episode.

    Held readings (a sampler slower than the control step) and lost samples (``dropout``) leave only the
    new samples in the match, each at the step it first shows, so a hold does not pull the estimate
    (the youngest reading's age had said 0 steps for every delayed sensor with losses: the reset step's
    reading is its own sample). ``delay_steps`` is ``None`` when the ground truth does not move on those
    steps (a constant signal carries no timing); ``scores``: the residual variance per lag.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x = np.sin(np.arange(400) * 0.1)
        >>> taken = np.repeat(np.arange(0, 400, 2), 2)[:400]         # a sample every 2 steps, held
        >>> z = np.r_[np.zeros(3), (1.1 * x + 0.01 * rng.normal(size=400))[taken][:-3]]   # 3 steps late
        >>> match_delay(z, x, 10)["delay_steps"]
        3
    """
    z, x = np.asarray(measured, float), np.asarray(gt, float)
    n = min(z.size, x.size)
    step = np.arange(n) if episode_step is None else np.asarray(episode_step, int)[:n]
    t = new_samples(z[:n], step) if at is None else np.asarray(at, int)
    t = t[(t < n) & (step[t] >= 1)]
    scores = np.full(max(max_lag, 0) + 1, np.inf)
    for lag in range(scores.size):
        at = t[(step[t] >= lag) & (t >= lag)]  # the source step in the same episode
        if at.size < 10 or np.ptp(x[at - lag]) == 0.0:
            continue
        columns = [x[at - lag], np.ones(at.size)]
        y = z[at]
        if lowpass:  # consecutive new samples of one episode, the most common gap apart
            gap = np.diff(at)
            same = (step[at[1:]] - gap) == step[at[:-1]]
            if same.sum() < 10:
                continue
            common = np.bincount(gap[same]).argmax()
            keep = same & (gap == common)
            if keep.sum() < 10:
                continue
            y, previous = z[at[1:]][keep], z[at[:-1]][keep]
            columns = [previous, x[at[1:] - lag][keep], np.ones(int(keep.sum()))]
            if decay is not None:  # the configured filter's c: no freedom to interpolate
                y, columns = y - decay(int(common)) * previous, columns[1:]
        design = np.column_stack(columns)
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        scores[lag] = float(np.mean((y - design @ coef) ** 2))
    best = int(np.argmin(scores)) if np.isfinite(scores).any() else None
    return {"delay_steps": best, "scores": scores, "samples": int(t.size)}


def filter_decay(options: Any, component: int, dt: float) -> Any:
    """The configured filter's ``a^m`` between two samples ``gap`` control steps apart, as a function of
    ``gap`` (``m = gap dt / T_s`` own samples below ``dt``, one per due sample above it); ``None`` without a
    filter or where the bandwidth or the update period is drawn per episode.

    Example:
        >>> import sensorgym as sg
        >>> decay = filter_decay(sg.StateSensorOptions(key="x", bandwidth=2.0, update_period=0.1), 0, 0.05)
        >>> round(decay(2), 4), round(math.exp(-2 * math.pi * 2.0 * 0.1), 4)
        (0.2846, 0.2846)
    """
    bandwidth = _number(_component(getattr(options, "bandwidth", 0.0), component))
    period = _number(getattr(options, "update_period", 0.0))
    if not bandwidth or bandwidth <= 0 or period is None or dt <= 0:
        return None
    ts = period if period > 0 else dt

    def decay(gap: int) -> float:
        m = gap * dt / ts if ts < dt else max(1, round(gap * dt / ts))
        return math.exp(-2.0 * math.pi * bandwidth * ts * m)

    return decay
