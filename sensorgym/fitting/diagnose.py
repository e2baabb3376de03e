"""What a fitted model leaves unexplained, and why (issue 33 item 14: a real bench log's closed loop missed
the band at half its tau, 40-70% under the log near 4 s, and said nothing).

The tau of the closed-loop check where the fitted config (or, without the simulation, the fitted model)
lies outside the log's 95% band are grouped into ranges, and each range gets the cause the log shows:

* **a narrow-band component** (a vibration, a resonance, an electrical interference): the window's Welch
  spectrum stands above the fitted model's (:func:`~sensorgym.fitting.model.psd`) in a band of
  frequencies, beyond what chance allows in any bin of the spectrum (``_FALSE_BINS`` per log); a
  component near ``f`` shapes the Allan deviation from about ``0.15 / f`` to ``1.2 / f`` (a sine's peaks
  at ``0.37 / f``). BROAD's myon IMU has one near 27 Hz on its gyro z;
* **a drift at the longest tau** beyond the model's terms (a temperature change, a flicker floor wider
  than one Gauss-Markov bias, a walk too slow for the window), or the few long averages falling low;
* **neighbouring samples unlike white noise through one first-order filter** at the shortest tau
  (anti-correlated: the log falls faster than white noise; smoothed more: a filter of higher order);
* **a flat floor** (flicker, 1/f) wider than one Gauss-Markov bias covers;
* else the shape, which no term of the error model follows.

Example:
    >>> import numpy as np
    >>> from sensorgym.fitting.model import ModelParams
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(40_000) * 0.005
    >>> y = rng.normal(0.0, 0.05, t.size) + 0.02 * np.sin(2 * np.pi * 27.0 * t)  # white and a 27 Hz line
    >>> line = spectral_excess(y, 0.005, ModelParams(noise_density=0.05 * np.sqrt(0.005)))
    >>> round(line.frequency), round(100 * line.share)
    (27, 7)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import require
from .model import Gaps, ModelParams, psd
from .warmup import autocovariance

__all__ = ["CHANCE", "Component", "Unexplained", "explain", "spectral_excess", "unexplained_line"]

_FALSE_BINS = 1e-3  # bins per log that chance alone puts above the line's threshold
_MIN_SHARE = 0.005  # a component under half a percent of the variance is not named
_SEGMENT = 2048
_FLAT = 0.2  # |d log adev / d log tau| under which the log's deviation is a floor
_CHANCE_DISPERSION = 1.5  # a misfit under which a miss without a cause is the log's scatter
CHANCE = "chance"
_SHORT = 8.0  # tau up to this many times the shortest of the check are shaped by a few samples' correlation


@dataclass
class Component:
    """A narrow-band component of the window: its power-weighted ``frequency`` (Hz), the band ``low`` to
    ``high`` (Hz) where the spectrum stands above the model's, and its ``share`` of the variance."""

    frequency: float
    low: float
    high: float
    share: float

    def taus(self) -> tuple[float, float]:
        """The averaging times whose Allan deviation it shapes."""
        return 0.15 / self.high, 1.2 / self.low


@dataclass
class Unexplained:
    """A range of the check's ``taus`` outside the log's band: the log ``above`` the model or below it,
    the ``worst`` relative difference (model over log, minus 1) and the likely ``cause``."""

    taus: tuple[float, float]
    above: bool
    worst: float
    cause: str


def spectral_excess(
    values: np.ndarray, interval: float, params: ModelParams, gaps: Gaps | None = None
) -> Component | None:
    """The strongest narrow-band excess of the window's spectrum over the fitted model's, or None
    (``interval``: the mean interval between received samples; the model's spectrum is on them). The
    ratio of the two is read at several resolutions (averaged over 1 to 16 bins: a resonance a few Hz
    wide shows only when its bins are pooled), each against the chi-square quantile that chance passes in
    ``_FALSE_BINS`` of a log's bins."""
    sig = require("scipy.signal", "fit", "the spectrum of the window")
    chi2 = require("scipy.stats", "fit", "the spectrum of the window").chi2
    values = np.asarray(values, float)
    segment = min(_SEGMENT, 2 ** int(math.log2(max(len(values) // 8, 16))))
    f, welch = sig.welch(values - values.mean(), fs=1.0 / interval, nperseg=segment)
    ts = interval / (gaps.mean if gaps is not None else 1.0)
    model = 2.0 * psd(params, np.clip(f * interval, 1e-12, 0.5), ts, gaps) * interval
    ratio = welch / np.maximum(model, 1e-300)
    dof = max(2.0, 1.8 * len(values) / segment)  # Hann windows overlapping by half
    above = np.zeros(len(f), dtype=bool)
    for width in (1, 2, 4, 8, 16):
        smooth = np.convolve(ratio, np.ones(width) / width, mode="same")
        strong = chi2.ppf(1.0 - _FALSE_BINS * width / len(f) / 5.0, dof * width) / (dof * width)
        hit = smooth > strong
        # the band: the bins around a hit whose smoothed ratio stays clearly above 1
        weak = smooth > 1.0 + 2.0 * math.sqrt(2.0 / (dof * width))
        above |= _grow(hit, weak)
    above[:3] = False  # the lowest bins are the drift's, not a component's
    best: Component | None = None
    df = float(f[1] - f[0])
    for a, b in _ranges(above):
        excess = np.maximum(welch[a:b] - model[a:b], 0.0)
        share = float(excess.sum() * df / values.var())
        centre = float(np.sum(f[a:b] * excess) / max(excess.sum(), 1e-300))
        if share >= _MIN_SHARE and (best is None or share > best.share):
            best = Component(centre, float(f[a]), float(f[b - 1]), share)
    return best


def _grow(seeds: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The runs of ``allowed`` that hold a seed."""
    out = np.zeros(len(seeds), dtype=bool)
    for a, b in _ranges(allowed):
        if seeds[a:b].any():
            out[a:b] = True
    return out


def _ranges(outside: np.ndarray) -> list[tuple[int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate([[0], outside.astype(np.int8), [0]])))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def explain(
    taus: np.ndarray,
    log: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    model: np.ndarray,
    component: Component | None,
    values: np.ndarray,
    params: ModelParams,
    ts: float,
    dispersion: float = 1.0,
) -> list[Unexplained]:
    """The ranges of ``taus`` where ``model`` lies outside ``[lo, hi]``, each with its cause (``values``:
    the window's samples, for their correlation; ``params``: the fitted model, sampled every ``ts``;
    ``dispersion``: the fit's misfit, near 1 where the log varies about the model as chance allows)."""
    outside = (model < lo) | (model > hi)
    ranges = _ranges(outside)
    out = []
    for a, b in ranges:
        above = bool(np.mean(log[a:b] > model[a:b]) >= 0.5)
        rel = model[a:b] / log[a:b] - 1.0
        worst = float(rel[int(np.argmax(np.abs(rel)))])
        span = (float(taus[a]), float(taus[b - 1]))
        # one tau just outside (by under half the band's width on its side) is what a 95% band allows
        # tau just outside (by under half the band's width on their side) are what a 95% band allows
        edge = np.where(model[a:b] > hi[a:b], hi[a:b], lo[a:b])
        near = bool(np.all(np.abs(model[a:b] - edge) < 0.5 * np.abs(edge - log[a:b])))
        calm = dispersion <= _CHANCE_DISPERSION
        context = (component, values, params, ts, near and (b - a == 1 or (calm and b - a <= 2)))
        out.append(Unexplained(span, above, worst, _cause(taus, log, a, b, above, context)))
    return out


def _correlations(values: np.ndarray, params: ModelParams, ts: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The window's correlation of samples 1, 2, 3 apart, the fitted model's, and the former's standard
    error."""
    y = np.asarray(values, float) - np.mean(values)
    power = float(y @ y)
    measured = np.array([float(y[:-k] @ y[k:]) / power for k in (1, 2, 3)])
    cov = autocovariance(params, ts, np.arange(4))
    return measured, cov[1:] / cov[0], 1.0 / math.sqrt(len(y))


def _cause(taus: np.ndarray, log: np.ndarray, a: int, b: int, above: bool, context) -> str:
    component, values, params, ts, chance = context
    if component is not None:
        low, high = component.taus()
        what = (
            f"a narrow-band component near {component.frequency:.3g} Hz ({100 * component.share:.2g}% of the "
            f"variance, {component.low:.3g}-{component.high:.3g} Hz: a vibration, a resonance or an "
            "interference), which no term of the error model makes"
        )
        if above and taus[a] <= high and taus[b - 1] >= low:
            return what
        if not above and taus[a] >= low:
            return (
                f"{what}: it raises the shortest tau, where the white noise is read, so the model's white "
                "noise lies above the log's at longer tau"
            )
    if b == len(taus):
        if above:
            return (
                "a drift at the longest tau beyond the model's terms (a temperature change, a flicker "
                "floor wider than one Gauss-Markov bias, or a walk the window is too short to pin down)"
            )
        return (
            "the log's few averages at the longest tau fall below the drift the model carries (chance, "
            "or a drift the window cannot tell from a slower one: see the alternative)"
        )
    measured, fitted, se = _correlations(values, params, ts)
    if not above and measured[0] < fitted[0] - 3.0 * se:
        # anti-correlated neighbours: the deviation falls faster than white noise's, below the white
        # noise the model reads at the shortest tau
        return (
            f"the samples are anti-correlated (lag 1: {measured[0]:+.3f}, the model's {fitted[0]:+.3f}): the "
            "log's deviation falls faster than white noise's, below the model read at the shortest tau; "
            "no term of the error model makes it (the sensor's own processing: a decimating filter, a "
            "resampling)"
        )
    if taus[b - 1] <= _SHORT * taus[0] and np.max(np.abs(measured - fitted)) > 3.0 * se:
        # a few samples apart: their correlation is what shapes these tau
        shown = ", ".join(f"{m:+.3f}" for m in measured)
        model = ", ".join(f"{m:+.3f}" for m in fitted)
        return (
            f"the samples' correlation 1, 2 and 3 apart ({shown}; the model's {model}) is not one "
            "first-order filter's: the sensor's own processing (a higher-order or decimating filter, a "
            "resampling), which no term of the error model makes"
        )
    if chance:
        return (
            CHANCE + ": tau just outside, as a 95% band leaves about one in twenty (and neighbouring tau, "
            "which share their data, together)"
        )
    lo_i, hi_i = max(a - 1, 0), min(b, len(taus) - 1)
    slope = math.log(log[hi_i] / log[lo_i]) / math.log(taus[hi_i] / taus[lo_i])
    if above and abs(slope) < _FLAT:
        return (
            "a flat floor of the deviation (a flicker, 1/f, bias instability) wider than the one "
            "Gauss-Markov bias of the error model covers"
        )
    if above:
        return (
            "more variance than the white noise and the fitted drift give: a bias instability (a flicker "
            "floor, or a Gauss-Markov bias this window cannot pin down) that the fitted config lacks"
        )
    if params.random_walk_density > 0 or params.bias_instability > 0:
        return "the fitted drift rises earlier than the log's deviation: it takes part of a flatter floor"
    return "a shape no term of the error model follows"


def unexplained_line(channel: str, items: list[Unexplained], inside: int, total: int) -> str | None:
    """The warning that names what a channel's model lacks (None where every miss is chance)."""
    if all(u.cause.startswith(CHANCE) for u in items):
        return None
    parts = []
    for u in items:
        span = f"{u.taus[0]:.3g} s" if u.taus[0] == u.taus[1] else f"{u.taus[0]:.3g}-{u.taus[1]:.3g} s"
        side = "below" if u.worst < 0 else "above"
        parts.append(f"tau {span} (the model {100 * abs(u.worst):.0f}% {side} the log): {u.cause}")
    return f"{channel}: inside the log's 95% band at {inside} of {total} tau; unexplained: " + "; ".join(
        parts
    )
