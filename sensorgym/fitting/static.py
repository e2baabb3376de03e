"""The static window of a log: the longest stretch in which the sensor does not move.

Motion shows as a spread of the values above the sensor's own noise. Per channel, the standard
deviation over short windows (``WINDOW_S`` seconds, at least ``MIN_WINDOW`` samples) is compared with the
channel's quiet level: the median deviation of the quietest windows (those within twice the 10th
percentile; a log that is mostly in motion still has a tenth of its windows at rest, or no static
window to speak of). A window is motion when its variance exceeds the quiet level by more than chance
allows: the chi-square quantile at which noise alone would call one sample's window in a hundred logs
of this length motion, with the degrees of freedom of a window of correlated samples (the sensor's own
filter makes neighbours alike: Bartlett's ``(w - 1)(1 - rho^2)/(1 + rho^2)`` for lag-one correlation
``rho``). Slow drift (a random walk, a bias instability) barely changes a short window's
spread, so it stays static. A sample is static when every channel is static at its time; the window
is the longest run of static time that bridges no logging gap (:func:`long_gaps`: the Allan deviation
of received samples models lost samples as the sampler loses them, a few at a time, not a minute without
data, issue 33), trimmed by one short window at each end inside the log.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(3000) * 0.01
    >>> x = rng.normal(0, 0.01, 3000); x[1000:1400] += np.sin(np.arange(400) * 0.05)  # a move at 10-14 s
    >>> start, end = find_static_window([(t, x)])
    >>> bool(14.0 <= start <= 15.0), bool(end > 29.5)
    (True, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import require

__all__ = ["find_static_window", "long_gaps", "moving_std", "without_gaps"]

WINDOW_S = 0.5
MIN_WINDOW = 16
FALSE_ALARMS = 0.01  # windows per log that noise alone calls motion
GAP_SAMPLES = 50  # intervals longer than this many T_s (and WINDOW_S) are logging gaps, not losses


def moving_std(values: np.ndarray, width: int) -> np.ndarray:
    """Standard deviation over the ``width`` samples centred on each sample (at the edges: the nearest
    full window)."""
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    width = max(2, min(width, n))
    centred = values - values.mean()
    c1 = np.concatenate([[0.0], np.cumsum(centred)])
    c2 = np.concatenate([[0.0], np.cumsum(centred * centred)])
    s1, s2 = c1[width:] - c1[:-width], c2[width:] - c2[:-width]
    var = np.maximum(s2 / width - (s1 / width) ** 2, 0.0) * width / (width - 1)
    full = np.sqrt(var)
    start = np.clip(np.arange(n) - width // 2, 0, n - width)
    return full[start]


def _static_intervals(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, float]:
    """Per-sample static mask of one channel and its window length (s)."""
    period = float(np.median(np.diff(times)))
    width = max(MIN_WINDOW, round(WINDOW_S / period))
    spread = moving_std(values, width)
    low = np.percentile(spread, 10)
    if low <= 0:  # a constant stretch (a held or saturated signal): anything that varies is motion
        return spread <= 0, width * period
    calm = spread <= 2 * low
    quiet = float(np.median(spread[calm]))
    # a sensor's own filter correlates neighbouring samples, so a window holds fewer independent ones:
    # the lag-one correlation rho from the calm stretches, and Bartlett's dof of a variance estimate
    both = calm[1:] & calm[:-1]
    rho = 1.0 - float(np.mean(np.diff(values)[both] ** 2)) / (2.0 * quiet**2) if both.any() else 0.0
    rho = min(max(rho, 0.0), 0.99)
    dof = max(2.0, (width - 1) * (1 - rho**2) / (1 + rho**2))
    chi2 = require("scipy.stats", "fit", "finding the static window").chi2
    # every sample's window is tested, and overlapping windows are not independent: count them all
    limit = float(np.sqrt(chi2.ppf(1.0 - FALSE_ALARMS / len(values), dof) / dof))
    return spread <= limit * quiet, width * period


def long_gaps(times: np.ndarray) -> list[tuple[float, float]]:
    """The logging gaps of ``times``: ``(last stamp before, first stamp after)`` of every interval longer
    than ``GAP_SAMPLES`` median intervals and ``WINDOW_S`` (a stretch that could hide a motion, and that
    no sampler's burst of losses makes: the Allan deviation of a window must not bridge it).

    Example:
        >>> t = np.r_[np.arange(0, 10, 0.01), np.arange(70, 80, 0.01)]  # 60 s without samples
        >>> long_gaps(t)
        [(9.99, 70.0)]
    """
    times = np.asarray(times, dtype=np.float64)
    if len(times) < 2:
        return []
    step = np.diff(times)
    limit = max(GAP_SAMPLES * float(np.median(step)), WINDOW_S)
    return [(float(times[i]), float(times[i + 1])) for i in np.flatnonzero(step > limit)]


def find_static_window(channels: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """``(start, end)`` in the channels' time base (s): the longest time in which every channel is static
    and logged (no window bridges a :func:`long_gaps` gap of any channel).

    ``channels`` are ``(times, values)`` pairs (their time stamps may differ). Returns a window of zero
    length when nothing is static.
    """
    grid_t = np.asarray(channels[0][0], dtype=np.float64)
    static = np.ones(len(grid_t), dtype=bool)
    cut = np.zeros(len(grid_t), dtype=bool)  # a run may not continue from the sample before
    trim = 0.0
    for times, values in channels:
        mask, length = _static_intervals(np.asarray(times, float), np.asarray(values, float))
        trim = max(trim, length)
        # map this channel's mask onto the first channel's samples: static where its nearest sample is
        idx = np.clip(np.searchsorted(times, grid_t), 0, len(times) - 1)
        static &= mask[idx]
        for before, after in long_gaps(times):
            static &= ~((grid_t > before) & (grid_t < after))
            i = int(np.searchsorted(grid_t, after))
            if i < len(cut):
                cut[i] = True
    if not static.any():
        return float(grid_t[0]), float(grid_t[0])
    begins = static & (~np.concatenate([[False], static[:-1]]) | cut)
    stops = static & (~np.concatenate([static[1:], [False]]) | np.concatenate([cut[1:], [False]]))
    starts, ends = np.flatnonzero(begins), np.flatnonzero(stops)
    lengths = grid_t[ends] - grid_t[starts]
    best = int(np.argmax(lengths))
    start, end = float(grid_t[starts[best]]), float(grid_t[ends[best]])
    # a centred window sees a motion half a window early, and a sensor settles after it (and after a
    # gap, which may hide one): trim a whole window at each end inside the log
    start = start + (trim if starts[best] > 0 else 0.0)
    end = end - (trim if ends[best] < len(grid_t) - 1 else 0.0)
    return (start, end) if end > start else (start, start)


Gap = tuple[float, float]


def without_gaps(times: np.ndarray, start: float, end: float) -> tuple[float, float, list[Gap]]:
    """The longest part of ``[start, end]`` that bridges no :func:`long_gaps` gap of ``times``, and the
    gaps inside ``[start, end]``.

    Example:
        >>> t = np.r_[np.arange(0, 10, 0.01), np.arange(70, 100, 0.01)]
        >>> without_gaps(t, 0.0, 99.99)
        (70.0, 99.99, [(9.99, 70.0)])
    """
    inside = [g for g in long_gaps(times) if start < g[1] and g[0] < end]
    if not inside:
        return start, end, []
    edges = [start, *[x for g in inside for x in g], end]
    parts = [(max(edges[i], start), min(edges[i + 1], end)) for i in range(0, len(edges), 2)]
    best = max(parts, key=lambda p: p[1] - p[0])
    return best[0], best[1], inside
