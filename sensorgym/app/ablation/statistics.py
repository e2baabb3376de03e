"""The statistics of an ablation, from ``scipy.stats`` (a well-kept library, not a hand-written Student-t):
the 95% interval of a mean over seeds and the paired asymmetric-minus-symmetric difference with its
t-interval and two-sided paired t-test.

Example:
    >>> from sensorgym.app.ablation.statistics import paired_difference, t_quantile
    >>> round(t_quantile(0.975, 2), 3), round(t_quantile(0.975, 9), 3)
    (4.303, 2.262)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["ci_half", "paired_difference", "t_quantile"]


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (``scipy.stats.t.ppf``).

    Example:
        >>> round(t_quantile(0.025, 1), 2)
        -12.71
    """
    from scipy import stats

    return float(stats.t.ppf(q, df))


def ci_half(xs: Sequence[float], level: float = 0.95) -> float:
    """The half-width of the ``level`` t-interval of the mean of ``xs`` (0 for fewer than two values).

    Example:
        >>> round(ci_half([1.0, 2.0, 3.0]), 3)   # t(0.975, 2) x 1 / sqrt(3)
        2.484
    """
    if len(xs) < 2:
        return 0.0
    return t_quantile(0.5 + level / 2.0, len(xs) - 1) * float(np.std(xs, ddof=1)) / math.sqrt(len(xs))


def paired_difference(
    treatment: Sequence[float], control: Sequence[float], level: float = 0.95
) -> dict[str, float]:
    """Mean of ``treatment[i] - control[i]`` (pairs: the same seed) with its ``level`` t-interval and the
    two-sided paired t-test p-value (``scipy.stats.ttest_rel``); ``sd`` is the sample sd (ddof=1) of the
    differences. With one pair the interval and p-value are NaN; with differences that do not vary (no
    spread to test against) the interval is the mean itself and p is 1 for a zero mean, else 0.

    Example:
        >>> d = paired_difference([3.0, 5.0, 7.0], [1.0, 2.0, 3.0])   # differences 2, 3, 4
        >>> d["mean"], d["sd"], round(d["lo"], 2), round(d["hi"], 2), round(d["p"], 4), d["n"]
        (3.0, 1.0, 0.52, 5.48, 0.0351, 3)
    """
    from scipy import stats

    diffs = np.asarray(treatment, float) - np.asarray(control, float)
    n = int(diffs.size)
    nan = float("nan")
    if n == 0:
        return {"n": 0, "mean": nan, "sd": nan, "lo": nan, "hi": nan, "p": nan}
    mean = float(diffs.mean())
    if n < 2:
        return {"n": 1, "mean": mean, "sd": nan, "lo": nan, "hi": nan, "p": nan}
    sd = float(diffs.std(ddof=1))
    if sd == 0.0:  # scipy would divide by zero: every seed differs by the same amount
        return {"n": n, "mean": mean, "sd": 0.0, "lo": mean, "hi": mean, "p": 1.0 if mean == 0.0 else 0.0}
    test = stats.ttest_rel(np.asarray(treatment, float), np.asarray(control, float))
    interval = test.confidence_interval(level)
    return {
        "n": n,
        "mean": mean,
        "sd": sd,
        "lo": float(interval.low),
        "hi": float(interval.high),
        "p": float(test.pvalue),
    }
