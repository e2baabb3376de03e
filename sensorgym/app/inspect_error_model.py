"""``inspect``'s rows for the error-model options written in a sensor's own units: ``noise_density``,
``bandwidth`` and ``dropout_burst``, each configured value beside its estimate from the recorded trace.

The estimates come from the samples a sensor delivered, each compared with the ground truth ``x`` of the
step it was taken at. Between two consecutive samples, ``m`` of the sensor's own samples apart, its
first-order filter advances as ``y <- a^m y + (1 - a^m) x + eps`` (docs/error_model.md), so the residual
``u_k = z_k - x_k`` regressed on ``v_k = z_{k-1} - x_k`` has the slope ``c = a^m`` (a bias added after the
filter only moves the intercept) and the residual spread ``std(eps) = sigma (1 - a) sqrt((1 - a^{2m}) /
(1 - a^2))`` with ``sigma = N / sqrt(T_s)``: the bandwidth is ``-ln(c) / (2 pi m T_s)`` and the noise
density follows. Without a filter the slope is 0 and ``std(eps)`` is the per-sample noise. Lost samples
come in runs; the mean length of a run is the mean burst.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> a, sigma, n = 0.5, 0.1, 4000                       # a filtered white noise on a constant signal
    >>> y = np.zeros(n)
    >>> for k in range(1, n):
    ...     y[k] = a * y[k - 1] + (1 - a) * sigma * rng.normal()
    >>> fit = regress_filter(y, np.zeros(n), np.ones(n - 1, bool), np.ones(n - 1, int))
    >>> round(fit["slope"], 2), fit["gap"]
    (0.5, 1)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["error_model_checks", "error_model_rows", "loss_runs", "regress_filter"]


def regress_filter(z: np.ndarray, x: np.ndarray, pairs: np.ndarray, gaps: np.ndarray) -> dict[str, float]:
    """The slope ``c``, its standard error and the residual spread of ``z_k - x_k`` on ``z_{k-1} - x_k``
    over the consecutive samples ``pairs`` marks (same episode) that lie the most common gap apart
    (``gaps``, in control steps: a lost sample makes a longer one); ``gap`` is that gap."""
    z, x = np.asarray(z, float), np.asarray(x, float)
    pairs, gaps = np.asarray(pairs, bool), np.asarray(gaps, int)
    empty = {"slope": float("nan"), "slope_se": float("nan"), "spread": float("nan"), "gap": 0, "pairs": 0}
    if not pairs.any():
        return empty
    gap = int(np.bincount(gaps[pairs & (gaps > 0)]).argmax()) if (pairs & (gaps > 0)).any() else 0
    keep = pairs & (gaps == gap)
    u = (z[1:] - x[1:])[keep]
    v = (z[:-1] - x[1:])[keep]
    n = u.size
    sxx = float(np.sum((v - v.mean()) ** 2)) if n else 0.0
    if n < 10 or sxx <= 0.0:
        return {**empty, "gap": gap, "pairs": n}
    slope = float(np.sum((v - v.mean()) * (u - u.mean())) / sxx)
    resid = u - u.mean() - slope * (v - v.mean())
    spread = float(math.sqrt(np.sum(resid**2) / (n - 2)))
    return {"slope": slope, "slope_se": spread / math.sqrt(sxx), "spread": spread, "gap": gap, "pairs": n}


def loss_runs(due: np.ndarray) -> np.ndarray:
    """The lengths of the runs of lost samples, from the due samples per gap between delivered samples
    (a gap of ``d`` due samples holds a run of ``d - 1`` lost ones).

    Example:
        >>> loss_runs(np.array([1, 3, 1, 1, 2])).tolist()
        [2, 1]
    """
    due = np.asarray(due, int)
    return due[due > 1] - 1


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _component(value: Any, i: int) -> Any:
    if isinstance(value, (list, tuple)):
        return value[i] if i < len(value) else value[-1]
    return value


def _configured(options: Any, component: int) -> dict[str, Any]:
    """The options these rows compare (a number, a distribution's text, or None when not set)."""
    out = {}
    for name in ("noise_density", "bandwidth"):
        value = _component(getattr(options, name, 0.0), component)
        if value is not None and (_number(value) is None or _number(value) > 0):
            out[name] = value
    burst = getattr(options, "dropout_burst", None)
    if burst is not None:
        out["dropout_burst"] = burst
    return out


def error_model_checks(options: Any, component: int) -> int:
    """How many statistical checks these rows add to ``inspect``'s table for one channel."""
    return len(_configured(options, component))


def _g(x: float) -> str:
    return f"{x:.3g}"


def error_model_rows(
    options: Any, component: int, est: dict[str, Any], dt: float, z: float
) -> tuple[dict[str, tuple[str, str, str]], list[str]]:
    """The rows (configured, estimate, verdict) for the configured ``noise_density``, ``bandwidth`` and
    ``dropout_burst`` of one channel, from :func:`regress_filter`'s fit in ``est["filter"]`` and the loss
    runs in ``est["runs"]``; a verdict says "differs" beyond ``z`` standard errors and 10%.

    Example:
        >>> import sensorgym as sg
        >>> opts = sg.StateSensorOptions(key="obs", noise_density=0.01, update_period=0.01)
        >>> est = {"filter": {"slope": 0.0, "slope_se": 0.01, "spread": 0.1, "gap": 1, "pairs": 2000}}
        >>> rows, notes = error_model_rows(opts, 0, est, dt=0.01, z=3.0)
        >>> rows["noise density"]
        ('0.01', '0.01 ± 0.000158', 'ok')
    """
    conf = _configured(options, component)
    rows: dict[str, tuple[str, str, str]] = {}
    notes: list[str] = []
    if not conf:
        return rows, notes
    period = _number(getattr(options, "update_period", 0.0))
    fit = est.get("filter") or {}
    if ("noise_density" in conf or "bandwidth" in conf) and (period is None or not fit.get("pairs")):
        why = "the update period is drawn per episode" if period is None else "too few consecutive samples"
        for name, label in (("noise_density", "noise density"), ("bandwidth", "bandwidth")):
            if name in conf:
                rows[label] = (_text(conf[name]), "n/a", why)
    elif "noise_density" in conf or "bandwidth" in conf:
        ts = period if period and period > 0 else dt
        m = max(1, round(fit["gap"] * dt / ts))  # own samples between two delivered ones
        c, c_se, s = fit["slope"], fit["slope_se"], fit["spread"]
        filtered = "bandwidth" in conf
        if "bandwidth" in conf:
            rows["bandwidth"] = _bandwidth_row(conf["bandwidth"], c, c_se, m, ts, z)

        def density_at(slope: float) -> float:
            # std(eps) = sigma (1 - a) sqrt((1 - a^2m) / (1 - a^2)); sigma = N / sqrt(T_s)
            a = min(max(slope, 0.0), 0.999) ** (1.0 / m) if filtered else 0.0
            return s / ((1 - a) * math.sqrt((1 - a ** (2 * m)) / (1 - a * a))) * math.sqrt(ts)

        density = density_at(c) if math.isfinite(c) else float("nan")
        # the spread's own error, and the filter's: the density through a^m one standard error either side
        from_a = (
            abs(density_at(c + c_se) - density_at(c - c_se)) / 2 if filtered and math.isfinite(c) else 0.0
        )
        density_se = math.hypot(density / math.sqrt(2.0 * max(fit["pairs"] - 2, 1)), from_a)
        if "noise_density" in conf:
            want = _number(conf["noise_density"])
            got = f"{_g(density)} ± {_g(density_se)}"
            if want is None:
                rows["noise density"] = ("randomized", got, "this episode's value")
            else:
                ok = abs(density - want) <= max(z * density_se, 0.1 * want)
                rows["noise density"] = (_g(want), got, "ok" if ok else f"differs (expected {_g(want)})")
        notes.append(
            f"noise density and bandwidth from {fit['pairs']} pairs of consecutive samples {m} own "
            f"sample{'s' * (m != 1)} apart (T_s = {_g(ts)} s): each residual against the ground truth "
            "regressed on the previous one gives the filter's a^m, its scatter the noise"
            + ("; quantization, drift and jitter add to the scatter" if filtered else "")
        )
    if "dropout_burst" in conf:
        runs = np.asarray(est.get("runs", np.zeros(0)), float)
        want = _number(conf["dropout_burst"])
        got = (
            f"{_g(runs.mean())} ± {_g(runs.std(ddof=1) / math.sqrt(runs.size))} ({runs.size} runs)"
            if (runs.size > 1)
            else f"{runs.size} run{'s' * (runs.size != 1)}"
        )
        if want is None:
            rows["mean burst"] = ("randomized", got, "this episode's value")
        elif runs.size < 2:
            rows["mean burst"] = (_g(want), got, "too few runs of lost samples: record more with --steps")
        else:
            se = math.sqrt(max(want * (want - 1.0), 0.0) / runs.size)  # runs are geometric, mean L
            ok = abs(runs.mean() - want) <= z * se + 1e-9
            rows["mean burst"] = (_g(want), got, "ok" if ok else f"differs (expected {_g(want)})")
    return rows, notes


def _text(value: Any) -> str:
    number = _number(value)
    return _g(number) if number is not None else "randomized"


def _bandwidth_row(value: Any, c: float, c_se: float, m: int, ts: float, z: float) -> tuple[str, str, str]:
    want = _number(value)
    conf = _g(want) + " Hz" if want is not None else "randomized"
    if not math.isfinite(c) or c <= 0.0:
        return conf, "no correlation seen", "differs: the samples look unfiltered"
    if c >= 1.0:
        return conf, "a^m >= 1", "differs: the residual drifts (no stationary filter)"
    scale = 2.0 * math.pi * m * ts
    got, got_se = -math.log(c) / scale, c_se / (c * scale)
    text = f"{_g(got)} ± {_g(got_se)} Hz"
    if want is None:
        return conf, text, "this episode's value"
    ok = abs(got - want) <= max(z * got_se, 0.1 * want)
    return conf, text, "ok" if ok else f"differs (expected {_g(want)} Hz)"
