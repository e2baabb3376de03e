"""``inspect``'s bandwidth and noise-density rows (:func:`filter_rows`), from the regression of each
sample's residual on the previous one (:func:`~sensorgym.app.inspect_fits.regress_filter`): its slope is
the filter's ``a^m`` (the bandwidth), its scatter the noise behind the filter (the density), with the
rounding's and the drift's share of the scatter taken out (docs/error_model.md; the derivation is in
:mod:`~sensorgym.app.inspect_error_model`).

Example:
    >>> rows, notes = {}, []
    >>> fit = {"slope": 0.0, "slope_se": 0.01, "spread": 0.1, "gap": 1, "pairs": 2000}
    >>> filter_rows(rows, notes, {"noise_density": 0.01}, fit, m=1.0, ts=0.01, z=3.0)
    >>> rows["noise density"]
    ('0.01', '0.01 ± 0.000158', 'ok')
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from .inspect_options import as_number as _number

__all__ = ["filter_rows"]


def _g(x: float) -> str:
    return f"{x:.3g}"


def _text(value: Any) -> str:
    number = _number(value)
    return _g(number) if number is not None else "randomized"


def filter_rows(
    rows: dict[str, tuple[str, str, str]],
    notes: list[str],
    conf: dict[str, Any],
    fit: dict[str, Any],
    m: float,
    ts: float,
    z: float,
    q: float = 0.0,
    drift: float = 0.0,
) -> None:
    """The bandwidth and noise-density rows from the consecutive samples' regression. With a quantization
    step ``q`` the residual ``u_k - c v_k`` also carries the rounding errors ``e_k - c e_{k-1}``, of variance
    ``q^2 / 12 (1 + c^2)`` where the signal moves across steps of the grid between samples (the rounding
    errors are then uniform and independent): it is taken out of the scatter before the density; where
    the scatter is not above it by the threshold's standard errors, the density is bounded only. ``drift``:
    the variance per degree of freedom that the configured random walk and Gauss-Markov bias leave in the
    scatter (``(1 - c)^2`` of their wander within the regression's blocks), taken out the same way."""
    c, c_se = fit["slope"], fit["slope_se"]
    filtered = "bandwidth" in conf
    identified = math.isfinite(c) and math.isfinite(c_se) and c - z * c_se > 0.0
    want_bw = _number(conf.get("bandwidth"))
    agrees = False  # the trace agrees with the configured filter (or cannot tell it from none)
    if filtered:
        rows["bandwidth"] = _bandwidth_row(conf["bandwidth"], c, c_se, m, ts, z)
        agrees = want_bw is not None and rows["bandwidth"][2] in ("ok", "not identifiable from this trace")
    if "noise_density" in conf:
        scatter = _Scatter.of(fit, q, drift)
        through = functools.partial(_density_at, filtered=filtered, bandwidth=want_bw, m=m, ts=ts)
        state = (filtered, agrees, identified, want_bw)
        _density_row(rows, notes, conf, fit, scatter, through, state, z, q, drift)
    m_text = _g(m) if m != int(m) else str(int(m))
    notes.append(
        f"noise density and bandwidth from {fit['pairs']} pairs of consecutive samples {m_text} own "
        f"sample{'s' * (m != 1)} apart (T_s = {_g(ts)} s): each residual against the ground truth "
        "regressed on the previous one gives the filter's a^m, its scatter the noise"
        + ("; quantization, drift and jitter add to the scatter" if filtered else "")
    )
    if filtered and math.isfinite(c) and math.isfinite(c_se) and not identified:
        top = -math.log(min(z * c_se, 1.0 - 1e-12)) / (2.0 * math.pi * m * ts) if c_se > 0 else float("inf")
        notes.append(
            f"a^m = {_g(c)} ± {_g(c_se)} includes 0 (at {z:.2f} standard errors): a filter read {m_text} own "
            f"samples apart shows in this trace only up to about {_g(top)} Hz, and any bandwidth above the "
            "estimate's bound fits it; more steps (--steps) or a slower read narrow it"
        )


@dataclass
class _Scatter:
    """The regression's scatter ``spread`` and what the rounding and the drift leave of it: ``left`` and
    ``left_se`` (the variance left for the noise and its error), ``rounding`` (their share, taken out) and
    ``dof`` (the regression's degrees of freedom)."""

    spread: float
    left: float
    left_se: float
    rounding: float
    dof: int

    @classmethod
    def of(cls, fit: dict[str, Any], q: float, drift: float) -> _Scatter:
        c, s = fit["slope"], fit["spread"]
        dof = max(fit.get("dof", fit["pairs"] - 2), 1)  # fewer with an intercept per block (a drift)
        # the rounding's share of the scatter, and what is left of it for the noise
        rounding = q * q / 12.0 * (1.0 + min(max(c, 0.0), 1.0) ** 2) if q and math.isfinite(c) else 0.0
        rounding += drift * (1.0 - min(max(c, 0.0), 1.0)) ** 2 if math.isfinite(c) else 0.0
        left, left_se = s * s - rounding, s * s * math.sqrt(2.0 / dof)
        return cls(s, left, left_se, rounding, dof)


def _density_at(
    slope: float | None, spread: float, *, filtered: bool, bandwidth: float | None, m: float, ts: float
) -> float:
    """The noise density that a scatter ``spread`` of the regression means through the filter of
    ``a^m = slope`` (None: the configured ``bandwidth``; no filter configured: none)."""
    # std(eps) = sigma (1 - a) sqrt((1 - a^2m) / (1 - a^2)); sigma = N / sqrt(T_s)
    if not filtered:
        a = 0.0
    elif slope is None:  # the configured filter
        a = math.exp(-2.0 * math.pi * bandwidth * ts)
    else:
        a = min(max(slope, 1e-12), 0.999) ** (1.0 / m)
    return spread / ((1 - a) * math.sqrt((1 - a ** (2 * m)) / (1 - a * a))) * math.sqrt(ts)


def _density_row(
    rows: dict[str, tuple[str, str, str]],
    notes: list[str],
    conf: dict[str, Any],
    fit: dict[str, Any],
    sc: _Scatter,
    through: Any,
    state: tuple[bool, bool, bool, float | None],
    z: float,
    q: float,
    drift: float,
) -> None:
    """The noise density row: the scatter through the configured filter where the trace agrees with it,
    else through the fitted one; only a bound where the rounding or the drift hides the noise."""
    filtered, agrees, identified, want_bw = state
    c, c_se = fit["slope"], fit["slope_se"]
    hidden = bool(sc.rounding) and sc.left - z * sc.left_se <= 0.0
    s = math.sqrt(max(sc.left, 0.0)) if sc.rounding and not hidden else sc.spread
    want = _number(conf["noise_density"])
    if filtered and not agrees and not identified:
        why = "the bandwidth is drawn per episode" if want_bw is None else "the bandwidth differs"
        rows["noise density"] = (_text(conf["noise_density"]), "n/a", f"not identifiable ({why})")
    elif hidden:  # the scatter is the rounding's: only an upper bound
        slope = None if (filtered and agrees) else c
        bound = through(slope, math.sqrt(max(sc.left + z * sc.left_se, 0.0)))
        if want is None:
            verdict = "this episode's value"
        elif want <= bound:
            what = f"the quantization step {_g(q)}" if q else "the drift"
            verdict = f"not identifiable ({what} hides it)"
        else:
            verdict = f"differs (expected {_g(want)}: the scatter is below it)"
        rows["noise density"] = (_text(conf["noise_density"]), f"< {_g(bound)}", verdict)
        rounded = f"rounding to steps of {_g(q)} (q/√12 = {_g(q / math.sqrt(12.0))} per sample)"
        notes.append(
            f"the regression's scatter {_g(fit['spread'])} is what "
            + (rounded if q else "")
            + (" and " if q and drift else "")
            + ("the drift's wander within the regression's blocks" if drift else "")
            + f" leaves: the noise under it shows only as the bound < {_g(bound)}"
        )
    else:
        # through the configured filter where the trace agrees with it (a^m near 0 is a poor divisor:
        # the fitted one turned a 3-standard-error a^m into a 4.6-standard-error density), else through
        # the fitted one, whose own error comes with it (the density at a^m one standard error away)
        slope = None if (filtered and agrees) else c
        density = through(slope, s) if (slope is None or math.isfinite(slope)) else float("nan")
        from_a = (
            abs(through(c + c_se, s) - through(c - c_se, s)) / 2 if filtered and slope is not None else 0.0
        )
        # the scatter's own error: 1/sqrt(2 dof) of it, more where the rounding's share came out of it
        relative = sc.left_se / (2.0 * sc.left) if sc.rounding else 1.0 / math.sqrt(2.0 * sc.dof)
        density_se = math.hypot(density * relative, from_a)
        got = f"{_g(density)} ± {_g(density_se)}"
        if want is None:
            rows["noise density"] = ("randomized", got, "this episode's value")
        else:
            ok = abs(density - want) <= max(z * density_se, 0.1 * want)
            rows["noise density"] = (_g(want), got, "ok" if ok else f"differs (expected {_g(want)})")
        if filtered and slope is None:
            notes.append(
                "the noise density is the regression's scatter through the configured "
                f"{_g(want_bw)} Hz filter ("
                + ("the trace agrees with it)" if identified else "the trace cannot identify it)")
            )


def _bandwidth_row(value: Any, c: float, c_se: float, m: float, ts: float, z: float) -> tuple[str, str, str]:
    """The bandwidth row. The verdict compares the regression's ``a^m`` with the configured filter's,
    within ``z`` of its standard errors (or 10% of the bandwidth): that is where the fit is normal, while
    the bandwidth ``-ln(a^m) / (2 pi m T_s)`` is not. Where the interval of ``a^m`` includes 0 the trace
    cannot tell a fast filter from none: the estimate is the interval's bound (``> f Hz``) and the verdict
    "not identifiable from this trace", unless the configured filter is slower than that bound."""
    want = _number(value)
    conf = _g(want) + " Hz" if want is not None else "randomized"
    if not (math.isfinite(c) and math.isfinite(c_se)):
        return conf, "n/a", "too few consecutive samples"
    scale = 2.0 * math.pi * m * ts

    def bandwidth(slope: float) -> float:
        return -math.log(slope) / scale if slope < 1.0 else 0.0

    low, high = c - z * c_se, c + z * c_se
    expected = math.exp(-want * scale) if want is not None else None
    if low <= 0.0:  # a fast filter or none: only a lower bound on the bandwidth
        if high >= 1.0:
            return conf, "any", "not identifiable from this trace"
        bound = bandwidth(high)
        text = f"> {_g(bound)} Hz"
        if want is None:
            return conf, text, "this episode's value"
        if expected > high:
            return (
                conf,
                text,
                f"differs (expected {_g(want)} Hz: the trace's filter is faster than {_g(bound)} Hz)",
            )
        return conf, text, "not identifiable from this trace"
    if low >= 1.0:
        return conf, "a^m >= 1", "differs: the residual drifts (no stationary filter)"
    got = bandwidth(c)
    up, down = bandwidth(c - c_se) - got, got - bandwidth(min(c + c_se, 1.0))  # one standard error of a^m
    if abs(up - down) <= 0.25 * max(up, down):
        text = f"{_g(got)} ± {_g((up + down) / 2)} Hz"
    else:
        text = f"{_g(got)} +{_g(up)}/-{_g(down)} Hz"
    if want is None:
        return conf, text, "this episode's value"
    ok = abs(c - expected) <= z * c_se or abs(got - want) <= 0.1 * want
    return conf, text, "ok" if ok else f"differs (expected {_g(want)} Hz)"
