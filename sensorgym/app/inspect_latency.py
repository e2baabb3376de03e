"""``sensorgym inspect``'s ``[latency]`` table: the action delay and jitter, configured vs estimated from env
0's commanded and applied actions."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["compare_latency"]


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _g(x: float) -> str:
    return f"{x:.3g}"


def compare_latency(latency: Any, actions: dict[str, np.ndarray], dt: float) -> dict[str, Any]:
    """The ``[latency]`` table's action delay and jitter, configured vs estimated from env 0's commanded
    and applied actions: at each step the applied action is matched with the commanded one it equals;
    the shortest shift is the delay, the spread of shifts the jitter (in control steps).

    Example:
        >>> from sensorgym.app.config import LatencyConfig
        >>> cmd = np.arange(1.0, 9.0)[:, None]
        >>> applied = np.r_[[0.0, 0.0], cmd[:-2, 0]][:, None]           # two steps late
        >>> out = compare_latency(LatencyConfig(delay=0.1), {"commanded": cmd, "applied": applied,
        ...                       "latency": np.tile([0.1, 0.0], (8, 1))}, dt=0.05)
        >>> out["rows"]["action delay"]
        ('0.1 s = 2 steps', '2 steps', 'ok')
    """
    commanded, applied = actions["commanded"], actions["applied"]
    shifts = []
    for t in range(len(applied)):
        for k in range(t + 1):  # the newest commanded action it equals: the shift of this step
            if np.array_equal(applied[t], commanded[t - k]):
                shifts.append(k)
                break
    rows: dict[str, tuple[str, str, str]] = {}
    notes = [
        "the applied action is matched with the commanded one it equals, at every step that applies one "
        f"({len(shifts)} of {len(applied)} steps; the others still apply the initial action)"
    ]
    est_d = min(shifts) if shifts else None
    est_j = (max(shifts) - min(shifts)) if shifts else None
    delay, jitter = _number(latency.delay), _number(latency.jitter)
    drawn = actions["latency"][-1] if len(actions["latency"]) else None
    if delay is None:
        shown = f" (this episode: {_g(float(drawn[0]))} s)" if drawn is not None else ""
        conf_d, base = "randomized" + shown, round(float(drawn[0]) / dt) if drawn is not None else None
    else:
        base = round(delay / dt)
        conf_d = f"{_g(delay)} s = {base} step{'s' * (base != 1)}"
    got_d = f"{est_d} step{'s' * (est_d != 1)}" if est_d is not None else "no action applied yet"
    extra = math.ceil(jitter / dt - 1e-9) if jitter else 0
    if base is None or est_d is None:
        verdict = "this episode's value"
    else:
        verdict = "ok" if base <= est_d <= base + extra else f"differs (expected {base}..{base + extra})"
    rows["action delay"] = (conf_d, got_d, verdict)
    if jitter is None:
        rows["action jitter"] = (
            "randomized",
            f"0..{est_j} steps" if est_j is not None else "-",
            "this episode's value",
        )
    else:
        conf_j = f"{_g(jitter)} s: 0..{extra} step{'s' * (extra != 1)}" if jitter else "none"
        got_j = f"0..{est_j} step{'s' * (est_j != 1)}" if est_j is not None else "-"
        rows["action jitter"] = (conf_j, got_j, "ok" if est_j is None or est_j <= extra else "differs")
    return {"channel": "actions ([latency])", "rows": rows, "notes": notes}
