"""``inspect``'s rows for the error-model options written in a sensor's own units: ``noise_density``,
``bandwidth``, ``scale_factor`` and ``dropout_burst``, each configured value beside its estimate from the
recorded trace, and the standard error of the loss fraction when losses come in bursts.

The estimates come from the samples a sensor delivered, each compared with the ground truth ``x`` of the
step it was taken at. Between two consecutive samples, ``m`` of the sensor's own samples apart, its
first-order filter advances as ``y <- a^m y + (1 - a^m) x + eps`` (docs/error_model.md), so the residual
``u_k = z_k - x_k`` regressed on ``v_k = z_{k-1} - x_k`` has the slope ``c = a^m`` (a bias added after the
filter only moves the intercept) and the residual spread ``std(eps) = sigma (1 - a) sqrt((1 - a^{2m}) /
(1 - a^2))`` with ``sigma = N / sqrt(T_s)``: the bandwidth is ``-ln(c) / (2 pi m T_s)`` and the noise
density follows. Without a filter the slope is 0 and ``std(eps)`` is the per-sample noise. With a scale
factor ``k`` the gain of ``x_k`` is ``(1 - c)(1 + k)`` instead (:mod:`sensorgym.app.inspect_fits`). Lost
samples come in runs; the mean length of a run is the mean burst.

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

import functools
import math
from typing import Any

import numpy as np

from .inspect_drift import drift_terms, within_block_variance
from .inspect_filter import filter_rows
from .inspect_fits import filter_decay, regress_filter
from .inspect_options import as_number as _number
from .inspect_options import option_component as _component

__all__ = [
    "error_model_checks",
    "error_model_rows",
    "loss_fraction_ok",
    "loss_fraction_se",
    "loss_runs",
    "model_terms",
    "regress_filter",
    "skips_samples",
]


def loss_runs(due: np.ndarray) -> np.ndarray:
    """The lengths of the runs of lost samples, from the due samples per gap between delivered samples
    (a gap of ``d`` due samples holds a run of ``d - 1`` lost ones).

    Example:
        >>> loss_runs(np.array([1, 3, 1, 1, 2])).tolist()
        [2, 1]
    """
    due = np.asarray(due, int)
    return due[due > 1] - 1


def _configured(options: Any, component: int) -> dict[str, Any]:
    """The options these rows compare (a number, a distribution's text, or None when not set)."""
    out = {}
    for name in ("noise_density", "bandwidth"):
        value = _component(getattr(options, name, 0.0), component)
        if value is not None and (_number(value) is None or _number(value) > 0):
            out[name] = value
    scale = _component(getattr(options, "scale_factor", 0.0), component)
    if scale is not None and (_number(scale) is None or _number(scale) != 0):
        out["scale_factor"] = scale
    burst = getattr(options, "dropout_burst", None)
    if burst is not None:
        out["dropout_burst"] = burst
    return out


def error_model_checks(options: Any, component: int) -> int:
    """How many statistical checks these rows add to ``inspect``'s table for one channel."""
    return len(_configured(options, component))


def model_terms(options: Any, component: int, dt: float | None = None) -> dict[str, Any]:
    """Which fitted terms the reference of one channel's noise, bias and drift estimates carries
    (:func:`~sensorgym.app.inspect_fits.fit_reading`): ``scale`` where a scale factor is configured,
    ``lowpass`` where a bandwidth is, ``drift`` where a random walk or a Gauss-Markov bias is (the
    regressions then take one intercept per block of samples, :mod:`sensorgym.app.inspect_drift`); with
    ``dt``, ``decay``: the configured filter's :func:`filter_decay` (the delay is matched through it)."""
    conf = _configured(options, component)
    drift = any(
        _number(v) is None or _number(v) > 0
        for v in (
            _component(getattr(options, name, 0.0), component)
            for name in ("random_walk", "random_walk_density", "bias_instability")
        )
        if v is not None
    )
    terms = {"scale": "scale_factor" in conf, "lowpass": "bandwidth" in conf, "drift": drift}
    if dt is not None:
        terms["decay"] = filter_decay(options, component, dt)
    return terms


def loss_fraction_se(p: float, due: int, burst: Any = None, runs: np.ndarray | None = None) -> float:
    """The standard error of the fraction of ``due`` samples lost, under a loss probability ``p``.

    Independent losses (``burst`` None): binomial, ``sqrt(p (1 - p) / n)``. In bursts of mean length ``L``
    (docs/error_model.md: after a lost sample the next is lost with ``1 - 1/L``, after a kept one with
    ``q = p / (L (1 - p))``) the indicators ``I_t`` of a loss form a stationary two-state Markov chain whose
    lag-``j`` correlation is ``rho^j`` with ``rho = P(lost | lost) - P(lost | kept) = 1 - 1/L - q`` (the
    second eigenvalue of its transition matrix). So ``Var(mean I) = p (1 - p) / n * (1 + 2 sum_{j>=1} (1 -
    j/n) rho^j)``, and with ``sum_{j>=1} rho^j = rho / (1 - rho)`` (the ``j/n`` terms are ``O(1/n)``) this is
    ``p (1 - p) / n * (1 + rho) / (1 - rho)``: the standard variance of a stationary Markov chain's ergodic
    average (e.g. Cox and Miller, *The Theory of Stochastic Processes*, 1965, on Markov chains). For
    ``p = 0.1``, ``L = 3`` it is 4.4 times the binomial; 4,000 simulated sensors of that kind over 1,000
    samples gave a spread of 0.0201 for the 0.0199 it predicts. A ``burst`` drawn per episode (a
    distribution) takes ``L`` from the observed ``runs`` (their mean).

    Example:
        >>> round(loss_fraction_se(0.1, 1000), 4), round(loss_fraction_se(0.1, 1000, 3.0), 4)
        (0.0095, 0.0199)
    """
    if due <= 0:
        return 0.0
    var = p * (1.0 - p) / due
    length = _number(burst) if burst is not None else None
    if burst is not None and length is None:  # drawn per episode: the runs seen
        length = float(np.mean(runs)) if runs is not None and len(runs) else 1.0
    if length is not None and length > 1.0 and 0.0 < p < 1.0:
        rho = 1.0 - 1.0 / length - p / (length * (1.0 - p))
        rho = min(max(rho, -0.99), 0.99)
        var *= (1.0 + rho) / (1.0 - rho)
    return math.sqrt(var)


def loss_fraction_ok(
    lost: int, due: int, p: float, z: float, burst: Any = None, runs: Any = None, at_least: bool = False
) -> bool:
    """Whether ``lost`` of ``due`` samples is a loss count a probability ``p`` gives, two-sided at the level
    of a ``z`` standard-error test (``2 sf(z)``); ``at_least``: ``lost`` counts the lost samples and others
    (jitter skips samples, which leave the same gap), so only a count below the law's lower tail differs.
    The count's own law, not the normal one: binomial for independent losses, and for bursts (``burst``,
    as :func:`loss_fraction_se`) the law of the Markov chain's count, by dynamic programming over the due
    samples from the chain's stationary state. The normal test with :func:`loss_fraction_se` called 0.3
    to 1.9% of correct configs "differs" at ``z = 3.04`` (0.24% allowed), the few bursts of a rare loss
    making the count skewed. Above 20,000 due samples the normal test (with a one-sample allowance) stands
    in.

    Example:
        >>> loss_fraction_ok(100, 1000, 0.1, 3.0), loss_fraction_ok(160, 1000, 0.1, 3.0)
        (True, False)
        >>> loss_fraction_ok(150, 1000, 0.1, 3.0, burst=3.0)    # 2.5 standard errors of bursty losses
        True
        >>> loss_fraction_ok(160, 1000, 0.1, 3.0, at_least=True)   # skipped samples count too
        True
        >>> loss_fraction_ok(50, 1000, 0.1, 3.0, at_least=True)
        False
    """
    from scipy.stats import binom, norm

    if due <= 0:
        return True
    level = float(norm.sf(z))
    length = _number(burst) if burst is not None else None
    if burst is not None and length is None:  # drawn per episode: the runs seen
        length = float(np.mean(runs)) if runs is not None and len(runs) else 1.0
    if not 0.0 < p < 1.0:
        return (at_least or lost == 0) if p <= 0.0 else (lost == due)
    if length is None:
        tails = (binom.cdf(lost, due, p), 1.0 if at_least else binom.sf(lost - 1, due, p))
        return bool(min(tails) >= level)
    if due > 20000:
        error = lost / due - p
        return (-error if at_least else abs(error)) <= z * loss_fraction_se(p, due, burst, runs) + 1.0 / due
    low, high = _chain_tails(int(lost), int(due), float(p), float(length))
    return bool(min(low, 1.0 if at_least else high) >= level)


@functools.lru_cache(maxsize=64)
def _chain_tails(lost: int, due: int, p: float, length: float) -> tuple[float, float]:
    """``P(K <= lost)`` and ``P(K >= lost)`` for the count ``K`` of lost samples among ``due`` of the
    two-state chain (docs/error_model.md), started from its stationary state."""
    stay, q = 1.0 - 1.0 / length, p / (length * (1.0 - p))
    sd = loss_fraction_se(p, due, length) * due
    top = int(min(due, max(lost, math.ceil(p * due + 15.0 * sd + 20.0)))) + 1  # the mass beyond is nil
    kept, gone = np.zeros(top + 1), np.zeros(top + 1)
    kept[0], gone[1] = 1.0 - p, p
    for _ in range(due - 1):
        moved = np.zeros(top + 1)
        moved[1:] = gone[:-1] * stay + kept[:-1] * q
        kept, gone = gone * (1.0 - stay) + kept * (1.0 - q), moved
    law = kept + gone
    return float(law[: lost + 1].sum()), float(law[lost:].sum())


def skips_samples(options: Any) -> bool:
    """Whether jitter may skip samples in the reading: a read whose shift shrinks shows a newer snapshot
    than the next one, and the samples between are never shown, a gap like a lost sample's."""
    jitter = getattr(options, "jitter", 0.0)
    return jitter is not None and (_number(jitter) is None or _number(jitter) > 0)


def _g(x: float) -> str:
    return f"{x:.3g}"


def _text(value: Any) -> str:
    number = _number(value)
    return _g(number) if number is not None else "randomized"


def error_model_rows(
    options: Any, component: int, est: dict[str, Any], dt: float, z: float
) -> tuple[dict[str, tuple[str, str, str]], list[str]]:
    """The rows (configured, estimate, verdict) for the configured ``noise_density``, ``bandwidth``,
    ``scale_factor`` and ``dropout_burst`` of one channel, from :func:`regress_filter`'s fit in
    ``est["filter"]``, the scale factor's fit in ``est["scale"]`` and the loss runs in ``est["runs"]``; a
    verdict says "differs" beyond ``z`` standard errors (and, for the density and the bandwidth, 10%).

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
        # own samples between two delivered ones: n = dt / T_s per step (real-valued) below dt, one per due
        # sample above it
        m = fit["gap"] * dt / ts if ts < dt else max(1, round(fit["gap"] * dt / ts))
        resolution = _component(getattr(options, "resolution", 0.0), component)
        q = _number(resolution) if resolution is not None else 0.0
        if q is None:  # drawn per episode: its largest value
            q = float(resolution.bounds[1]) if hasattr(resolution, "bounds") else 0.0
        slow, members, at = drift_terms(options, component, dt), fit.get("members"), est.get("drift_at")
        wander = 0.0  # the drift's wander the blocks keep, per degree of freedom
        if slow is not None and members is not None and at is not None:
            wander = within_block_variance(members, at, slow) / max(fit.get("dof", 1), 1)
        filter_rows(rows, notes, conf, fit, m, ts, z, q=q or 0.0, drift=wander)
    if "scale_factor" in conf:
        rows["scale factor"] = _scale_row(conf["scale_factor"], est.get("scale") or {}, z)
    if "dropout_burst" in conf and skips_samples(options):
        rows["mean burst"] = (_text(conf["dropout_burst"]), "n/a", "not identifiable (jitter skips samples)")
    elif "dropout_burst" in conf:
        rows["mean burst"] = _burst_row(conf["dropout_burst"], est.get("runs", np.zeros(0)), z)
    reference = est.get("reference")
    if reference:
        terms = [
            (f"filter (a^m = {_g(reference['slope'])})", "the filter's lag on the moving signal")
            if reference.get("lowpass")
            else None,
            (f"scale (1 + k = {_g(reference['factor'])})", "the k·x term")
            if reference.get("scale")
            else None,
        ]
        terms = [t for t in terms if t]
        notes.append(
            "noise std, bias and drift are measured against the ground truth through the fitted "
            + " and ".join(t[0] for t in terms)
            + ", so "
            + " and ".join(t[1] for t in terms)
            + (" stay" if len(terms) > 1 else " stays")
            + " out of them; their ± include the fit's own error"
        )
    return rows, notes


def _scale_row(value: Any, fit: dict[str, Any], z: float) -> tuple[str, str, str]:
    """The scale-factor row: ``k`` from the regression of the samples on the ground truth."""
    want = _number(value)
    conf = _g(want) if want is not None else "randomized"
    k, k_se = fit.get("scale", float("nan")), fit.get("scale_se", float("nan"))
    if not (math.isfinite(k) and math.isfinite(k_se)):
        return conf, "n/a", "the ground truth does not move in this trace"
    got = f"{_g(k)} ± {_g(k_se)}"
    if want is None:
        return conf, got, "this episode's value"
    ok = abs(k - want) <= z * k_se + 1e-6  # + float32's rounding of the readings
    return conf, got, "ok" if ok else f"differs (expected {_g(want)})"


def _burst_row(value: Any, runs: Any, z: float) -> tuple[str, str, str]:
    """The mean-burst row. Runs of a two-state chain are geometric with mean ``L``, so ``r`` runs sum to
    ``r`` plus a negative binomial ``NB(r, 1/L)``: the verdict is that exact two-sided test at the level of
    ``z`` (the normal one was 2 to 5 times too eager on the 3 to 15 runs a short trace shows, the sum
    being skewed)."""
    from scipy.stats import nbinom, norm

    runs = np.asarray(runs, float)
    want = _number(value)
    got = (
        f"{_g(runs.mean())} ± {_g(runs.std(ddof=1) / math.sqrt(runs.size))} ({runs.size} runs)"
        if (runs.size > 1)
        else f"{runs.size} run{'s' * (runs.size != 1)}"
    )
    if want is None:
        return "randomized", got, "this episode's value"
    if runs.size < 2:
        return _g(want), got, "too few runs of lost samples: record more with --steps"
    failures = round(runs.sum()) - runs.size  # the lost samples beyond the first of each run
    if want <= 1.0:
        ok = failures == 0
    else:
        tail = min(
            nbinom.cdf(failures, runs.size, 1.0 / want), nbinom.sf(failures - 1, runs.size, 1.0 / want)
        )
        ok = bool(tail >= norm.sf(z))  # two-sided at 2 sf(z), as a z test at z standard errors
    return _g(want), got, "ok" if ok else f"differs (expected {_g(want)})"
