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

from ..core.replay import advance_of, component_source, load_channel, read_header
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


def _mad_noise(d: np.ndarray) -> float:
    """The estimates' noise statistic of step-to-step differences ``d`` (inspect_estimate.py)."""
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def _window_medians(rec: np.ndarray, advance: int, length: int, start: int) -> np.ndarray:
    """The medians of ``length`` replayed samples from ``start`` samples on, over offsets spread through the
    recording (cyclic, ``advance`` recorded samples apart)."""
    n = len(rec)
    offsets = np.arange(0, n, max(1, n // _OFFSETS))
    idx = (offsets[:, None] + advance * (start + np.arange(length))[None, :]) % n
    return np.median(rec[idx], axis=1)


def replay_rows(
    options: Any, component: int, est: dict[str, Any], dt: float, z: float, wraps: tuple[int, int] | None
) -> tuple[dict[str, tuple[str, str, str]], list[str]] | None:
    """The rows of a replayed component (the noise, bias and drift rows replaced, a ``replay`` row added)
    and their notes; None for a component that replays nothing. ``wraps``: :func:`wrapped_episodes` of the
    trace (None: not recorded)."""
    source = component_source(options, component)
    if source is None:
        return None
    path, channel = source
    rec = load_channel(path, channel, f"replay={path!r}")
    advance = advance_of(options, path, dt)
    n = len(rec)
    d = rec[(np.arange(n) + advance) % n] - rec
    expected = _mad_noise(d)
    q = as_number(option_component(options.resolution, component)) or 0.0
    expected_n = math.sqrt(expected**2 + q**2 / 12)
    est_n, se_n = float(est["noise_std"]), float(est.get("noise_se", 0.0))
    ok = abs(est_n - expected_n) <= max(z * se_n, 0.1 * expected_n, 1e-12)
    verdict = "ok" if ok else f"differs (expected ≈ {expected_n:.3g})"
    rows = {"noise std": (f"replay ≈ {expected_n:.3g}", f"{est_n:.3g} ± {se_n:.3g}", verdict)}
    samples = int(est.get("samples", 0))
    window = max(3, samples // 4)
    first = _window_medians(rec, advance, window, 0)
    if wraps is not None and wraps[1] > 1:  # the first and the last window lie in episodes of their own
        drift = first - np.roll(first, len(first) // 2)
    else:  # one stretch of the recording
        drift = _window_medians(rec, advance, window, max(samples - window, 0)) - first
    bias = as_number(option_component(options.bias, component))  # None: drawn per episode
    est_b, se_b = float(est["bias"]), float(est.get("bias_se", 0.0))
    if bias is not None:  # the configured bias plus the recording's median over the first window
        spread = math.hypot(se_b, float(np.std(first)))
        ok = abs(est_b - bias - float(np.mean(first))) <= z * spread + q / 2 + 1e-12
        rows["bias"] = (f"{bias:.3g} + replay", f"{est_b:.3g} ± {spread:.3g}", "ok" if ok else "differs")
    est_r, se_r = float(est["drift_end"]), float(est.get("drift_se", 0.0))
    spread_r = math.hypot(se_r, float(np.std(drift)))
    ok = abs(est_r - float(np.mean(drift))) <= z * spread_r + q + 1e-12
    conf = f"replay: ±{float(np.std(drift)):.3g}"
    rows["drift at end"] = (conf, f"{est_r:.3g} ± {spread_r:.3g}", "ok" if ok else "larger than expected")
    seconds = n * read_header(path, f"replay={path!r}").sample_interval
    text = f"{Path(path).name}:{channel}, {n} samples ({seconds:.3g} s)"
    got = "not recorded" if wraps is None else f"wrapped in {wraps[0]} of {wraps[1]} episodes"
    rows["replay"] = (text, got, "ok")
    notes = [
        f"replayed from {path} (channel {channel!r}, {advance} recorded sample{'s' * (advance != 1)} per "
        "sample): its noise, bias and drift rows expect what the recording itself shows (its step-to-step "
        "spread, and the spread of the medians of stretches as long as the estimate's windows)"
    ]
    if wraps is not None and wraps[0]:
        notes.append(
            f"{wraps[0]} of {wraps[1]} episodes ran past the recording's end from their drawn offset: the "
            f"recorded errors repeat every {seconds:.3g} s; a longer recording would not repeat"
        )
    return rows, notes
