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


def record(
    cfg: Config, steps: int, seed: int = 0, model: Any = None
) -> tuple[np.ndarray, list, np.ndarray, np.ndarray]:
    """Step one env for ``steps`` steps (random actions, or ``model.predict``) and record every sensor's
    GT and measured reading (current read, no history). Returns (times, channel names, gt, measured)."""
    times, names, gt, measured, _ = _record(cfg, steps, seed, model)
    return times, names, gt, measured


def _due(step: int, period: float, phase: float, dt: float) -> bool:
    """The sampler's due rule (docs/pipeline.md) at episode step ``step`` (the reset step always
    samples), in float64 as the sampler computes it."""
    if step == 0 or period <= dt:
        return True
    now = math.floor((step * dt - phase) / period + 1e-9)
    before = math.floor(((step - 1) * dt - phase) / period + 1e-9)
    return now > before


def _record(
    cfg: Config, steps: int, seed: int = 0, model: Any = None
) -> tuple[np.ndarray, list, np.ndarray, np.ndarray, dict[str, dict[str, Any]]]:
    from ..core.sampler import needs_sampler
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

    def sampling() -> None:
        for name, s in sampled.items():
            sp, j, row = envs.manager.storage(type(s)).sampler, s.index, trace[name]
            step = int(sp.steps[0])
            period, phase = float(sp.period[0, j]), float(sp.phase[0, j])
            row["fresh"].append(bool(sp.take[0, j]))
            row["due"].append(_due(step, period, phase, envs.dt))
            row["age"].append(float(s.read_age()[0]))
            row["step"].append(step)
            row["period"].append(period)
            row["phase"].append(phase)
            row["dropout"].append(float(sp.dropout[0, j]))

    def snapshot() -> tuple[np.ndarray, np.ndarray]:
        # env 0's current GT and measured return columns of every sensor (flat, whatever its fields)
        storages = [(s, envs.manager.storage(type(s))) for s in sensors.values()]
        ground_truth = [storage.ground_truth_cache[0, s.return_slice] for s, storage in storages]
        measured = [storage.measured_cache[0, s.return_slice] for s, storage in storages]
        return (
            np.concatenate([g.float().numpy() for g in ground_truth]),
            np.concatenate([m.float().numpy() for m in measured]),
        )

    obs, _ = envs.reset(seed=seed)
    envs.action_space.seed(seed)
    gts, ms = [], []
    g, m = snapshot()
    gts.append(g)
    ms.append(m)
    sampling()
    for _ in range(steps):
        if model is not None:
            action, _ = model.predict(obs, deterministic=True)
        else:
            action = envs.action_space.sample()
        obs, *_ = envs.step(action)
        g, m = snapshot()
        gts.append(g)
        ms.append(m)
        sampling()
    envs.close()
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
    return times, names, gt, measured, out


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


def estimate_channel(gt: np.ndarray, measured: np.ndarray, max_lag: int = 20) -> dict[str, float]:
    """Delay (steps), bias, noise std, drift at the end and quantization step of one channel,
    estimated from its ground-truth and measured traces only."""
    gt, measured = np.asarray(gt, float), np.asarray(measured, float)
    n = len(gt)
    max_lag = max(0, min(max_lag, n // 3))
    if np.ptp(gt) == 0:  # a constant signal carries no timing: report no delay
        best = 0
    else:
        scores = [np.var(measured[k:] - gt[: n - k]) for k in range(max_lag + 1)]
        best = int(np.argmin(scores))
    resid = measured[best:] - gt[: n - best]
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
    bias_se = 1.2533 * noise / math.sqrt(window)
    return {
        "delay_steps": best,
        "bias": bias,
        "noise_std": noise,
        "drift_end": drift,
        "quantization": _quantization(measured),
        "samples": len(resid),
        "noise_se": float(noise_se),
        "bias_se": float(bias_se),
        "drift_se": float(math.sqrt(2.0) * bias_se),
    }


def _component(value: Any, i: int) -> Any:
    """Component ``i`` of an option (a number, a per-component sequence or a distribution)."""
    if isinstance(value, (list, tuple)):
        return value[i] if i < len(value) else value[-1]
    return value


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _g(x: float) -> str:
    return f"{x:.3g}"


def _density_terms(options: Any, component: int, dt: float) -> dict[str, Any] | None:
    """The per-step noise and random-walk std that ``noise_density``, ``bandwidth`` and
    ``random_walk_density`` (the units ``sensorgym fit`` writes) give one component at control step ``dt``,
    as :func:`estimate_channel` sees them; ``None`` where one of them (or ``update_period``) is drawn per
    episode.

    The noise is ``sigma = N / sqrt(T_s)`` per sample; through the low-pass filter ``a = exp(-2 pi f_c
    T_s)`` the reading's spread is ``sigma sqrt((1 - a) / (1 + a))`` and consecutive reads, ``m`` samples
    apart, share a fraction ``a^m`` of it, so their difference shows ``sqrt(1 - a^m)`` of it. The walk is
    ``K sqrt(dt)`` per step.

    Example:
        >>> import sensorgym as sg
        >>> opts = sg.StateSensorOptions(key="obs", noise_density=0.01, update_period=0.01)
        >>> round(_density_terms(opts, 0, dt=0.05)["noise"], 6)  # 0.01 / sqrt(0.01)
        0.1
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
    if density and bandwidth:
        a = math.exp(-2.0 * math.pi * bandwidth * ts)
        m = max(dt / ts, 1.0)
        noise *= math.sqrt((1 - a) / (1 + a)) * math.sqrt(1 - a**m)
        note += f"; the {_g(bandwidth)} Hz filter leaves {_g(noise)} in the step-to-step difference of reads"
    walk = walk_density * math.sqrt(dt)
    if walk:
        note += ("; " if note else "") + f"random_walk_density {_g(walk_density)} drifts {_g(walk)} per step"
    return {"noise": noise, "walk": walk, "note": note}


def compare_channel(
    options: Any, component: int, est: dict[str, Any], dt: float, gt: np.ndarray | None = None
) -> dict[str, Any]:
    """Configured vs estimated for one channel: per quantity the configured text, the estimate text, a
    verdict (``"ok"`` or why it differs), and plain-language notes on estimates that cannot match.

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

    # delay: D steps, plus 0..ceil(jitter/dt) steps of jitter
    est_d = int(est["delay_steps"])
    if d_s is not None and j_s is not None and dt > 0:
        base = round(d_s / dt)
        extra = math.ceil(j_s / dt - 1e-9) if j_s > 0 else 0
        text = f"{base} step{'s' * (base != 1)}" + (f" (+0..{extra} jitter)" if extra else "")
        ok = base <= est_d <= base + extra
        got = f"{est_d} step{'s' * (est_d != 1)}"
        rows["delay"] = (text, got, "ok" if ok else f"differs (expected {base}..{base + extra})")
        if extra and gt is not None and len(gt) > 2:
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
        expected = math.sqrt(sigma**2 + (q**2 / 12 if q else 0.0) + (rw**2 / 2 if rw else 0.0))
        tol = max(2 * se_n, 0.1 * expected, 1e-6)
        if abs(est_n - expected) <= tol:
            verdict = "ok"
        elif est_n > expected and j_s:
            verdict = f"higher: jitter (expected ≈ {_g(expected)} without it)"
        else:
            verdict = f"differs (expected ≈ {_g(expected)})"
        rows["noise std"] = (_g(sigma), f"{_g(est_n)} ± {_g(se_n)}", verdict)
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

    # bias: the median residual at the start
    est_b, se_b = float(est["bias"]), float(est.get("bias_se", 0.0))
    if b is not None:
        tol = 2 * se_b + (q / 2 if q else 0.0) + 1e-9
        rows["bias"] = (_g(b), f"{_g(est_b)} ± {_g(se_b)}", "ok" if abs(est_b - b) <= tol else "differs")
    else:
        rows["bias"] = ("randomized", f"{_g(est_b)} ± {_g(se_b)}", "this episode's value")

    # drift: the random walk's displacement between the first and the last quarter of the trace
    est_r, se_r = float(est["drift_end"]), float(est.get("drift_se", 0.0))
    if rw is not None:
        spread = rw * math.sqrt(0.75 * max(n, 1)) if rw else 0.0
        conf = f"rw {_g(rw)}/step: ±{_g(spread)}" if rw else "none"
        tol = 2 * math.sqrt(spread**2 + se_r**2) + 1e-9
        if abs(est_r) <= tol:
            verdict = "ok" if rw else f"ok: within ±{_g(tol)}, i.e. no drift"
        else:
            verdict = "larger than expected"
        rows["drift at end"] = (conf, f"{_g(est_r)} ± {_g(se_r)}", verdict)
        if rw:
            notes.append(
                f"a random walk of std {_g(rw)} per step drifts by about ±{_g(spread)} (1 sd) between the "
                "first and last quarter of this trace; it restarts at every episode reset"
            )
        elif est_r != 0.0:
            notes.append(
                f"no random walk is configured: the drift estimate {_g(est_r)} is the difference of two "
                f"noisy medians (±{_g(se_r)}), "
                + (
                    "within its uncertainty"
                    if abs(est_r) <= tol
                    else "so the residual changes along the trace"
                )
            )
    else:
        rows["drift at end"] = ("randomized", f"{_g(est_r)} ± {_g(se_r)}", "this episode's value")

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
    if p_hi > dt or d_hi > 0:
        notes.append(
            "the sampler holds each sample until the next one (update_period, dropout): the reading lags the "
            "ground truth by up to a period, which the delay and noise estimates include; the sampler figure "
            "shows the samples taken, those lost and the reading's age"
        )
    if n and n < 100:
        notes.append(
            f"short trace ({n} samples): every estimate is rough (see the ± values); record more with "
            "--steps 500"
        )
    return {"rows": rows, "notes": notes}


def format_summary(summary: list[dict[str, Any]], dt: float) -> str:
    """The table ``sensorgym inspect`` prints: per channel, each quantity configured vs estimated (± one
    standard error), a verdict, and notes on estimates that cannot match the configured value."""
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
    return "\n".join(lines)


def plot_traces(result: InspectResult, path: str | Path, max_channels: int = 12) -> Path:
    """A PNG with one panel per channel: ground truth (line) and measured reading (steps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(len(result.channels), max_channels)
    fig, axes = plt.subplots(n, 1, figsize=(9, 2.0 * n + 0.6), sharex=True, squeeze=False)
    for c, ax in enumerate(axes[:, 0]):
        s = result.summary[c]
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
        ax.set_ylabel(result.channels[c], fontsize=9)
        if "rows" in s:  # configured -> estimated
            title = "; ".join(
                f"{k} {conf} → {got.split(' ± ')[0]}" for k, (conf, got, _) in s["rows"].items()
            )
            title = "configured → estimated: " + title
        else:
            q = f"{s['quantization']:.3g}" if s["quantization"] else "none"
            title = (
                f"delay {s['delay_steps']} steps, noise {s['noise_std']:.3g}, bias {s['bias']:.3g}, "
                f"drift {s['drift_end']:.3g}, quantization {q}"
            )
        ax.set_title(title, fontsize=7, loc="left")
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
    """Record, estimate each channel and compare it with its configured values; plot to ``out`` (and, for
    sensors with their own rate or dropout, their samples, losses and ages to :func:`sampling_path`)."""
    times, names, gt, measured, sampled = _record(cfg, steps, seed=seed, model=model)
    dt = float(times[1] - times[0]) if len(times) > 1 else 0.0
    summary = []
    for c, name in enumerate(names):
        row = estimate_channel(gt[:, c], measured[:, c], max_lag=max_lag)
        sensor, _, index = name.partition("[")
        component = int(index.rstrip("]")) if index else 0
        entry = {"channel": name, **row}
        if sensor in cfg.sensors:
            entry.update(compare_channel(cfg.sensors[sensor], component, row, dt, gt[:, c]))
        summary.append(entry)
    result = InspectResult(times, names, gt, measured, summary, sampling=sampled)
    if out is not None:
        result.figure = plot_traces(result, out)
        if sampled:
            plot_sampling(result, sampling_path(out))
            result.sampler_figure = sampling_path(out)
    return result
