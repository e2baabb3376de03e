"""``sensorgym inspect``: run an env with a sensor configuration, record ground truth and measured
traces, estimate each channel's delay, noise, bias, drift and quantization *from the traces*, print them
beside the configured values (:func:`compare_channel`, with the uncertainty of each estimate and a note
where an estimate cannot match the configured value, e.g. quantization or jitter inflating the noise
estimate, or a short trace), and plot.

This module runs it (:func:`run_inspect`) and prints its table (:func:`format_summary`); the steps live
in one module each: the recording (:mod:`~sensorgym.app.inspect_record`, through the engine's public
diagnostics), the estimates (:mod:`~sensorgym.app.inspect_estimate`), the comparison with the config
(:mod:`~sensorgym.app.inspect_compare`) and the figures (:mod:`~sensorgym.app.inspect_plot`); their names
are re-exported here.

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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config
from .inspect_attitude import attitude_path, attitude_rows, attitude_traces, is_attitude, plot_attitude
from .inspect_compare import compare_channel, verdict_z
from .inspect_error_model import error_model_checks, model_terms
from .inspect_estimate import episode_steps, estimate_channel, estimate_sampled
from .inspect_latency import compare_latency
from .inspect_plot import plot_sampling, plot_traces, sampling_path
from .inspect_record import Recording, record_traces
from .inspect_replay import wrapped_episodes

__all__ = [
    "InspectResult",
    "compare_channel",
    "episode_steps",
    "estimate_channel",
    "estimate_sampled",
    "format_summary",
    "plot_sampling",
    "plot_traces",
    "record",
    "run_inspect",
    "sampling_path",
    "verdict_z",
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
    #: per AttitudeSensor: its inclination and heading errors per step (degrees; None where its outputs
    #: do not give them), and the figure of them
    attitude: dict[str, dict[str, Any]] = field(default_factory=dict)
    attitude_figure: Path | None = None


def record(
    cfg: Config, steps: int, seed: int = 0, model: Any = None
) -> tuple[np.ndarray, list, np.ndarray, np.ndarray]:
    """Step one env for ``steps`` steps (random actions, or ``model.predict``) and record every sensor's
    GT and measured reading (current read, no history). Returns (times, channel names, gt, measured)."""
    rec = record_traces(cfg, steps, seed, model)
    return rec.times, rec.names, rec.gt, rec.measured


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
    rec = record_traces(cfg, steps, seed=seed, model=model)
    times, names, gt, sampled = rec.times, rec.names, rec.gt, rec.sampling
    dt = float(times[1] - times[0]) if len(times) > 1 else 0.0
    parts = [(name, *_split(name)) for name in names]
    attitude = {n for n, o in cfg.sensors.items() if is_attitude(o)}  # an estimator's outputs: below
    checks = sum(
        3 + (sensor in sampled) + error_model_checks(cfg.sensors[sensor], component)
        for _, sensor, component in parts
        if sensor in cfg.sensors and sensor not in attitude
    )
    z = verdict_z(checks)
    summary = []
    for c, (name, sensor, component) in enumerate(parts):
        row = _estimate(cfg, rec, c, sensor, component, dt, max_lag)
        entry = {"channel": name, **row}
        if sensor in attitude:  # the IMU's error terms do not apply to the estimate: its own rows below
            got = f"mean {row['bias']:.3g}, sd {row['noise_std']:.3g}"
            entry.update(rows={"est. - truth": ("estimator output", got, "see its attitude rows")}, notes=[])
        elif sensor in cfg.sensors:
            wraps = wrapped_episodes(rec.replay[sensor], rec.resets) if sensor in rec.replay else None
            entry.update(
                compare_channel(cfg.sensors[sensor], component, row, dt, gt[:, c], z=z, replay_wraps=wraps)
            )
        summary.append(entry)
    errors = {}
    for sensor in sorted(attitude):
        cols = [c for c, (_, s, _) in enumerate(parts) if s == sensor]
        errors[sensor] = attitude_traces(
            cfg.sensors[sensor].outputs, gt[:, cols], rec.measured[:, cols], rec.resets
        )
        summary.append(attitude_rows(sensor, cfg.sensors[sensor], errors[sensor]))
    if rec.actions is not None and cfg.latency is not None:
        summary.append(compare_latency(cfg.latency, rec.actions, dt))
    result = InspectResult(
        times,
        names,
        gt,
        rec.measured,
        summary,
        sampling=sampled,
        resets=rec.resets,
        actions=rec.actions,
        z=z,
        checks=checks,
        attitude=errors,
    )
    if out is not None:
        result.figure = plot_traces(result, out)
        if errors:
            result.attitude_figure = plot_attitude(times, errors, attitude_path(out))
        if sampled:
            plot_sampling(result, sampling_path(out))
            result.sampler_figure = sampling_path(out)
    return result


def _estimate(
    cfg: Config, rec: Recording, c: int, sensor: str, component: int, dt: float, max_lag: int
) -> dict[str, Any]:
    """The estimates of channel ``c`` (component ``component`` of ``sensor``) from the recording."""
    gt, measured, sampled = rec.gt[:, c], rec.measured[:, c], rec.sampling
    episode = episode_steps(rec.resets)
    # a configured scale factor or filter: the noise, bias and drift against the GT through their fit
    terms = model_terms(cfg.sensors[sensor], component, dt) if sensor in cfg.sensors else {}
    if sensor in sampled and dt > 0:  # held readings: compare each sample with the GT of its step
        age = np.round(sampled[sensor]["age"] / dt).astype(int)
        return estimate_sampled(gt, measured, age, episode, due=sampled[sensor]["due"], **terms)
    if sensor in rec.ages and dt > 0:  # jitter: compare each reading with the GT its sample saw
        age = np.round(rec.ages[sensor] / dt).astype(int)
        row = estimate_sampled(gt, measured, age, episode, due=np.ones(len(age), bool), **terms)
        for key in ("period_steps", "dropout", "due", "runs"):  # no sampler: no rate, nothing lost
            row.pop(key)
        return row
    return estimate_channel(gt, measured, max_lag=max_lag, episode_step=episode, **terms)


def _split(channel: str) -> tuple[str, int]:
    """``"angle[1]"`` -> ``("angle", 1)``; ``"gyro"`` -> ``("gyro", 0)``."""
    sensor, _, index = channel.partition("[")
    return sensor, int(index.rstrip("]")) if index else 0
