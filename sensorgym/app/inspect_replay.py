"""``inspect``'s rows of a component that replays a recording of a real sensor's errors (its option
``replay``; docs/error_model.md, "Replayed real errors"): the recording, and how many episodes of the
trace wrapped around its end; and the noise, bias and drift the estimates should show, taken from the
recording itself (its step-to-step spread at the sensor's advance, and the spread of the medians of
stretches as long as the estimate's windows) instead of the parametric terms it replaces.

Example: env 0's replay index over two episodes, the second running past the end of a 5-sample recording
    >>> import numpy as np
    >>> index = np.array([[1], [2], [3], [0], [1], [2], [3], [4], [0]])
    >>> resets = np.array([True, False, False, True, False, False, False, False, False])
    >>> wrapped_episodes(index, resets)
    (1, 2)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..core.recording import load_channel, read_header
from ..core.replay import advance_of, component_source
from .inspect_options import as_number, option_component

__all__ = ["replay_rows", "wrapped_episodes"]

_OFFSETS = 512  # stretches of the recording the bias and drift expectations are taken over


def wrapped_episodes(index: np.ndarray, resets: np.ndarray) -> tuple[int, int]:
    """``(episodes that wrapped, episodes)`` of a replay index trace ``(T, components)`` (env 0, one row
    per step) with its episode starts ``resets`` ``(T,)``: an episode wrapped where its index went back
    (the recording's end was reached) at a step that is not its start."""
    index, resets = np.asarray(index), np.asarray(resets, bool)
    episode = np.cumsum(resets)
    back = np.zeros(len(index), bool)
    back[1:] = (np.diff(index, axis=0) < 0).reshape(len(index) - 1, -1).any(axis=1) & ~resets[1:]
    return len(set(episode[back].tolist())), int(episode[-1]) if len(episode) else 0


def _stretches(rec: np.ndarray, advance: int, length: int, start: int = 0) -> np.ndarray:
    """``(offsets, length)``: ``length`` replayed samples from ``start`` samples on, at offsets spread evenly
    through the recording (cyclic, ``advance`` recorded samples apart): the stretches a trace can show."""
    n = len(rec)
    offsets = np.arange(0, n, max(1, n // _OFFSETS))
    return rec[(offsets[:, None] + advance * (start + np.arange(length))[None, :]) % n]


def _range(values: np.ndarray, z: float) -> tuple[float, float]:
    """The central range of ``values`` holding all but the two-sided tail ``z`` standard errors leave."""
    tail = float(math.erfc(z / math.sqrt(2.0))) / 2.0
    return float(np.quantile(values, tail)), float(np.quantile(values, 1.0 - tail))


def replay_rows(
    options: Any, component: int, est: dict[str, Any], dt: float, z: float, wraps: tuple[int, int] | None
) -> tuple[dict[str, tuple[str, str, str]], list[str]] | None:
    """The rows of a replayed component (the noise, bias and drift rows replaced, a ``replay`` row added)
    and their notes; None for a component that replays nothing. ``wraps``: :func:`wrapped_episodes` of the
    trace (None: not recorded).

    Each expectation is the estimate's own statistic over the stretches of the recording a trace of this
    length can show (:func:`_stretches`), and its verdict the central range of those values that ``z``
    leaves (a real recording is no Gaussian: quantized, its noise statistic takes a few values only)."""
    source = component_source(options, component)
    if source is None:
        return None
    path, channel = source
    rec = load_channel(path, channel, f"replay={path!r}")
    advance = advance_of(options, path, dt)
    n, samples = len(rec), max(int(est.get("samples", 0)), 8)
    q = as_number(option_component(options.resolution, component)) or 0.0
    d = np.diff(_stretches(rec, advance, samples), axis=1)  # the estimate's noise statistic per stretch
    noise = 1.4826 * np.median(np.abs(d - np.median(d, axis=1, keepdims=True)), axis=1) / math.sqrt(2)
    rows: dict[str, tuple[str, str, str]] = {}
    est_n = float(est["noise_std"])
    lo, hi = _range(np.sqrt(noise**2 + q**2 / 12), z)
    ok = 0.9 * lo <= est_n <= 1.1 * hi
    rows["noise std"] = (f"replay {lo:.3g}..{hi:.3g}", f"{est_n:.3g} ± {float(est.get('noise_se', 0)):.3g}",
                         "ok" if ok else f"differs (expected {lo:.3g}..{hi:.3g})")  # fmt: skip
    window = max(3, samples // 4)
    first = np.median(_stretches(rec, advance, window), axis=1)
    if wraps is not None and wraps[1] > 1:  # the first and the last window lie in episodes of their own
        drift = first - np.roll(first, len(first) // 2)
    else:  # one stretch of the recording
        drift = np.median(_stretches(rec, advance, window, max(samples - window, 0)), axis=1) - first
    bias = as_number(option_component(options.bias, component))  # None: drawn per episode
    est_b = float(est["bias"])
    if bias is not None:  # the configured bias plus the recording's median over the first window
        lo, hi = _range(bias + first, z)
        ok = lo - q / 2 - 1e-12 <= est_b <= hi + q / 2 + 1e-12
        rows["bias"] = (
            f"{bias:.3g} + replay",
            f"{est_b:.3g}",
            "ok" if ok else f"differs ({lo:.3g}..{hi:.3g})",
        )
    est_r = float(est["drift_end"])
    lo, hi = _range(drift, z)
    ok = lo - q - 1e-12 <= est_r <= hi + q + 1e-12
    rows["drift at end"] = (
        f"replay {lo:.3g}..{hi:.3g}",
        f"{est_r:.3g}",
        "ok" if ok else "larger than expected",
    )
    seconds = n * read_header(path, f"replay={path!r}").sample_interval
    text = f"{Path(path).name}:{channel}, {n} samples ({seconds:.3g} s)"
    got = "not recorded" if wraps is None else f"wrapped in {wraps[0]} of {wraps[1]} episodes"
    rows["replay"] = (text, got, "ok")
    notes = [
        f"replayed from {path} (channel {channel!r}, {advance} recorded sample{'s' * (advance != 1)} per "
        "sample): its noise, bias and drift rows expect what the recording itself shows: the range of the "
        f"estimate's own statistic over {_OFFSETS} stretches of it as long as this trace"
    ]
    if wraps is not None and wraps[0]:
        notes.append(
            f"{wraps[0]} of {wraps[1]} episodes ran past the recording's end from their drawn offset: the "
            f"recorded errors repeat every {seconds:.3g} s; a longer recording would not repeat"
        )
    return rows, notes
