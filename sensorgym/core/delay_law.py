"""The one law that turns a delay and its jitter in seconds into control steps, for the sensors' parameter
table and for the action queue of ``ActionLatency`` alike.

``D = round(delay / dt)`` (half to even, like ``torch.round`` and Python's ``round``); the effective jitter
is ``min(jitter, delay) / dt`` steps and the most it adds is ``ceil(jitter / dt - 1e-9)`` steps: a jitter
that is a whole number of steps up to float rounding (0.14 / 0.02 = 7.000000000000001) adds exactly that
many, never one more.

Example:
    >>> delay_steps(0.1, 0.02), jitter_extra_steps(0.14, 0.02)
    (5, 7)
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["JITTER_CEIL_TOLERANCE", "delay_steps", "jitter_extra_steps", "seconds_to_steps"]

#: subtracted before the jitter's ceiling (see the module docstring)
JITTER_CEIL_TOLERANCE = 1e-9


def delay_steps(seconds: float, dt: float) -> int:
    """``D = round(delay / dt)`` (half to even, like ``torch.round``)."""
    return round(seconds / dt)


def jitter_extra_steps(seconds: float, dt: float) -> int:
    """Largest extra shift jitter can add: ``ceil(jitter / dt)`` (0 for no jitter)."""
    return max(0, math.ceil(seconds / dt - JITTER_CEIL_TOLERANCE))


def seconds_to_steps(
    xp: Any,
    dt: float,
    delay: Any,
    jitter: Any,
    *,
    scratch: Any,
    steps: Any,
    jitter_steps: Any,
    jitter_ceil: Any,
    jitter_steps_f32: Any,
) -> None:
    """Per-env ``delay`` and ``jitter`` (float64 seconds) into ``steps`` (``D``), ``jitter_steps`` (the
    effective jitter in steps, float64), its float32 copy and ``jitter_ceil``, in place with the executor
    ``xp`` (:mod:`sensorgym.core.xp`); ``scratch`` is a float64 buffer of the same shape."""
    xp.div(delay, dt, scratch)
    xp.round(scratch, scratch)
    xp.copy(steps, scratch)
    xp.minimum(jitter, delay, jitter_steps)  # the effective jitter
    xp.div(jitter_steps, dt, jitter_steps)
    xp.add(jitter_steps, -JITTER_CEIL_TOLERANCE, scratch)  # x - tolerance, exactly
    xp.ceil(scratch, scratch)
    xp.clip(scratch, 0.0, None, scratch)
    xp.copy(jitter_ceil, scratch)
    xp.copy(jitter_steps_f32, jitter_steps)
