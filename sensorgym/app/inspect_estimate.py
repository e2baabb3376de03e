"""``inspect``'s estimates of one channel from its traces alone: delay, bias, noise, drift and
quantization (:func:`estimate_channel`), and for a sensor that holds its samples (its own rate, lost
samples, jitter) the same compared sample by sample, with its sample interval and loss fraction
(:func:`estimate_sampled`).

Example:
    >>> import numpy as np
    >>> gt = np.sin(np.arange(300) * 0.1)
    >>> measured = np.round((np.r_[np.zeros(3), gt[:-3]] + 0.2) / 0.05) * 0.05
    >>> est = estimate_channel(gt, measured, max_lag=10)
    >>> est["delay_steps"], round(est["bias"], 2), est["quantization"]
    (3, 0.2, 0.05)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .inspect_drift import DRIFT_BLOCK
from .inspect_error_model import loss_runs, regress_filter
from .inspect_fits import fit_reading, match_delay, offset_errors

__all__ = ["episode_steps", "estimate_channel", "estimate_sampled"]


def _quantization(values: np.ndarray) -> float:
    """The grid step of a quantized signal (0 when it is not on a grid)."""
    u = np.unique(np.round(values, 9))
    if len(u) < 3:
        return 0.0
    d = np.diff(u)
    step = d.min()
    if step <= 0:
        return 0.0
    ratios = d / step
    on_grid = np.abs(ratios - np.round(ratios)) < 1e-3
    if on_grid.mean() < 0.99 or len(u) > 0.9 * len(values):
        return 0.0
    return float(np.round(step, 9))


def estimate_channel(
    gt: np.ndarray,
    measured: np.ndarray,
    max_lag: int = 20,
    episode_step: np.ndarray | None = None,
    *,
    scale: bool = False,
    lowpass: bool = False,
    drift: bool = False,
    decay: Any = None,
) -> dict[str, Any]:
    """Delay (steps), bias, noise std, drift at the end and quantization step of one channel,
    estimated from its ground-truth and measured traces only; ``filter``: the consecutive residuals'
    regression (:func:`~sensorgym.app.inspect_error_model.regress_filter`), within episodes when
    ``episode_step`` is given. ``scale``/``lowpass`` (a scale factor, a filter configured): the noise, bias
    and drift are measured against the ground truth through the fitted scale and filter
    (:func:`~sensorgym.app.inspect_fits.fit_reading`), ``scale`` holds the scale factor's fit. ``drift``
    (a random walk or a Gauss-Markov bias configured): those regressions take an intercept per block of
    samples; ``decay``: the configured filter's ``a^m`` per gap, which the delay is matched through
    (:func:`~sensorgym.app.inspect_fits.match_delay`)."""
    gt, measured = np.asarray(gt, float), np.asarray(measured, float)
    n = len(gt)
    max_lag = max(0, min(max_lag, n // 3))
    # the lag at which the readings match the ground truth (through the filter's recursion when one is
    # configured); a constant signal carries no timing: no delay
    # (every step shows a new sample: no sampler holds this reading)
    best = match_delay(measured, gt, max_lag, episode_step, lowpass=lowpass, at=np.arange(n), decay=decay)
    best = best["delay_steps"]
    if best is None and np.ptp(gt) > 0:
        best = int(np.argmin([np.var(measured[k:] - gt[: n - k]) for k in range(max_lag + 1)]))
    best = best or 0
    z, x = measured[best:], gt[: n - best]
    # the reading at t + best shows step t's sample: a pair (t - 1, t) lies in one episode when that
    # episode started at t - 1 or before
    pairs = np.ones(max(len(z) - 1, 0), bool)
    if episode_step is not None:
        pairs = np.asarray(episode_step)[best + 1 : n] >= best + 1
    blocks = DRIFT_BLOCK if drift else 0  # a drift term: one intercept per block of samples
    fit = regress_filter(z, x, pairs, np.ones(pairs.size, int), gain=scale, blocks=blocks)
    model = None
    if scale or lowpass:
        steps = np.asarray(episode_step)[: n - best] if episode_step is not None else None
        model = fit_reading(
            z, x, np.arange(len(x)), fit, episode_step=steps, scale=scale, lowpass=lowpass, blocks=blocks
        )
        resid = z - model["references"][0]
    else:
        resid = z - x
    window = max(3, len(resid) // 4)
    # medians and the MAD: robust to the few samples around an episode boundary, where the delayed
    # reading still shows the padding while the ground truth has jumped
    bias = float(np.median(resid[:window]))  # at the start: before a random walk wanders off
    drift = float(np.median(resid[-window:]) - bias)
    if len(resid) > 2:
        d = np.diff(resid)
        noise = float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))
    else:
        noise = 0.0
    # standard errors: the MAD of (correlated) differences, and the medians of two windows
    noise_se = noise * 1.65 / math.sqrt(max(1, len(resid) - 1))
    steps = np.arange(n) if episode_step is None else np.asarray(episode_step, int)[:n]
    return {
        "window": window,  # the samples' episode steps and episodes (what a drift term moves)
        "drift_at": (steps[: len(resid)], np.cumsum(steps == 0)[: len(resid)]),
        "filter": fit,
        "delay_steps": best,
        "bias": bias,
        "noise_std": noise,
        "drift_end": drift,
        "quantization": _quantization(measured),
        "samples": len(resid),
        "noise_se": float(noise_se),
        **offset_errors(noise, window, z, model, scale, lowpass),
    }


def episode_steps(resets: np.ndarray) -> np.ndarray:
    """The step within its episode of every recorded step, from the episode starts.

    Example:
        >>> episode_steps(np.array([True, False, False, True, False])).tolist()
        [0, 1, 2, 0, 1]
    """
    resets = np.asarray(resets, bool)
    t = np.arange(len(resets))
    return t - np.maximum.accumulate(np.where(resets, t, 0))


def estimate_sampled(
    gt: np.ndarray,
    measured: np.ndarray,
    age_steps: np.ndarray,
    episode_step: np.ndarray,
    *,
    scale: bool = False,
    lowpass: bool = False,
    drift: bool = False,
    decay: Any = None,
    due: np.ndarray | None = None,
) -> dict[str, float]:
    """:func:`estimate_channel` for a sensor with its own rate or lost samples (``update_period``,
    ``dropout``), plus its sample interval and the fraction of due samples lost.

    Between samples such a sensor holds its last reading, so the residual against the ground truth of
    the same step carries how much the signal moved meanwhile (a 25 Hz reading held over two 50 Hz steps
    showed a noise of 0.224 for a configured 0.02). Here every reading is compared with the ground truth
    at the step its sample was taken (``t - age``; the age is the reading's time stamp,
    :meth:`~sensorgym.core.sensor.Sensor.read_age`), each sample once. The delay is the lag at which the
    new samples the reading shows match the ground truth (:func:`~sensorgym.app.inspect_fits.match_delay`,
    from the traces alone; ``delay_age_steps``: the youngest age of a reading past the episode's padding,
    what the time stamps say); the sample interval ``period_steps`` is the mean of the gaps between
    samples no longer than 1.5 times their median (a lost sample makes a gap of two intervals or more);
    ``dropout`` is the share of due samples that were lost (``round(gap / interval) - 1`` per gap), over
    ``due`` due samples (the gap after an episode's reset sample is left out of both: where the next sample
    falls depends on the episode's phase). ``scale``/``lowpass``/``drift`` as :func:`estimate_channel`; the
    fitted filter advances at the ``due`` steps (per step, as the sampler decided; default: the steps a
    sample was taken at).

    Example:
        >>> gt = np.arange(12.0)
        >>> age = np.array([0, 1, 0, 1, 0, 1, 2, 3, 0, 1, 0, 1])   # a sample every 2 steps; one of 4 lost
        >>> measured = gt - age + 0.5                              # held readings, bias 0.5
        >>> est = estimate_sampled(gt, measured, age, np.arange(12))
        >>> est["bias"], est["noise_std"], est["period_steps"], est["dropout"], est["due"]
        (0.5, 0.0, 2.0, 0.25, 4)
    """
    gt, measured = np.asarray(gt, float), np.asarray(measured, float)
    k = np.asarray(age_steps, int)
    episode_step = np.asarray(episode_step, int)
    src, valid, idx, same = _samples(k, episode_step)
    fit, model, resid = _sample_residuals(
        gt, measured, src, idx, same, episode_step, scale=scale, lowpass=lowpass, drift=drift, due=due
    )
    d = np.diff(resid)[same]
    noise = float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2)) if d.size else 0.0
    window = max(3, len(resid) // 4)
    bias = float(np.median(resid[:window])) if resid.size else 0.0
    drift = float(np.median(resid[-window:]) - bias) if resid.size else 0.0
    period, lost, n_due, due = _losses(src, idx, same, episode_step)
    n = len(resid)
    # the time stamps' delay: the youngest reading that no longer shows the padding (age below the episode
    # step; at the reset step every reading is its own sample, age 0)
    past = valid & (k < episode_step)
    by_age = int(k[past].min()) if past.any() else (int(k[valid].min()) if valid.any() else 0)
    lag = max(20, by_age + 5)
    # matched at the steps where a new sample shows (its time stamp changed), at the lag the traces say
    matched = match_delay(
        measured, gt, min(lag, len(gt) // 3), episode_step, lowpass=lowpass, at=idx, decay=decay
    )
    matched = matched["delay_steps"]
    return {
        "filter": fit,
        "runs": loss_runs(due),
        "delay_steps": by_age if matched is None else matched,
        "delay_age_steps": by_age,
        "window": window,
        "drift_at": (episode_step[src[idx]], np.cumsum(episode_step == 0)[src[idx]]),
        "bias": bias,
        "noise_std": noise,
        "drift_end": drift,
        "quantization": _quantization(measured[idx]),
        "samples": n,
        "noise_se": float(noise * 1.65 / math.sqrt(max(1, d.size))),
        **offset_errors(noise, window, measured[idx], model, scale, lowpass),
        "period_steps": period,
        "dropout": lost / n_due if n_due else 0.0,
        "due": n_due,
    }


def _samples(k: np.ndarray, episode_step: np.ndarray) -> tuple[np.ndarray, ...]:
    """From the readings' ages ``k`` (steps): ``src``, the step each reading's sample was taken at;
    ``valid``, the readings whose sample belongs to their episode; ``idx``, the first step that shows each
    sample; ``same``, whether consecutive samples lie in one episode."""
    t = np.arange(len(k))
    src = t - k
    valid = (k >= 0) & (k <= episode_step)  # the sample behind the reading belongs to this episode
    new = valid.copy()
    new[1:] &= ~(valid[:-1] & (src[1:] == src[:-1]))  # the first step that shows each sample
    idx = np.flatnonzero(new)
    episode = np.cumsum(episode_step == 0)[idx]
    same = episode[1:] == episode[:-1]  # consecutive samples of one episode
    return src, valid, idx, same


def _sample_residuals(
    gt: np.ndarray,
    measured: np.ndarray,
    src: np.ndarray,
    idx: np.ndarray,
    same: np.ndarray,
    episode_step: np.ndarray,
    *,
    scale: bool,
    lowpass: bool,
    drift: bool,
    due: np.ndarray | None,
) -> tuple[dict[str, Any], dict[str, Any] | None, np.ndarray]:
    """The consecutive samples' regression, the fitted reading model (with a scale factor or a filter
    configured, else None) and each sample's residual against the ground truth of its step (through that
    model)."""
    blocks = DRIFT_BLOCK if drift else 0  # a drift term: one intercept per block of samples
    fit = regress_filter(measured[idx], gt[src[idx]], same, np.diff(src[idx]), gain=scale, blocks=blocks)
    if not (scale or lowpass):
        return fit, None, measured[idx] - gt[src[idx]]
    advance = np.zeros(len(gt), bool) if due is None else np.asarray(due, bool)
    if due is None:
        advance[src[idx]] = True
    model = fit_reading(
        measured[idx],
        gt,
        src[idx],
        fit,
        episode_step=episode_step,
        due=advance,
        scale=scale,
        lowpass=lowpass,
        blocks=blocks,
    )
    return fit, model, measured[idx] - model["references"][0]


def _losses(
    src: np.ndarray, idx: np.ndarray, same: np.ndarray, episode_step: np.ndarray
) -> tuple[float, int, int, np.ndarray]:
    """The sample interval (steps), the due samples lost, the due samples and the due samples per gap,
    from the gaps between consecutive samples of an episode."""
    # the gaps between samples, but not the first of an episode: the reset sample is always taken, and
    # the next one falls wherever the episode's phase puts it
    after_reset = episode_step[src[idx]][:-1] == 0
    gaps = np.diff(src[idx])[same & ~after_reset]
    gaps = gaps[gaps > 0]
    if not gaps.size:
        return float("nan"), 0, 0, np.zeros(0, int)
    lossless = gaps[gaps <= 1.5 * np.median(gaps)]
    period = float(lossless.mean())
    due = np.maximum(1, np.round(gaps / period)).astype(int)
    return period, int((due - 1).sum()), int(due.sum()), due
