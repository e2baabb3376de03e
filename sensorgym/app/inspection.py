"""``sensorgym inspect``: run an env with a sensor configuration, record ground truth and measured
traces, estimate each channel's delay, noise, bias, drift and quantization *from the traces*, print them
beside the configured values (:func:`compare_channel`, with the uncertainty of each estimate and a note
where an estimate cannot match the configured value, e.g. quantization or jitter inflating the noise
estimate, or a short trace), and plot.

Example:
    >>> from sensorgym.app.config import parse_config
    >>> from sensorgym.app.inspection import estimate_channel, record
    >>> import numpy as np
    >>> gt = np.sin(np.arange(300) * 0.1)
    >>> measured = np.round((np.r_[np.zeros(3), gt[:-3]] + 0.2) / 0.05) * 0.05
    >>> est = estimate_channel(gt, measured, max_lag=10)
    >>> est["delay_steps"], round(est["bias"], 2), est["quantization"]
    (3, 0.2, 0.05)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config
from .inspect_drift import DRIFT_BLOCK, bias_drift_rows, drift_terms, step_wander
from .inspect_error_model import (
    error_model_checks,
    error_model_rows,
    loss_fraction_ok,
    loss_runs,
    model_terms,
    regress_filter,
    skips_samples,
)
from .inspect_fits import fit_reading, match_delay, offset_errors
from .inspect_latency import compare_latency
from .inspect_options import as_number as _number
from .inspect_options import option_component as _component

__all__ = [
    "InspectResult",
    "compare_channel",
    "estimate_channel",
    "format_summary",
    "plot_sampling",
    "plot_traces",
    "record",
    "run_inspect",
    "sampling_path",
]


@dataclass
class InspectResult:
    times: np.ndarray  # (T,) seconds
    channels: list[str]  # "sensor[i]" names
    gt: np.ndarray  # (T, C)
    measured: np.ndarray  # (T, C)
    summary: list[dict[str, Any]]
    figure: Path | None = None
    #: per sensor with its own rate or dropout (see docs/pipeline.md): its first channel's GT and measured
    #: traces and,
    #: per step, ``fresh`` (a sample was taken), ``due`` (one was due), ``dropped`` (due and lost), the
    #: reading's ``age`` (s) and the episode ``step``; plus the sampler's ``period``, ``phase``, ``dropout``
    sampling: dict[str, dict[str, Any]] = field(default_factory=dict)
    sampler_figure: Path | None = None
    #: per step, whether an episode started there (the reset step of env 0; marked in the figures)
    resets: np.ndarray | None = None
    #: with ``[latency]``: env 0's commanded and applied actions per step and this episode's delay/jitter
    actions: dict[str, np.ndarray] | None = None
    #: the verdicts' threshold in standard errors (:func:`verdict_z` of ``checks``, the table's number of
    #: statistical checks)
    z: float = 2.0
    checks: int = 0


def record(
    cfg: Config, steps: int, seed: int = 0, model: Any = None
) -> tuple[np.ndarray, list, np.ndarray, np.ndarray]:
    """Step one env for ``steps`` steps (random actions, or ``model.predict``) and record every sensor's
    GT and measured reading (current read, no history). Returns (times, channel names, gt, measured)."""
    rec = _record(cfg, steps, seed, model)
    return rec.times, rec.names, rec.gt, rec.measured


def _due(step: int, period: float, phase: float, dt: float) -> bool:
    """The sampler's due rule (docs/pipeline.md) at episode step ``step`` (the reset step always
    samples), in float64 as the sampler computes it."""
    if step == 0 or period <= dt:
        return True
    now = math.floor((step * dt - phase) / period + 1e-9)
    before = math.floor(((step - 1) * dt - phase) / period + 1e-9)
    return now > before


def _record(cfg: Config, steps: int, seed: int = 0, model: Any = None) -> _Recording:
    from ..core.plan import needs_sampler
    from .training import config_env_kwargs, make_sensor_env

    envs = make_sensor_env(
        cfg.env.id, cfg.sensors, n_envs=1, seed=seed, autoreset_mode="NextStep", **config_env_kwargs(cfg)
    )
    sensors = {name: s for name, s in envs.sensors.items() if name in cfg.sensors}  # not [latency]'s
    names = []
    for name, s in sensors.items():
        width = s.return_slice.stop - s.return_slice.start
        names += [name] if width == 1 else [f"{name}[{i}]" for i in range(width)]

    # sensors with their own rate or dropout: the sampler's decision at every step (env 0)
    sampled = {
        name: s
        for name, s in sensors.items()
        if envs.manager.storage(type(s)).sampler is not None and needs_sampler(s.options, envs.dt)
    }
    trace: dict[str, dict[str, list]] = {
        name: {k: [] for k in ("fresh", "due", "age", "step", "period", "phase", "dropout")}
        for name in sampled
    }

    # jittered sensors without a sampler: the age of every reading (which sample the jitter showed)
    jittered = {name: s for name, s in sensors.items() if name not in sampled and skips_samples(s.options)}
    ages: dict[str, list[float]] = {name: [] for name in jittered}

    def sampling() -> None:
        for name, s in jittered.items():
            ages[name].append(float(s.read_age()[0]))
        for name, s in sampled.items():
            sp, j, row = envs.manager.storage(type(s)).sampler, s.index, trace[name]
            step = int(sp.samples.steps[0])
            period, phase = float(sp.rates.period[0, j]), float(sp.rates.phase[0, j])
            row["fresh"].append(bool(sp.take[0, j]))
            row["due"].append(_due(step, period, phase, envs.dt))
            row["age"].append(float(s.read_age()[0]))
            row["step"].append(step)
            row["period"].append(period)
            row["phase"].append(phase)
            row["dropout"].append(float(sp.rates.dropout[0, j]))

    def snapshot() -> tuple[np.ndarray, np.ndarray]:
        # env 0's current GT and measured return columns of every sensor (flat, whatever its fields)
        storages = [(s, envs.manager.storage(type(s))) for s in sensors.values()]
        ground_truth = [storage.gt.cache[0, s.return_slice] for s, storage in storages]
        measured = [storage.measured.cache[0, s.return_slice] for s, storage in storages]
        return (
            np.concatenate([g.float().numpy() for g in ground_truth]),
            np.concatenate([m.float().numpy() for m in measured]),
        )

    obs, info = envs.reset(seed=seed)
    envs.action_space.seed(seed)
    gts, ms = [], []
    g, m = snapshot()
    gts.append(g)
    ms.append(m)
    sampling()
    # episode starts of env 0 (NEXT_STEP autoreset: the step after a done is the reset step), and, under
    # [latency], the commanded and the applied action of every step (what the latency estimate compares)
    resets = [True]
    latency = "action_applied" in info
    commanded: list[np.ndarray] = []
    applied: list[np.ndarray] = []
    drawn: list[np.ndarray] = []
    done = False
    for _ in range(steps):
        if model is not None:
            action, _ = model.predict(obs, deterministic=True)
        else:
            action = envs.action_space.sample()
        obs, _, terminated, truncated, info = envs.step(action)
        resets.append(done)  # the step after a done is the next episode's reset step
        done = bool(np.asarray(terminated)[0] or np.asarray(truncated)[0])
        if latency:
            commanded.append(np.asarray(action, dtype=float)[0].reshape(-1))
            applied.append(np.asarray(info["action_applied"], dtype=float)[0].reshape(-1))
            drawn.append(np.asarray(info["action_latency"], dtype=float)[0])
        g, m = snapshot()
        gts.append(g)
        ms.append(m)
        sampling()
    envs.close()
    actions = (
        {"commanded": np.array(commanded), "applied": np.array(applied), "latency": np.array(drawn)}
        if latency and commanded
        else None
    )
    times = np.arange(steps + 1) * envs.dt
    gt, measured = np.stack(gts), np.stack(ms)
    out: dict[str, dict[str, Any]] = {}
    for name, row in trace.items():
        c = names.index(name) if name in names else names.index(f"{name}[0]")
        fresh, due = np.array(row["fresh"]), np.array(row["due"])
        out[name] = {
            "channel": names[c],
            "gt": gt[:, c],
            "measured": measured[:, c],
            "fresh": fresh,
            "due": due,
            "dropped": due & ~fresh,
            "age": np.array(row["age"]),
            "step": np.array(row["step"]),
            "period": np.array(row["period"]),
            "phase": np.array(row["phase"]),
            "dropout": np.array(row["dropout"]),
            "delay": sensors[name].options.delay,
        }
    aged = {name: np.array(a) for name, a in ages.items()}
    return _Recording(times, names, gt, measured, out, np.array(resets), actions, aged)


@dataclass
class _Recording:
    """What :func:`_record` recorded: per step (``steps + 1`` rows, the reset first) env 0's traces."""

    times: np.ndarray
    names: list[str]
    gt: np.ndarray
    measured: np.ndarray
    sampling: dict[str, dict[str, Any]]
    resets: np.ndarray
    actions: dict[str, np.ndarray] | None
    #: per jittered sensor without a sampler, the age (s) of every reading
    ages: dict[str, np.ndarray] = field(default_factory=dict)


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
    t = np.arange(len(gt))
    src = t - k
    valid = (k >= 0) & (k <= episode_step)  # the sample behind the reading belongs to this episode
    new = valid.copy()
    new[1:] &= ~(valid[:-1] & (src[1:] == src[:-1]))  # the first step that shows each sample
    idx = np.flatnonzero(new)
    episode = np.cumsum(episode_step == 0)[idx]
    same = episode[1:] == episode[:-1]  # consecutive samples of one episode
    blocks = DRIFT_BLOCK if drift else 0  # a drift term: one intercept per block of samples
    fit = regress_filter(measured[idx], gt[src[idx]], same, np.diff(src[idx]), gain=scale, blocks=blocks)
    model = None
    if scale or lowpass:
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
        resid = measured[idx] - model["references"][0]
    else:
        resid = measured[idx] - gt[src[idx]]
    d = np.diff(resid)[same]
    noise = float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2)) if d.size else 0.0
    window = max(3, len(resid) // 4)
    bias = float(np.median(resid[:window])) if resid.size else 0.0
    drift = float(np.median(resid[-window:]) - bias) if resid.size else 0.0
    # the gaps between samples, but not the first of an episode: the reset sample is always taken, and
    # the next one falls wherever the episode's phase puts it
    after_reset = episode_step[src[idx]][:-1] == 0
    gaps = np.diff(src[idx])[same & ~after_reset]
    gaps = gaps[gaps > 0]
    if gaps.size:
        lossless = gaps[gaps <= 1.5 * np.median(gaps)]
        period = float(lossless.mean())
        due = np.maximum(1, np.round(gaps / period)).astype(int)
        lost, n_due = int((due - 1).sum()), int(due.sum())
    else:
        period, lost, n_due, due = float("nan"), 0, 0, np.zeros(0, int)
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


def verdict_z(comparisons: int, alpha: float = 0.05) -> float:
    """How many standard errors an estimate may lie from its configured value before ``inspect`` calls it
    "differs": the two-sided normal quantile that keeps the chance of any false alarm among
    ``comparisons`` checks of a correct config at ``alpha`` (Bonferroni). A fixed 2 standard errors gave a
    5% false alarm per check, so a table of 15 checks of a correct config showed "differs" about half the
    time (a correct bias was called off at 2.3 sigma).

    Example:
        >>> round(verdict_z(1), 2), round(verdict_z(15), 2), round(verdict_z(40), 2)
        (1.96, 2.94, 3.23)
    """
    from scipy.stats import norm

    return float(norm.isf(alpha / (2 * max(1, comparisons))))


def _g(x: float) -> str:
    return f"{x:.3g}"


def _density_terms(options: Any, component: int, dt: float) -> dict[str, Any] | None:
    """The per-step noise and random-walk std that ``noise_density``, ``bandwidth`` and
    ``random_walk_density`` (the units ``sensorgym fit`` writes) give one component at control step ``dt``,
    as :func:`estimate_channel` sees them, and ``filter``: the share of a white noise of std ``sigma`` per
    own sample (from ``noise`` or from ``noise_density``) that the configured ``bandwidth`` leaves in that
    estimate; ``None`` where one of them (or ``update_period``) is drawn per episode.

    The noise is ``sigma = N / sqrt(T_s)`` per sample; through the low-pass filter ``a = exp(-2 pi f_c
    T_s)`` (docs/error_model.md: the filter takes the white noise of either option) the reading's spread
    is ``sigma sqrt((1 - a) / (1 + a))`` and consecutive reads, ``m`` samples apart, share a fraction
    ``a^m`` of it, so their difference (what the estimate is made of) shows ``sqrt(1 - a^m)`` of it. The
    walk is ``K sqrt(dt)`` per step.

    Example:
        >>> import sensorgym as sg
        >>> opts = sg.StateSensorOptions(key="obs", noise_density=0.01, update_period=0.01)
        >>> round(_density_terms(opts, 0, dt=0.05)["noise"], 6)  # 0.01 / sqrt(0.01)
        0.1
        >>> opts = sg.StateSensorOptions(key="obs", noise=0.2, bandwidth=3.0)  # a = 0.390 at T_s = 0.05 s
        >>> round(0.2 * _density_terms(opts, 0, dt=0.05)["filter"], 4)
        0.1035
    """
    values = [
        _number(_component(getattr(options, name, 0.0), component))
        for name in ("noise_density", "bandwidth", "random_walk_density")
    ]
    period = _number(getattr(options, "update_period", 0.0))
    if any(v is None for v in values) or period is None:
        return None
    density, bandwidth, walk_density = values
    ts = period if period > 0 else dt
    noise = density / math.sqrt(ts)
    note = ""
    if density:
        note = f"noise_density {_g(density)} at T_s = {_g(ts)} s is a noise of {_g(noise)} per sample"
    spread = share = 1.0
    if bandwidth:
        a = math.exp(-2.0 * math.pi * bandwidth * ts)
        m = max(dt / ts, 1.0)
        spread = math.sqrt((1 - a) / (1 + a))
        share = spread * math.sqrt(1 - a**m)
    if density and bandwidth:
        noise *= share
        note += f"; the {_g(bandwidth)} Hz filter leaves {_g(noise)} in the step-to-step difference of reads"
    walk = walk_density * math.sqrt(dt)
    if walk:
        note += ("; " if note else "") + f"random_walk_density {_g(walk_density)} drifts {_g(walk)} per step"
    return {
        "noise": noise,
        "walk": walk,
        "note": note,
        "filter": share,
        "spread": spread,
        "bandwidth": bandwidth,
    }


def compare_channel(
    options: Any,
    component: int,
    est: dict[str, Any],
    dt: float,
    gt: np.ndarray | None = None,
    z: float | None = None,
) -> dict[str, Any]:
    """Configured vs estimated for one channel: per quantity the configured text, the estimate text, a
    verdict (``"ok"`` or why it differs), and plain-language notes on estimates that cannot match.

    A statistical verdict says "differs" only when the estimate lies more than ``z`` standard errors
    from the configured value (:func:`verdict_z` of the number of checks in the whole table; default:
    this channel's checks alone). For a sensor with its own rate or lost samples (``est`` from
    :func:`estimate_sampled`) it also compares the update period and the dropout.

    Example:
        >>> import sensorgym as sg
        >>> opts = sg.StateSensorOptions(key="obs", noise=0.02, resolution=0.02)
        >>> est = {"delay_steps": 0, "noise_std": 0.021, "noise_se": 0.002, "bias": 0.0, "bias_se": 0.003,
        ...        "drift_end": 0.001, "drift_se": 0.004, "quantization": 0.02, "samples": 200}
        >>> c = compare_channel(opts, 0, est, dt=0.05)
        >>> c["rows"]["noise std"]
        ('0.02', '0.021 ± 0.002', 'ok')
        >>> any("quantization" in n for n in c["notes"])
        True
    """
    n = int(est.get("samples", 0))
    sampled = "period_steps" in est
    z = verdict_z(5 if sampled else 3) if z is None else float(z)
    rows: dict[str, tuple[str, str, str]] = {}
    notes: list[str] = []
    delay, jitter = getattr(options, "delay", 0.0), getattr(options, "jitter", 0.0)
    noise = _component(getattr(options, "noise", None), component)
    bias = _component(getattr(options, "bias", None), component)
    walk = _component(getattr(options, "random_walk", None), component)
    res = _component(getattr(options, "resolution", None), component)
    randomized = [
        name
        for name, v in (
            ("delay", delay),
            ("jitter", jitter),
            ("noise", noise),
            ("bias", bias),
            ("random walk", walk),
            ("resolution", res),
        )
        if v is not None and _number(v) is None
    ]
    if randomized:
        notes.append(
            f"{', '.join(randomized)} {'is' if len(randomized) == 1 else 'are'} drawn per episode from a "
            "distribution: the estimate is this episode's value, not the configured range"
        )
    sigma, b, rw, q = (_number(v) for v in (noise, bias, walk, res))
    d_s, j_s = _number(delay), _number(jitter)
    density = _density_terms(options, component, dt)
    if density is None:  # a density term or the sample interval is drawn per episode
        sigma = rw = None
        notes.append("the error-model densities are drawn per episode: the estimate is this episode's value")
    elif density["note"]:
        sigma = math.sqrt((sigma or 0.0) ** 2 + density["noise"] ** 2) if sigma is not None else None
        rw = math.sqrt((rw or 0.0) ** 2 + density["walk"] ** 2) if rw is not None else None
        notes.append(density["note"])
    # a per-step noise behind a bandwidth: the filter takes it as it takes a noise density's
    # (docs/error_model.md); compared unfiltered, a correct noise 0.2 behind a 3 Hz filter at dt 0.05 was
    # "0.104, differs"
    written, per_step = sigma, _number(noise) if noise is not None else None
    if density is not None and density["filter"] < 1.0 and sigma is not None and per_step:
        filtered = per_step * density["filter"]
        sigma = math.sqrt(max(sigma**2 - per_step**2, 0.0) + filtered**2)
        notes.append(
            f"noise {_g(per_step)} per sample behind the {_g(density['bandwidth'])} Hz filter: the "
            f"reading's noise has std {_g(per_step * density['spread'])} (noise·√((1 − a)/(1 + a))), "
            f"and the step-to-step difference of reads, which the estimate is made of, shows {_g(filtered)} "
            f"of it (expected ≈ {_g(filtered)})"
        )

    # delay: D steps, plus 0..ceil(jitter/dt) steps of jitter
    est_d = int(est["delay_steps"])
    if d_s is not None and j_s is not None and dt > 0:
        base = round(d_s / dt)
        extra = math.ceil(j_s / dt - 1e-9) if j_s > 0 else 0
        text = f"{base} step{'s' * (base != 1)}" + (f" (+0..{extra} jitter)" if extra else "")
        ok = base <= est_d <= base + extra
        got = f"{est_d} step{'s' * (est_d != 1)}"
        rows["delay"] = (text, got, "ok" if ok else f"differs (expected {base}..{base + extra})")
        if extra and "delay_age_steps" in est:  # each reading matched with the GT at its sample's step
            notes.append(
                f"jitter re-reads samples up to {extra} step{'s' * (extra != 1)} older, so the delay "
                f"estimate lies in {base}..{base + extra}; each reading is compared with the ground truth "
                "at the step its sample was taken (its age), so the jitter does not inflate the noise "
                "estimate"
            )
        elif extra and gt is not None and len(gt) > 2:
            move = float(np.median(np.abs(np.diff(gt))))
            notes.append(
                f"jitter re-reads samples up to {extra} step{'s' * (extra != 1)} older, so the delay "
                "estimate lies in "
                f"{base}..{base + extra} and the residual also carries the signal's change per step "
                f"(median {_g(move)} here), which inflates the noise estimate"
            )
    else:
        rows["delay"] = ("randomized", f"{est_d} steps", "this episode's value")

    # noise: the estimator sees noise, quantization error and the random walk's steps
    est_n, se_n = float(est["noise_std"]), float(est.get("noise_se", 0.0))
    if sigma is not None:
        # the walk's and the Gauss-Markov bias's change between consecutive samples (inspect_drift.py)
        slow = drift_terms(options, component, dt)
        wander = step_wander(slow, float(est.get("period_steps", 1.0))) if slow else (rw or 0.0) ** 2
        expected = math.sqrt(sigma**2 + (q**2 / 12 if q else 0.0) + wander / 2)
        tol = max(z * se_n, 0.1 * expected, 1e-6)
        if abs(est_n - expected) <= tol:
            verdict = "ok"
        elif est_n > expected and j_s and "delay_age_steps" not in est:
            verdict = f"higher: jitter (expected ≈ {_g(expected)} without it)"
        else:
            verdict = f"differs (expected ≈ {_g(expected)})"
        rows["noise std"] = (_g(written), f"{_g(est_n)} ± {_g(se_n)}", verdict)
        if q:
            notes.append(
                f"quantization (step {_g(q)}) adds up to q/√12 = {_g(q / math.sqrt(12))} of rounding error "
                f"to the noise estimate (expected ≈ √(noise² + q²/12) = {_g(expected)})"
                + (
                    f"; noise under half a step ({_g(q / 2)}) is partly hidden by the rounding"
                    if sigma < q / 2
                    else ""
                )
            )
        if rw:
            notes.append(f"the random walk's steps (std {_g(rw)}) add rw/√2 = {_g(rw / math.sqrt(2))} too")
    else:
        rows["noise std"] = ("randomized", f"{_g(est_n)} ± {_g(se_n)}", "this episode's value")

    # bias and drift: the first quarter's median residual, and the last quarter's minus it, with what the
    # random walk and the Gauss-Markov bias make of them (inspect_drift.py)
    drift_rows, drift_notes = bias_drift_rows(options, component, est, dt, z, b, rw, q)
    rows.update(drift_rows)
    notes += drift_notes

    # quantization: the grid step of the measured values
    est_q = float(est["quantization"])
    if q is not None:
        conf = _g(q) if q else "none"
        got = _g(est_q) if est_q else "none"
        ratio = est_q / q if q else 0.0
        ok = (not q and not est_q) or bool(
            q and est_q and round(ratio) >= 1 and abs(ratio - round(ratio)) < 1e-3
        )
        verdict = "ok" if ok else ("not detected (too few distinct values)" if q else "differs")
        if ok and q and round(ratio) > 1:
            verdict = "ok (a multiple: the trace used every other step)"
        rows["quantization"] = (conf, got, verdict)
    else:
        rows["quantization"] = ("randomized", _g(est_q) if est_q else "none", "this episode's value")

    period, dropout = getattr(options, "update_period", 0.0), getattr(options, "dropout", 0.0)
    p_hi = period.bounds[1] if hasattr(period, "bounds") else float(period or 0.0)
    d_hi = dropout.bounds[1] if hasattr(dropout, "bounds") else float(dropout or 0.0)
    if sampled:
        burst = getattr(options, "dropout_burst", None)
        _sampler_rows(rows, notes, period, dropout, burst, est, dt, z, skips=skips_samples(options))
    elif p_hi > dt or d_hi > 0:
        notes.append(
            "the sampler holds each sample until the next one (update_period, dropout): the reading lags the "
            "ground truth by up to a period, which the delay and noise estimates include; the sampler figure "
            "shows the samples taken, those lost and the reading's age"
        )
    model_rows, model_notes = error_model_rows(options, component, est, dt, z)
    rows.update(model_rows)
    notes += model_notes
    if n and n < 100:
        notes.append(
            f"short trace ({n} samples): every estimate is rough (see the ± values); record more with "
            "--steps 500"
        )
    return {"rows": rows, "notes": notes}


def _sampler_rows(
    rows: dict[str, tuple[str, str, str]],
    notes: list[str],
    period: Any,
    dropout: Any,
    burst: Any,
    est: dict[str, Any],
    dt: float,
    z: float,
    skips: bool = False,
) -> None:
    """The update period and dropout rows of a sensor with its own rate or lost samples; the dropout's
    verdict tests the loss count against its law under the configured value: binomial, or with ``burst``
    (``dropout_burst``) that of bursty losses
    (:func:`~sensorgym.app.inspect_error_model.loss_fraction_ok`). ``skips`` (jitter): samples the reading
    skipped count as lost too, so only too few missing samples differ."""
    est_p, due, est_d = float(est["period_steps"]), int(est["due"]), float(est["dropout"])
    got_p = f"{est_p:.3g} steps" if math.isfinite(est_p) else "no 2 samples"
    t = _number(period)
    if t is None:
        rows["update period"] = ("randomized", got_p, "this episode's value")
    else:
        steps = max(t / dt, 1.0)  # faster than the control step: a fresh sample every step
        conf = f"{_g(t)} s = {_g(steps)} step{'s' * (steps != 1)}" if t > dt else f"{_g(t)} s: every step"
        ok = math.isfinite(est_p) and abs(est_p - steps) <= 0.5
        rows["update period"] = (conf, got_p, "ok" if ok else f"differs (expected {_g(steps)})")
    p = _number(dropout)
    got_d = f"{est_d:.3g} of {due} due" if due else "none due"
    if p is None:
        rows["dropout"] = ("randomized", got_d, "this episode's value")
    else:
        # the count's own law under the configured value: binomial, or of bursts (dropout_burst)
        ok = loss_fraction_ok(round(est_d * due), due, p, z, burst, est.get("runs"), at_least=skips)
        rows["dropout"] = (_g(p), got_d, "ok" if ok else "differs")
        if skips:
            notes.append(
                "jitter skips samples (a read whose delay shrinks shows a newer sample than the next "
                "one): they leave the gap a lost sample leaves, so the dropout estimate counts both and "
                "only a loss count below what the configured dropout gives differs"
            )
    notes.append(
        "the sensor holds each sample until the next one (update_period, dropout): its readings are compared "
        "with the ground truth at the step their sample was taken (their age), each sample once, so the hold "
        "does not inflate the noise estimate; the sampler figure shows the samples taken, those lost and "
        "the reading's age"
    )


def format_summary(summary: list[dict[str, Any]], dt: float, z: float | None = None, checks: int = 0) -> str:
    """The table ``sensorgym inspect`` prints: per channel, each quantity configured vs estimated (± one
    standard error), a verdict, and notes on estimates that cannot match the configured value; with ``z``,
    a line saying how far an estimate may lie before its verdict says "differs" (``checks``: the number
    of statistical checks in the table, :func:`verdict_z`)."""
    if not summary or "rows" not in summary[0]:  # estimates only (no config to compare with)
        lines = [
            f"{'channel':<16} {'delay [steps]':>13} {'delay [s]':>9} {'noise std':>10} {'bias':>9} "
            f"{'drift@end':>10} {'quant. step':>11}"
        ]
        for row in summary:
            q = f"{row['quantization']:.4g}" if row["quantization"] else "none"
            lines.append(
                f"{row['channel']:<16} {row['delay_steps']:>13d} {row['delay_steps'] * dt:>9.3f} "
                f"{row['noise_std']:>10.4f} {row['bias']:>9.4f} {row['drift_end']:>10.4f} {q:>11}"
            )
        return "\n".join(lines)
    lines = []
    for row in summary:
        lines.append(f"{row['channel']:<16} {'configured':<24} {'estimated':<20} verdict")
        for name, (conf, got, verdict) in row["rows"].items():
            lines.append(f"  {name:<14} {conf:<24} {got:<20} {verdict}")
        for note in row["notes"]:
            lines.append(f"  note: {note}")
        lines.append("")
    lines.append(
        f"delay in control steps of {dt:g} s; estimated ± one standard error; drift = change of the offset "
        "between the first and the last quarter of the trace"
    )
    if z is not None:
        lines.append(
            f"a statistical verdict says 'differs' only beyond {z:.2f} standard errors: with {checks} such "
            "checks in this table, a correct config shows one with a chance of 5% (Bonferroni)"
        )
    return "\n".join(lines)


#: characters of a panel title per line at its font size (7 pt) on the 9-inch-wide figure
_TITLE_WIDTH = 150


def _panel_title(s: dict[str, Any]) -> str:
    """A channel panel's title: each quantity configured -> estimated (wrapped by :func:`plot_traces`)."""
    if "rows" in s:
        parts = [f"{k} {conf} → {got.split(' ± ')[0]}" for k, (conf, got, _) in s["rows"].items()]
        return "configured → estimated: " + "; ".join(parts)
    q = f"{s['quantization']:.3g}" if s["quantization"] else "none"
    return (
        f"delay {s['delay_steps']} steps, noise {s['noise_std']:.3g}, bias {s['bias']:.3g}, "
        f"drift {s['drift_end']:.3g}, quantization {q}"
    )


def plot_traces(result: InspectResult, path: str | Path, max_channels: int = 12) -> Path:
    """A PNG with one panel per channel: ground truth (line) and measured reading (steps), each panel
    titled with its quantities configured -> estimated (wrapped onto as many lines as they need, so that
    none is cut at the figure's edge), and every episode reset marked by a dotted line (the traces jump
    there: a new episode starts from another state)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(len(result.channels), max_channels)
    titles = [textwrap.wrap(_panel_title(result.summary[c]), _TITLE_WIDTH) for c in range(n)]
    lines = max((len(t) for t in titles), default=1)
    fig, axes = plt.subplots(n, 1, figsize=(9, (2.0 + 0.13 * lines) * n + 0.7), sharex=True, squeeze=False)
    resets = (
        result.times[1:][np.asarray(result.resets, bool)[1:]] if result.resets is not None else np.zeros(0)
    )
    for c, ax in enumerate(axes[:, 0]):
        ax.plot(result.times, result.gt[:, c], color="black", lw=1.4, label="ground truth")
        ax.step(
            result.times,
            result.measured[:, c],
            where="post",
            color="tab:red",
            lw=1.0,
            alpha=0.85,
            label="measured",
        )
        for k, r in enumerate(resets):
            ax.axvline(r, color="gray", ls=":", lw=0.9, label="episode reset" if k == 0 else None)
        ax.set_ylabel(result.channels[c], fontsize=9)
        ax.set_title("\n".join(titles[c]), fontsize=7, loc="left")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _seconds(x: Any) -> str:
    return f"{x * 1000:.3g} ms" if x < 1 else f"{x:.3g} s"


def plot_sampling(result: InspectResult, path: str | Path) -> dict[str, dict[str, int]]:
    """A PNG for the sensors with their own rate or dropout (see docs/pipeline.md): per sensor, its first
    channel's ground truth (line), the measured reading (steps: held between samples), a dot at each
    sample taken and an x at each due sample that was lost (both at the ground truth of their step), and
    below it the age of the reading (s since the sample behind it was taken). Episode resets are dotted lines.

    Returns, per sensor, the counts of the markers drawn (``fresh``, ``dropped``; read back from the
    figure's artists) and of the due steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result.sampling)
    fig, axes = plt.subplots(
        2 * len(names),
        1,
        figsize=(9, 3.1 * len(names) + 0.6),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [2.2, 1.0] * len(names)},
    )
    counts: dict[str, dict[str, int]] = {}
    t = result.times
    for i, name in enumerate(names):
        d = result.sampling[name]
        ax, ax_age = axes[2 * i, 0], axes[2 * i + 1, 0]
        ax.plot(t, d["gt"], color="black", lw=1.2, label="ground truth")
        ax.step(t, d["measured"], where="post", color="tab:red", lw=1.0, alpha=0.85, label="measured (held)")
        fresh = ax.plot(
            t[d["fresh"]], d["gt"][d["fresh"]], "o", ms=3.2, color="tab:blue", label="sample taken", zorder=3
        )[0]
        dropped = ax.plot(
            t[d["dropped"]],
            d["gt"][d["dropped"]],
            "x",
            ms=6,
            mew=1.6,
            color="tab:orange",
            label="due, lost (dropout)",
            zorder=4,
        )[0]
        resets = t[1:][d["step"][1:] == 0]
        for a in (ax, ax_age):
            for r in resets:
                a.axvline(r, color="gray", ls=":", lw=0.9)
        ax_age.step(t, d["age"], where="post", color="tab:purple", lw=1.0)
        ax_age.set_ylabel("age [s]", fontsize=8)
        ax.set_ylabel(d["channel"], fontsize=9)
        counts[name] = {
            "fresh": len(fresh.get_xdata()),
            "dropped": len(dropped.get_xdata()),
            "due": int(d["due"].sum()),
        }
        period, phase, p = d["period"][-1], d["phase"][-1], d["dropout"][-1]
        rate = f"{_seconds(period)} ({1 / period:.3g} Hz)" if period > 0 else "every step"
        ax.set_title(
            f"{name}: update period {rate}, phase {_seconds(phase)}, dropout {p:.3g}"
            + (f", delay {d['delay']}" if d["delay"] else "")
            + f" (this episode) — {counts[name]['fresh']} samples taken, {counts[name]['dropped']} lost "
            f"of {counts[name]['due']} due in {len(t)} steps",
            fontsize=7.5,
            loc="left",
        )
        ax.grid(alpha=0.3)
        ax_age.grid(alpha=0.3)
    if names:
        axes[0, 0].legend(loc="upper right", fontsize=7, ncol=4)
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return counts


def sampling_path(out: str | Path) -> Path:
    """Where ``sensorgym inspect`` writes the sampler figure: beside ``out``, ``<stem>_sampler.png``.

    Example:
        >>> sampling_path("sensorgym_outputs/inspect.png").as_posix()
        'sensorgym_outputs/inspect_sampler.png'
    """
    out = Path(out)
    return out.with_name(f"{out.stem}_sampler{out.suffix or '.png'}")


def run_inspect(
    cfg: Config,
    steps: int = 200,
    seed: int = 0,
    out: str | Path | None = None,
    model: Any = None,
    max_lag: int = 20,
) -> InspectResult:
    """Record, estimate each channel and compare it with its configured values (and, with ``[latency]``,
    the action delay and jitter); plot to ``out`` (and, for sensors with their own rate or dropout, their
    samples, losses and ages to :func:`sampling_path`).

    The verdicts share one threshold, :func:`verdict_z` of the number of statistical checks in the table
    (noise, bias and drift per channel, dropout per sampled channel, and each configured noise density,
    bandwidth, scale factor and mean burst), so that a correct config shows
    "differs" anywhere in the table with a chance of about 5%."""
    rec = _record(cfg, steps, seed=seed, model=model)
    times, names, gt, measured, sampled = rec.times, rec.names, rec.gt, rec.measured, rec.sampling
    dt = float(times[1] - times[0]) if len(times) > 1 else 0.0
    episode = episode_steps(rec.resets)
    parts = [(name, *_split(name)) for name in names]
    checks = sum(
        3 + (sensor in sampled) + error_model_checks(cfg.sensors[sensor], component)
        for _, sensor, component in parts
        if sensor in cfg.sensors
    )
    z = verdict_z(checks)
    summary = []
    for c, (name, sensor, component) in enumerate(parts):
        # a configured scale factor or filter: the noise, bias and drift against the GT through their fit
        terms = model_terms(cfg.sensors[sensor], component, dt) if sensor in cfg.sensors else {}
        if sensor in sampled and dt > 0:  # held readings: compare each sample with the GT of its step
            age = np.round(sampled[sensor]["age"] / dt).astype(int)
            row = estimate_sampled(
                gt[:, c], measured[:, c], age, episode, due=sampled[sensor]["due"], **terms
            )
        elif sensor in rec.ages and dt > 0:  # jitter: compare each reading with the GT its sample saw
            age = np.round(rec.ages[sensor] / dt).astype(int)
            row = estimate_sampled(
                gt[:, c], measured[:, c], age, episode, due=np.ones(len(age), bool), **terms
            )
            for key in ("period_steps", "dropout", "due", "runs"):  # no sampler: no rate, nothing lost
                row.pop(key)
        else:
            row = estimate_channel(gt[:, c], measured[:, c], max_lag=max_lag, episode_step=episode, **terms)
        entry = {"channel": name, **row}
        if sensor in cfg.sensors:
            entry.update(compare_channel(cfg.sensors[sensor], component, row, dt, gt[:, c], z=z))
        summary.append(entry)
    if rec.actions is not None and cfg.latency is not None:
        summary.append(compare_latency(cfg.latency, rec.actions, dt))
    result = InspectResult(
        times,
        names,
        gt,
        measured,
        summary,
        sampling=sampled,
        resets=rec.resets,
        actions=rec.actions,
        z=z,
        checks=checks,
    )
    if out is not None:
        result.figure = plot_traces(result, out)
        if sampled:
            plot_sampling(result, sampling_path(out))
            result.sampler_figure = sampling_path(out)
    return result


def _split(channel: str) -> tuple[str, int]:
    """``"angle[1]"`` -> ``("angle", 1)``; ``"gyro"`` -> ``("gyro", 0)``."""
    sensor, _, index = channel.partition("[")
    return sensor, int(index.rstrip("]")) if index else 0
