"""A sensor's own rate and its lost samples, from the time stamps alone.

``T_s`` is the median interval. An interval of ``m * T_s`` (``m = round(interval / T_s)``) with ``m >= 2``
holds ``m - 1`` lost samples; the loss fraction is ``p = lost / (lost + received)`` and the mean burst
``L`` is the mean length of a run of lost samples (one run per long interval). These are the
options ``update_period``, ``dropout`` and ``dropout_burst``.

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

__all__ = ["Timing", "analyse_timing", "loss_runs"]


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

    @property
    def slots(self) -> int:
        """Sample slots the log spans (received + lost)."""
        return self.received + self.lost


def loss_runs(steps: np.ndarray) -> np.ndarray:
    """Runs of lost samples from the gaps between received samples, in samples: ``m - 1`` for each gap of
    ``m >= 2`` sample intervals (``steps`` are the gaps as whole numbers of intervals)."""
    steps = np.asarray(steps)
    return (steps[steps >= 2] - 1).astype(np.int64)


def analyse_timing(times: np.ndarray) -> Timing:
    """Estimate ``T_s``, the loss fraction and the mean burst from increasing time stamps (seconds)."""
    times = np.asarray(times, dtype=np.float64)
    intervals = np.diff(times)
    period = float(np.median(intervals))
    ratio = intervals / period
    runs = loss_runs(np.rint(ratio))
    lost, received = int(runs.sum()), len(times)
    slots = lost + received
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
    )
