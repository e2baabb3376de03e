"""A sensor's own rate and its lost samples, from the time stamps alone.

``T_s`` is the median interval. An interval of ``m * T_s`` with ``m >= 2`` holds ``m - 1`` lost samples;
the loss fraction is ``p = lost / slots`` (``slots = received + lost + invalid``) and the mean burst
``L`` is the mean length of a run of lost samples (one run per long interval). These are the options
``update_period``, ``dropout`` and ``dropout_burst``.

Counting ``m``: where every interval is within a quarter of ``T_s`` of a whole number of them (or under
1.25 ``T_s``), ``m = round(interval / T_s)``. Otherwise the stamps jitter, and an interval alone cannot
tell a late stamp from a lost sample (with stamps off by up to ±0.4 ``T_s`` one interval spans 0.2 to 1.8
``T_s``, a lost sample 1.2 to 2.8), so each stamp is placed on the sensor's own grid instead: the grid's
period is the one near ``T_s`` at which the stamps' phases agree best (searched over ever more stamps: the
mean period, which lost samples and a clock's corrections move off the median), its phase the stamps'
circular mean over their neighbours, and a stamp's slot is its time on that grid, rounded (two stamps
in one slot beside an empty one are moved apart). A stamp off the grid by less than half an interval lands
in its own slot, so jitter loses nothing and a lost sample leaves its slot empty. The grid must be known to
well within what the jitter leaves of half a slot: against logs whose lost samples are known
(tests/fitting/test_timing_jitter.py) the count is exact for stamps off by up to ±0.3 ``T_s`` from 64 stamps
on and up to ±0.4 ``T_s`` from about 500, with clocks off by 200 ppm and wandering by 20 ppm; with ±0.4
``T_s`` over only 64 to 128 stamps, 3 to 26 logs in 100 gain or lose a sample or more (200 logs each, 0 to
10% lost).

Samples whose value was unusable (``invalid``: nan or inf at a time stamp) fill their slots: they are
counted apart, neither received nor lost.

Uncertainties: losses come in runs, so they are counted in runs. With ``R`` runs of mean length ``L`` and
standard deviation ``s_L`` among ``n`` sample slots, ``se(L) = s_L / sqrt(R)`` and, counting the runs as
Poisson, ``se(p) = sqrt(R (s_L^2 + L^2)) / n``. Without any loss, ``p`` is reported as 0 with the 95%
upper bound ``3 / n`` (the rule of three) and ``L`` is not identifiable.

Example:
    >>> import numpy as np
    >>> t = np.delete(np.arange(100) * 0.01, [10, 11, 50])  # a run of two and a run of one lost
    >>> timing = analyse_timing(t)
    >>> round(timing.sample_interval, 6), timing.lost, round(timing.dropout, 3), timing.burst
    (0.01, 3, 0.03, 1.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Timing", "analyse_timing", "loss_runs", "slot_steps"]


@dataclass
class Timing:
    """What the time stamps of one channel say.

    Attributes:
        sample_interval: ``T_s``, the median interval (s).
        received: samples in the log.
        lost: samples missing between them.
        dropout: ``p = lost / (lost + received)``.
        dropout_se: its standard error (0 when nothing was lost: see ``dropout_upper``).
        dropout_upper: a 95% upper bound on ``p`` (``3 / n`` without losses).
        burst: the mean run of lost samples, ``None`` without losses (not identifiable).
        burst_se: its standard error (``None`` with fewer than two runs).
        runs: the length of every run of lost samples, in log order.
        intervals: every interval in units of ``T_s`` (for the timing figure).
        interval_spread: the interquartile range of the intervals over ``T_s`` (time-stamp jitter).
        invalid: samples at a time stamp whose value was not a number (nan, inf): neither received nor
            lost.
    """

    sample_interval: float
    received: int
    lost: int
    dropout: float
    dropout_se: float
    dropout_upper: float
    burst: float | None
    burst_se: float | None
    runs: np.ndarray
    intervals: np.ndarray
    interval_spread: float
    invalid: int = 0

    @property
    def slots(self) -> int:
        """Sample slots the log spans (received + lost + invalid)."""
        return self.received + self.lost + self.invalid


def loss_runs(steps: np.ndarray) -> np.ndarray:
    """Runs of lost samples from the gaps between received samples, in samples: ``m - 1`` for each gap of
    ``m >= 2`` sample intervals (``steps`` are the gaps as whole numbers of intervals)."""
    steps = np.asarray(steps)
    return (steps[steps >= 2] - 1).astype(np.int64)


_CLEAR = 0.25  # an interval within this many T_s of a whole number of them is that number
_SEARCH = 0.1  # how far the mean period may lie from the median interval (relative)
_SIGNIFICANT = 16.0  # |resultant|^2 / n of a phase shared by n stamps (about 1 for phases at random)


def _resultant(cycles: np.ndarray) -> complex:
    """The sum of the unit phasors of ``cycles`` modulo 1: its length is how well they share one phase."""
    return complex(np.exp(2j * np.pi * (cycles - np.floor(cycles))).sum())


def _peak(elapsed: np.ndarray, period: float, below: float, above: float) -> tuple[float, float]:
    """``(period, |resultant|^2 / n)`` at the period within ``period * (1 - below)`` to ``period * (1 +
    above)`` where the phases of ``elapsed`` agree best, on a grid fine enough for them (``1 / (8 n)``),
    refined by a parabola."""
    step = 1.0 / (8.0 * len(elapsed))
    js = np.arange(-int(np.ceil(below / step)), int(np.ceil(above / step)) + 1)
    power = np.array([abs(_resultant(elapsed / (period * (1.0 + step * j)))) for j in js])
    best = int(np.argmax(power))
    i = float(js[best])
    if 0 < best < len(power) - 1:  # the peak between its neighbours: the vertex of a parabola through three
        a, b, c = power[best - 1 : best + 2]
        i += 0.5 * (a - c) / (a - 2 * b + c) if a - 2 * b + c < 0 else 0.0
    return period * (1.0 + step * i), float(power[best]) ** 2 / len(elapsed)


def _mean_period(times: np.ndarray, period: float) -> float:
    """The period of the grid the stamps lie on: the one near ``period`` (the median interval) at which
    their phases agree best. Searched first from 10% below the median (lost samples lengthen the median
    interval, and a clock's corrections can sit below it) to the median's own uncertainty above it (from
    the spread of the intervals, plus 1%), over enough stamps for the jitter that spread shows; then over
    4 times as many stamps each round (``n`` stamps tell the period to about ``1 / (8 n)``)."""
    elapsed = times - times[0]
    ratio = np.diff(times) / period
    q1, q3 = np.percentile(ratio, [25, 75])
    spread = (q3 - q1) / 1.35  # the intervals' std; a stamp's own is that over sqrt(2)
    above = min(_SEARCH, 0.01 + 4.0 * spread / np.sqrt(len(ratio)))
    share = np.exp(-((np.pi * spread) ** 2))  # the mean phasor length for Gaussian stamp errors
    n = int(min(len(elapsed), max(256, 128 / share**2)))
    period, peak = _peak(elapsed[:n], period, _SEARCH, above)
    while peak < _SIGNIFICANT and n < len(elapsed):  # too few stamps for this jitter: take more
        n = min(len(elapsed), 2 * n)
        period, peak = _peak(elapsed[:n], period, _SEARCH, above)
    while n < len(elapsed):
        span, n = 2.0 / (8.0 * n), min(len(elapsed), 4 * n)
        period, _ = _peak(elapsed[:n], period, span, span)
    return period


def _untangle(position: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """``slots`` made strictly increasing where two stamps rounded into one slot: the stamps between the
    clash and the nearest empty slot move one slot towards it, on the side where that moves them least
    from ``position`` (their place on the grid, in slots; squared distances). Clashes are rare (a stamp
    off the grid by nearly half a slot), so this loops over them."""
    slots = slots.copy()
    n = len(slots)
    for i in np.flatnonzero(np.diff(slots) <= 0):
        span = 32
        while slots[i + 1] <= slots[i]:
            lo, hi = max(0, i - span), min(n, i + 2 + span)
            steps = np.diff(slots[lo:hi])  # steps[k]: from stamp lo + k to lo + k + 1
            ahead = np.flatnonzero(steps[i + 1 - lo :] >= 2)
            behind = np.flatnonzero(steps[: i - lo] >= 2)
            last = i + 1 + int(ahead[0]) if len(ahead) else (n - 1 if hi == n else None)
            first = lo + int(behind[-1]) + 1 if len(behind) else (0 if lo == 0 else None)
            if last is None and first is None:
                span *= 4
                continue
            forward = np.inf if last is None else np.sum(1 - 2 * (position - slots)[i + 1 : last + 1])
            back = np.inf if first is None else np.sum(1 + 2 * (position - slots)[first : i + 1])
            if forward <= back:
                slots[i + 1 : last + 1] += 1
            else:
                slots[first : i + 1] -= 1
    return slots


def _grid_slots(times: np.ndarray, period: float) -> np.ndarray:
    """The slot of each stamp on the sensor's grid (see the module's docstring): its time in mean periods
    less the grid's local phase, rounded. The phase is a circular mean over enough neighbours to know it
    to about 0.02 periods, ``32 / R^2`` stamps (``R``: the phasor length one stamp's jitter leaves, 0.23
    for stamps off by up to ±0.4 T_s, near 1 for clean ones; measured over 64 stamps, so that a clock
    whose rate wanders does not count as jitter). Stamps that round into one slot are untangled."""
    cycles = (times - times[0]) / _mean_period(times, period)
    z = np.exp(2j * np.pi * (cycles - np.floor(cycles)))
    c = np.concatenate([[0.0], np.cumsum(z)])
    k = np.arange(len(z))

    def local(window: int) -> np.ndarray:
        lo, hi = np.clip(k - window // 2, 0, len(z)), np.clip(k + window // 2 + 1, 0, len(z))
        return (c[hi] - c[lo]) / (hi - lo)

    near = min(64, len(z))
    share = max(float(np.mean(np.abs(local(near)) ** 2)) - 1.0 / near, 1e-4)  # less the noise of a mean
    window = int(np.clip(32.0 / share, 64, len(z)))
    position = cycles - np.unwrap(np.angle(local(window))) / (2 * np.pi)
    return _untangle(position, np.rint(position).astype(np.int64))


def slot_steps(times: np.ndarray, period: float) -> np.ndarray:
    """The whole number of sample intervals ``period`` between consecutive ``times`` (at least 1), robust
    to jittered time stamps (see the module's docstring).

    Example:
        >>> t = np.delete(np.arange(400) * 0.01, [100, 250, 251])
        >>> rng = np.random.default_rng(0)
        >>> jittered = t + rng.uniform(-0.004, 0.004, len(t))  # stamps off by up to 0.4 T_s
        >>> steps = slot_steps(jittered, 0.01)
        >>> int(steps.sum()), np.flatnonzero(steps > 1).tolist(), steps[steps > 1].tolist()
        (399, [99, 248], [2, 3])
    """
    times = np.asarray(times, dtype=np.float64)
    ratio = np.diff(times) / period
    whole = np.rint(ratio)
    if np.all((np.abs(ratio - whole) <= _CLEAR) | (ratio < 1.0 + _CLEAR)):
        return np.maximum(whole, 1).astype(np.int64)
    return np.maximum(np.diff(_grid_slots(times, period)), 1)


def analyse_timing(times: np.ndarray, invalid: np.ndarray | None = None) -> Timing:
    """Estimate ``T_s``, the loss fraction and the mean burst from increasing time stamps (seconds);
    ``invalid``: the time stamps of samples whose value was not a number (they fill their slots)."""
    times = np.asarray(times, dtype=np.float64)
    bad = np.empty(0) if invalid is None else np.asarray(invalid, dtype=np.float64)
    stamps = np.sort(np.concatenate([times, bad])) if len(bad) else times
    intervals = np.diff(stamps)
    period = float(np.median(intervals))
    ratio = intervals / period
    runs = loss_runs(slot_steps(stamps, period))
    lost, received = int(runs.sum()), len(times)
    slots = lost + received + len(bad)
    p = lost / slots
    if len(runs):
        burst = float(runs.mean())
        spread = float(runs.std(ddof=1)) if len(runs) > 1 else 0.0
        burst_se = spread / math.sqrt(len(runs)) if len(runs) > 1 else None
        p_se = math.sqrt(len(runs) * (spread**2 + burst**2)) / slots
        upper = min(1.0, p + 1.96 * p_se)
    else:
        burst, burst_se, p_se, upper = None, None, 0.0, min(1.0, 3.0 / slots)
    q1, q3 = np.percentile(ratio, [25, 75])
    return Timing(
        sample_interval=period,
        received=received,
        lost=lost,
        dropout=p,
        dropout_se=p_se,
        dropout_upper=upper,
        burst=burst,
        burst_se=burst_se,
        runs=runs,
        intervals=ratio,
        interval_spread=float(q3 - q1),
        invalid=len(bad),
    )
