"""The quantization step of a channel, from the lattice its values lie on.

A quantized signal only takes values ``offset + k r``, so the differences between its distinct values are
whole multiples of ``r``. The step is the least-squares ``r`` of those differences against their whole
multiples of the smallest one, and the values lie on a lattice when every difference is within
``1e-3 r`` (and a float32 log's rounding) of a multiple. A calibrated signal (scaled by a matrix, a
temperature model) does not lie on one, and its resolution is not identifiable from the values. Nor is a
lattice far finer than the noise (under 1% of the sample-to-sample spread): that is the precision the
log was printed with (a CSV of 7 decimals lies on a lattice of 1e-7), and it changes nothing.

Example:
    >>> import numpy as np
    >>> x = np.round(np.random.default_rng(0).normal(0.0, 0.3, 2000) / 0.061) * 0.061 + 0.0123
    >>> step, se = lattice_step(x)
    >>> round(step, 6)
    0.061
    >>> lattice_step(np.random.default_rng(0).normal(0.0, 0.3, 2000))
    (None, None)
"""

from __future__ import annotations

import numpy as np

__all__ = ["lattice_step"]

_TOLERANCE = 1e-3  # of a step: how far a difference may lie from a whole multiple


def lattice_step(values: np.ndarray) -> tuple[float | None, float | None]:
    """``(r, its standard error)`` when the values lie on a lattice of step ``r``, else ``(None, None)``.

    Needs at least 8 distinct values, and more samples than distinct values (a lattice repeats values).
    """
    values = np.asarray(values, dtype=np.float64)
    distinct = np.unique(values)
    if len(distinct) < 8 or len(distinct) > 0.9 * len(values):
        return None, None
    gaps = np.diff(distinct)
    # the float precision of the values: a float32 log rounds each value to about 6e-8 of its size
    eps = np.abs(distinct).max() * (6e-8 if np.all(values == values.astype(np.float32)) else 1e-15)
    smallest = gaps.min()
    if smallest <= 10 * eps:
        return None, None
    k = np.rint(gaps / smallest)
    step = float(np.sum(k * gaps) / np.sum(k * k))
    residual = gaps - k * step
    if np.max(np.abs(residual)) > _TOLERANCE * step + 4 * eps:
        return None, None
    if step < 0.01 * float(np.std(np.diff(values))):
        return None, None
    se = float(np.sqrt(np.sum(residual**2) / max(len(gaps) - 1, 1) / np.sum(k * k)))
    return step, se
