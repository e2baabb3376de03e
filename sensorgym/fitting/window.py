"""What a static window holds, fitted: its Allan deviation, lost samples, lattice and error model, and the
two things that make a window less at rest than it looks: a logging gap (the window bridges none,
:func:`~sensorgym.fitting.static.without_gaps`) and a warm-up trend at its start
(:mod:`~sensorgym.fitting.warmup`), which is left out (the window starts once it has settled) or
subtracted, and said, rather than read as a random walk.

Example:
    >>> import numpy as np
    >>> t = np.arange(20_000) * 0.01
    >>> y = np.random.default_rng(0).normal(0.0, 0.05, t.size) + 0.05 * np.exp(-t / 12.0)
    >>> fitted, trend, line = settle("gyro", t, y, 0.01, fit_window(t, y, 0.01), 0.0)
    >>> walk, start = fitted.noise.estimates["random_walk_density"], fitted.times[0]
    >>> bool(9 < trend.time_constant < 15), bool(abs(start - 3 * trend.time_constant) < 0.01), walk.value
    (True, True, None)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .allan import Allan, allan_deviation, fit_m
from .errors import FitError
from .estimate import NoiseFit, fit_allan
from .lattice import lattice_step
from .model import Gaps
from .timing import slot_steps
from .warmup import CHI2_CONFIRM, Warmup, detect_warmup, settled_from

__all__ = ["WindowFit", "fit_window", "gap_finding", "settle"]

_MIN_HALF = 2048  # samples of the window's second half, to fit the model the warm-up test weighs against
_STATIC_DISPERSION = 3.0  # a misfit over which the window may hold something besides noise (api.py)


@dataclass
class WindowFit:
    """The samples fitted (``values`` less a subtracted trend), their gaps, Allan deviation, lattice step
    and error model."""

    times: np.ndarray
    values: np.ndarray
    gaps: Gaps
    allan: Allan
    resolution: tuple[float | None, float | None]
    noise: NoiseFit


def fit_window(times: np.ndarray, values: np.ndarray, ts: float) -> WindowFit:
    """Fit the error model to the received samples ``values`` at ``times`` of a sensor sampling every
    ``ts``."""
    gaps = Gaps.from_steps(slot_steps(times, ts))  # jittered stamps are not gaps
    # m counts received samples: tau is m mean intervals (m T_s without losses)
    allan = allan_deviation(values, ts * gaps.mean, fit_m(len(values), len(values) // 10))
    step, step_se = lattice_step(values)
    noise = fit_allan(allan, ts, resolution=step or 0.0, gaps=gaps)
    return WindowFit(times, values, gaps, allan, (step, step_se), noise)


def settle(
    channel: str, times: np.ndarray, values: np.ndarray, ts: float, first: WindowFit, t0: float
) -> tuple[WindowFit, Warmup | None, str | None]:
    """``first`` refitted without a warm-up trend at the window's start, the trend and the line that says
    what was done; ``first`` itself where the window shows no drift to test or no trend."""
    noise = first.noise
    if not (noise.structure[1] or noise.structure[2] or noise.dispersion > _STATIC_DISPERSION):
        return first, None, None
    half = len(values) // 2
    if len(values) - half < _MIN_HALF:
        return first, None, None
    # against the whole window's model first (no fit to add: most windows stop here), then against the
    # model of the half the warm-up touches least
    if detect_warmup(times, values, noise.params, ts, CHI2_CONFIRM) is None:
        return first, None, None
    try:
        model = fit_window(times[half:], values[half:], ts).noise.params
    except FitError:
        return first, None, None
    trend = detect_warmup(times, values, model, ts)
    if trend is None:
        return first, None, None
    start = settled_from(trend, float(times[-1]))
    what = (
        f"{channel}: a warm-up trend: the level settles by {trend.amplitude:.3g} with a time constant of "
        f"{trend.time_constant:.3g} s from the window's start at {trend.start - t0:.4g} s (chi-square "
        f"{trend.chi2:.0f} against the noise alone); it is not a random walk, and the config has no term "
        "for a bias that settles, so "
    )
    if start is not None:
        keep = times >= start
        refit = fit_window(times[keep], values[keep], ts)
        return refit, trend, what + f"the window starts once it has settled, at {start - t0:.4g} s"
    refit = fit_window(times, values - trend.at(times), ts)
    return refit, trend, what + "it is subtracted before the fit (too little of the window follows it)"


def gap_finding(
    channel: str,
    window: tuple[float, float] | None,
    gaps: list[tuple[float, float]],
    start: float,
    end: float,
    t0: float,
) -> str:
    """One line on the logging gaps: those inside the window asked for, or the log's around the one
    found (times in the log's base, ``t0`` its first stamp; ``start``, ``end`` from it)."""
    g = max(gaps, key=lambda g: g[1] - g[0])
    what = f"{g[1] - g[0]:.3g} s at {g[0] - t0:.4g} s"
    what = f"a logging gap of {what}" if len(gaps) == 1 else f"{len(gaps)} logging gaps (the longest {what})"
    why = "an Allan deviation must not bridge a gap"
    part = f"{start:.4g}-{end:.4g} s"
    if window is None:
        return f"{channel}: the log has {what}; the static window found, {part}, bridges none ({why})"
    asked = f"--static {window[0]:g}:{window[1]:g}"
    return (
        f"{channel}: {asked} holds {what}; the fit uses its longest part without one, {part} ({why}; give "
        "--static inside one part to choose another)"
    )
