"""The statistics of an ablation, from ``scipy.stats`` (a well-kept library, not a hand-written Student-t):
the 95% interval of a mean over seeds, the paired asymmetric-minus-symmetric difference with its
t-interval and two-sided paired t-test, and that test's power: the smallest difference it detects with
80% probability, so that "no clear difference" says how large a difference was ruled out.

Example:
    >>> from sensorgym.app.ablation.statistics import paired_difference, t_quantile
    >>> round(t_quantile(0.975, 2), 3), round(t_quantile(0.975, 9), 3)
    (4.303, 2.262)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["ci_half", "detectable_difference", "paired_difference", "paired_t_power", "t_quantile"]


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


def paired_t_power(difference: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """The probability that the two-sided paired t-test at level ``alpha`` (:func:`paired_difference`'s p
    below ``alpha``) calls a true mean difference ``difference`` significant, over ``n`` pairs whose
    differences are normal with standard deviation ``sd``: ``P(|T| > t_{1 - alpha/2, n - 1})`` with ``T``
    noncentral t of ``n - 1`` degrees of freedom and noncentrality ``difference sqrt(n) / sd``
    (``scipy.stats.nct``; e.g. Cohen, *Statistical Power Analysis for the Behavioral Sciences*, 1988, ch. 2).

    Example:
        >>> round(paired_t_power(1.0, 1.0, 10), 4)   # G*Power's one-sample t: d = 1, n = 10 -> 0.8031
        0.8031
        >>> round(paired_t_power(0.0, 1.0, 5), 3)    # no difference: the test's own false alarms
        0.05
    """
    from scipy import stats

    if n < 2 or not sd > 0:
        return float("nan")
    df = n - 1
    crit = float(stats.t.ppf(1.0 - alpha / 2.0, df))
    nc = abs(difference) * math.sqrt(n) / sd
    # the far tail through the mirrored upper tail: scipy's nct.cdf(-crit) is NaN there for large nc
    return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc))


def detectable_difference(sd: float, n: int, power: float = 0.8, alpha: float = 0.05) -> float:
    """The smallest true mean difference that :func:`paired_t_power` detects with probability ``power``
    over ``n`` pairs of difference standard deviation ``sd`` (the noncentrality solved by Brent's method,
    ``scipy.optimize.brentq``); NaN for fewer than 2 pairs or no spread. With the study's observed ``sd``
    in place of the true one it is an estimate (3 seeds give an sd that is itself uncertain by a factor of
    0.5 to 6 at 95%). For large ``n`` it tends to the normal formula ``(z_{1 - alpha/2} + z_{power}) sd /
    sqrt(n)`` = 2.80 sd / sqrt(n); with few pairs it is far above it: 5.65 sd / sqrt(3) = 3.3 sd at 3 pairs.

    Example:
        >>> round(detectable_difference(1.0, 10), 3)   # just under d = 1, whose power is 0.8031
        0.996
        >>> round(detectable_difference(10.0, 3) * math.sqrt(3) / 10.0, 2)
        5.65
    """
    from scipy import optimize

    if n < 2 or not (math.isfinite(sd) and sd > 0):
        return float("nan")
    if alpha >= power:
        return 0.0

    def short(delta: float) -> float:
        return paired_t_power(delta, sd, n, alpha) - power

    high = sd
    while short(high) < 0.0:
        high *= 2.0
    return float(optimize.brentq(short, 0.0, high, xtol=1e-12 * sd, rtol=1e-12))
