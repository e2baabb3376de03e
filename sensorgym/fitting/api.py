"""``sensorgym.fit``: read a log, estimate each channel's error-model options, simulate them, write the
outputs.

Example (a synthetic white-noise log; ``out=None`` writes no files):
    >>> import numpy as np, tempfile, pathlib
    >>> import sensorgym as sg
    >>> t = np.arange(20000) * 0.01
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.npz"
    >>> np.savez(path, t=t, gyro=np.random.default_rng(2).normal(0.0, 0.05, (20000, 2)))
    >>> result = sg.fit(path, ["gyro[0]", "gyro[1]"], names=["gyro"], envs=8)
    >>> sorted(result.options["gyro"])
    ['dropout', 'noise_density', 'update_period']
    >>> [round(v, 4) for v in result.options["gyro"]["noise_density"]]  # 0.05 * sqrt(0.01)
    [0.005, 0.005]
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.recording import write_residuals
from .allan import octave_m
from .channels import Channel
from .config_out import PER_SENSOR, fitted_tables, merge_into, read_config, to_toml
from .delay import DelayEstimate, estimate_delay
from .diagnose import explain, spectral_excess, unexplained_line
from .errors import FitError
from .readers import read_channels
from .residuals import check_residuals, residuals_of
from .result import ChannelFit, ClosedLoop, FitResult
from .simulate import SimResult, SimSensor, simulate
from .static import find_static_window, long_gaps, without_gaps
from .timing import Timing, analyse_timing
from .window import fit_window, gap_finding, settle

__all__ = ["ChannelFit", "ClosedLoop", "FitResult", "default_name", "fit"]

_MIN_STATIC = 64  # samples: an Allan deviation at a handful of averaging times


def default_name(channel: str) -> str:
    """A channel's default table name: characters other than letters, digits and ``_`` become ``_``.

    Example:
        >>> default_name("Gyroscope X (deg/s)")
        'Gyroscope_X__deg_s_'
    """
    return re.sub(r"[^A-Za-z0-9_]", "_", channel)


def _parse_static(static: str | tuple[float, float] | None) -> tuple[float, float] | None:
    if static is None or isinstance(static, tuple):
        return static
    m = re.fullmatch(r"\s*([-+0-9.eE]+)\s*:\s*([-+0-9.eE]+)\s*", str(static))
    try:
        start, end = float(m[1]), float(m[2])  # type: ignore[index]
    except (TypeError, ValueError):
        raise FitError(
            f"--static {static!r} is not START:END",
            "write seconds from the first time stamp, e.g. --static 120:135",
        ) from None
    if not end > start >= 0:
        raise FitError(
            f"--static {static}: the window must satisfy 0 <= START < END", "e.g. --static 120:135"
        )
    return start, end


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_STATIC_DISPERSION = 3.0  # a window's Allan variance this far off the model is not demonstrably at rest
_MOTION_SHARE = 0.25  # a narrow-band component this much of the variance may be a motion
_EXPLAINED = 0.9  # a channel whose closed loop is inside the band at fewer tau gets a line on why


def _names(channels: Sequence[str], names: Sequence[str] | None) -> list[str]:
    if not names:
        return [default_name(c) for c in channels]
    for n in names:
        if not _NAME.fullmatch(n):
            raise FitError(
                f"--names {n!r} is not a table name", "use letters, digits and _ (TABLE or TABLE.FIELD)"
            )
    if len(names) == 1:
        return list(names) * len(channels)
    if len(names) != len(channels):
        raise FitError(
            f"--names gives {len(names)} names for {len(channels)} channels",
            "give one name per channel (repeat a name to make channels its components), or a single name",
        )
    return list(names)


def _table(name: str) -> str:
    return name.partition(".")[0]


def _check_out(out: str | Path | None) -> Path | None:
    """The output folder, refused before the work when it cannot be one."""
    if out is None:
        return None
    out = Path(out)
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                what = "--out" if p == out else f"--out {str(out)!r}: its folder"
                raise FitError(f"{what} {str(p)!r} is a file, not a folder", "pass a folder for the outputs")
            break
    return out


def _check_tables(chans: Sequence[Channel], names: Sequence[str], timings: dict[str, Timing]) -> None:
    """One table is one sensor: its channels (components, or an IMU's fields) share one sample interval
    and lose their samples together (docs/error_model.md), so they are refused otherwise, before the work."""
    for table in dict.fromkeys(_table(n) for n in names):
        group = [(c, n) for c, n in zip(chans, names, strict=True) if _table(n) == table]
        periods = {n: timings[c.name].sample_interval for c, n in group}
        if max(periods.values()) > 1.01 * min(periods.values()):
            fields = len({n for _, n in group}) > 1
            shown = ", ".join(f"{n} {p:.4g} s" for n, p in dict(sorted(periods.items())).items())
            raise FitError(
                f"the channels of [sensors.{table}] have different sample intervals ({shown})"
                + (": an IMU has one update_period" if fields else ""),
                "give channels of different rates different tables with --names (or resample the log to "
                "one rate)",
            )
        first = timings[group[0][0].name]
        for c, _ in group[1:]:
            t = timings[c.name]
            se = math.hypot(first.dropout_se, t.dropout_se)
            if abs(t.dropout - first.dropout) > 3 * se + 1e-3:
                raise FitError(
                    f"the channels of [sensors.{table}] lose different samples ({group[0][0].name!r}: "
                    f"dropout {first.dropout:.3g}, {c.name!r}: {t.dropout:.3g}); a sensor's components and "
                    "an IMU's fields are lost together",
                    "give them different tables with --names",
                )


def _fit_channel(
    ch: Channel,
    name: str,
    component: int,
    timing: Timing,
    window: tuple[float, float] | None,
    found: tuple[float, float],
) -> ChannelFit:
    t0 = ch.times[0]
    if window and window[0] >= ch.duration:
        raise FitError(
            f"{ch.name}: --static {window[0]:g}:{window[1]:g} starts after the log ends "
            f"({ch.duration:.4g} s from its first time stamp)",
            f"give a window inside 0:{ch.duration:.4g}",
        )
    start, end = (t0 + window[0], t0 + min(window[1], ch.duration)) if window else found
    # an Allan deviation must not bridge a logging gap: the longest part without one (a found window
    # has none), said in one line
    start, end, log_gaps = without_gaps(ch.times, start, end)
    if window is None:
        log_gaps = long_gaps(ch.times)
    findings = [gap_finding(ch.name, window, log_gaps, start - t0, end - t0, t0)] if log_gaps else []
    inside = (ch.times >= start) & (ch.times <= end)
    values = ch.values[inside]
    if len(values) < _MIN_STATIC:
        where = (
            f"--static {window[0]:g}:{window[1]:g}"
            + (f" (the log ends at {ch.duration:.4g} s)" if window[1] > ch.duration else "")
            if window
            else f"the longest static stretch ({start - t0:.3g} to {end - t0:.3g} s)"
        )
        raise FitError(
            f"{ch.name}: {where} holds {len(values)} samples, too short for any estimate "
            f"(at least {_MIN_STATIC})",
            "give a longer window at rest with --static START:END (seconds from the first time stamp), "
            "or record the sensor still for longer",
        )
    ts = timing.sample_interval
    times = ch.times[inside]
    # a bias still settling at the window's start is a warm-up, not a random walk: left out or removed
    fitted, trend, line = settle(ch.name, times, values, ts, fit_window(times, values, ts), t0)
    findings += [line] if line else []
    return ChannelFit(
        ch,
        name,
        component,
        timing,
        (float(fitted.times[0] - t0), float(end - t0)),
        window is not None,
        float(fitted.values.mean()),
        fitted.allan,
        fitted.resolution,
        fitted.noise,
        findings=findings,
        gaps=log_gaps,
        warmup=trend,
        samples=(fitted.times, fitted.values),
    )


def _options(fits: list[ChannelFit]) -> dict[str, dict[str, Any]]:
    """The fitted options per name: per-sensor timing (the table's: its channels share it), per-component
    error terms (lists for several)."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(f.name for f in fits):
        group = [f for f in fits if f.name == name]
        table = [f for f in fits if _table(f.name) == _table(name)]
        first = table[0].timing
        opts: dict[str, Any] = {"update_period": first.sample_interval, "dropout": first.dropout}
        if first.burst is not None:
            opts["dropout_burst"] = first.burst
        delays = [f.delay.delay for f in table if f.delay is not None and f.delay.delay is not None]
        if delays:
            opts["delay"] = max(0.0, float(np.mean(delays)))

        def per_component(values: list[float | None]) -> Any:
            vals = [float(v) if v is not None else 0.0 for v in values]
            return vals[0] if len(vals) == 1 else vals

        for term in (
            "noise_density",
            "bandwidth",
            "random_walk_density",
            "bias_instability",
            "bias_correlation_time",
        ):
            values = [f.noise.estimates[term].value for f in group]
            if any(v is not None for v in values):
                opts[term] = per_component(values)
        steps = [f.resolution[0] for f in group]
        if any(s is not None for s in steps):
            opts["resolution"] = per_component(steps)
        out[name] = opts
    return out


def _sim_sensors(fits: list[ChannelFit], options: dict[str, dict[str, Any]]) -> list[SimSensor]:
    """One simulated sensor per table: an IMU's fields are the components of one sensor, so that one
    sampler loses them together, as an IMU's sampler does and as fitted_config.toml simulates them."""
    sensors = []
    for table in dict.fromkeys(_table(f.name) for f in fits):
        names = [n for n in options if _table(n) == table]
        group = [f for n in names for f in fits if f.name == n]
        terms = {k for n in names for k in options[n] if k not in PER_SENSOR}
        error_terms: dict[str, list[float]] = {}
        for term in sorted(terms):
            column: list[float] = []
            for n in names:
                size = sum(1 for f in fits if f.name == n)
                v = options[n].get(term, 0.0)
                column += list(v) if isinstance(v, list) else [v] * size
            error_terms[term] = column
        first = options[names[0]]
        timing_terms = {k: first[k] for k in ("dropout", "dropout_burst") if k in first}
        sensors.append(
            SimSensor(
                table,
                [f.channel.name for f in group],
                {**error_terms, **timing_terms},
                np.array([f.level for f in group]),
                group[0].timing.sample_interval,
                max(f.timing.slots for f in group),
            )
        )
    return sensors


def _check_m(f: ChannelFit) -> np.ndarray:
    """Octave averaging factors (received samples) with ``tau`` in ``[2 T_s, duration / 10]`` of the
    static window."""
    mean_interval = f.timing.sample_interval * (f.noise.gaps.mean if f.noise.gaps is not None else 1.0)
    return octave_m(f.allan.n, lo=2, hi=int(np.floor(f.duration / 10 / mean_interval + 1e-9)))


def _delay(f: ChannelFit, ref: Channel) -> DelayEstimate:
    """The channel's delay behind ``ref``, its standard error including the bandwidth's: the delay is the
    transport delay on top of the fitted filter's own lag, so a cut-off known to ``± se`` moves it by the
    change of that lag (the issue 33 log: 13.64 ± 0.035 ms for a true 13.5, its filter's uncertainty
    left out; the delay's error is about 2.7 times that se)."""

    def at(bandwidth: float) -> DelayEstimate:
        c = f.channel
        return estimate_delay(c.times, c.values, ref.times, ref.values, f.timing.sample_interval, bandwidth)

    est = at(f.noise.params.bandwidth)
    bw = f.noise.estimates["bandwidth"]
    if est.delay is None or est.se is None or not bw.identified or not bw.se:
        return est
    # the delay's slope in the cut-off, by a central difference over +- one standard error
    f_lo, f_hi = max(bw.value - bw.se, 0.5 * bw.value), bw.value + bw.se
    low, high = at(f_lo), at(f_hi)
    if low.delay is None or high.delay is None:
        return est
    slope = (high.delay - low.delay) / (f_hi - f_lo)
    return replace(est, se=math.hypot(est.se, slope * bw.se))


def _static_warning(f: ChannelFit) -> str | None:
    """A warning when the window's Allan deviation is far off any error model (a motion, a vibration,
    a temperature ramp): the fit of a window that is not at rest describes the motion, not the sensor;
    where a narrow-band component of the window's spectrum is the misfit, the warning names it."""
    if f.noise.dispersion <= _STATIC_DISPERSION:
        return None
    how = "given with --static" if f.window_given else "found as the longest stretch without motion"
    departs = (
        f"its Allan deviation departs from the error model by {f.noise.dispersion:.3g} times its scatter"
    )
    c = f.spectral
    window = f"the window {f.window[0]:.4g}-{f.window[1]:.4g} s ({how})"
    if c is not None and c.share < _MOTION_SHARE:  # a small component, not a motion
        what = f"{100 * c.share:.2g}% of the variance: a vibration, a resonance or an interference"
        return (
            f"{f.channel.name}: {window}: {departs}: it holds a narrow-band component near "
            f"{c.frequency:.3g} Hz ({what}), which no term of the error model makes"
        )
    shake = f" (most of it near {c.frequency:.3g} Hz: a shake?)" if c is not None else ""
    return (
        f"{f.channel.name}: the window {f.window[0]:.4g}-{f.window[1]:.4g} s ({how}) is not demonstrably "
        f"at rest: {departs}{shake}; give a window at rest with --static START:END"
    )


def _diagnose(f: ChannelFit) -> str | None:
    """The tau the fitted config leaves outside the log's band and why (diagnose.py), kept on the fit; a
    warning where they are more than a tenth of the check's tau."""
    if f.closed_loop is not None:
        c = f.closed_loop
        taus, log, lo, hi, model = c.taus, c.log, c.lo, c.hi, c.sim
    else:
        at = f.allan.select(np.isin(f.allan.m, _check_m(f)))
        taus, log, lo, hi, model = at.taus, at.adev, at.lo, at.hi, f.noise.model_adev(at.m)
    values, ts = f.samples[1], f.timing.sample_interval
    f.unexplained = explain(
        taus, log, lo, hi, model, f.spectral, values, f.noise.params, ts, f.noise.dispersion
    )
    inside = int(np.sum((model >= lo) & (model <= hi)))
    if not f.unexplained or inside >= _EXPLAINED * len(taus):
        return None
    return unexplained_line(f.channel.name, f.unexplained, inside, len(taus))


def _check_into(
    into: str | Path,
    counts: dict[str, int],
    delay: bool,
    check_config: Callable[[Mapping[str, Any]], None] | None,
) -> Any:
    """The config ``into``, refused before the work when it cannot take the options (its tables without
    the terms the fit decides must load)."""
    raw = read_config(into)
    blank = merge_into(raw, {n: {} for n in counts}, counts, str(into), delay=delay)
    if check_config is not None:
        check_config(blank.config)
    return raw


def _fit_channels(
    chans: list[Channel],
    table_names: list[str],
    timings: dict[str, Timing],
    window: tuple[float, float] | None,
) -> tuple[list[ChannelFit], dict[str, int]]:
    """Every channel fitted in the window given or found, with the narrow-band component of its spectrum
    beyond the model's; the number of components per name."""
    found = find_static_window([(c.times, c.values) for c in chans]) if window is None else (0.0, 0.0)
    components: dict[str, int] = {}
    fits = []
    for ch, name in zip(chans, table_names, strict=True):
        fits.append(_fit_channel(ch, name, components.get(name, 0), timings[ch.name], window, found))
        components[name] = components.get(name, 0) + 1
    for f in fits:
        interval = f.timing.sample_interval * (f.noise.gaps.mean if f.noise.gaps is not None else 1.0)
        f.spectral = spectral_excess(f.samples[1], interval, f.noise.params, f.noise.gaps)
    return fits, components


def _closed_loop(
    fits: list[ChannelFit],
    options: dict[str, dict[str, Any]],
    envs: int,
    seed: int,
    progress: Callable[[int, int], None] | None,
) -> SimResult:
    """Simulate the fitted options and set each channel's closed loop against its log."""
    sim = simulate(
        _sim_sensors(fits, options),
        {f.channel.name: _check_m(f) for f in fits},
        envs=envs,
        seed=seed,
        progress=progress,
    )
    for f in fits:
        m = sim.m[f.channel.name]
        log_at = f.allan.select(np.isin(f.allan.m, m))
        keep = np.isin(m, log_at.m)
        f.closed_loop = ClosedLoop(
            log_at.taus, log_at.adev, log_at.lo, log_at.hi, sim.adev[f.channel.name][keep]
        )
    return sim


def fit(
    log: str | Path,
    channels: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    time: str | None = None,
    time_unit: str | None = None,
    static: str | tuple[float, float] | None = None,
    reference: str | None = None,
    into: str | Path | None = None,
    out: str | Path | None = None,
    residuals: str | Path | None = None,
    envs: int = 64,
    seed: int = 0,
    simulate_config: bool = True,
    progress: Callable[[int, int], None] | None = None,
    check_config: Callable[[Mapping[str, Any]], None] | None = None,
) -> FitResult:
    """Fit the error-model options of each channel of ``log`` (docs/fit.md) and, with ``out``, write
    ``fitted.toml``, ``fit_report.md``, ``allan.png`` and ``timing.png`` there (and with ``into``,
    ``fitted_config.toml``: that config with the fitted options).

    Args:
        log: a CSV, NPZ, ULog, ROS 1/2 bag or MCAP file.
        channels: the channels, named as the format names them.
        names: the table of each channel (one per channel, or one for all; default: the channel's name
            with other characters than letters, digits and ``_`` replaced by ``_``); channels of one name
            are its components, ``TABLE.FIELD`` writes an IMU's per-field options.
        time: the time column of a CSV / array of an NPZ (default: the first).
        time_unit: its unit, ``s``, ``ms``, ``us`` or ``ns`` (default: what its name says, else seconds).
        static: ``"START:END"`` (or a tuple), seconds from the channel's first time stamp; default: found.
        reference: a channel of the same log measuring the same quantity without delay: the delay.
        into: a config whose sensor tables of those names take the fitted options.
        out: the folder to write into (``None``: write nothing).
        residuals: an NPZ for each channel's static window less its mean (what the ``replay`` option reads).
        envs: simulated envs for the closed-loop check; ``seed``: their seed.
        simulate_config: run the closed-loop simulation (``False``: estimates only).
        progress: ``progress(done, total)`` during the simulation.
        check_config: with ``into``, called with a config mapping to validate it as ``train`` would (raise
            :class:`FitError` to refuse it): before the work on ``into`` without the options the fit
            decides, and on ``fitted_config.toml``'s mapping before it is written (the command line
            passes ``sensorgym.app.config.parse_config``).
    """
    log = Path(log)
    table_names, window, out_dir = _names(channels, names), _parse_static(static), _check_out(out)
    residuals_path = check_residuals(residuals, channels) if residuals is not None else None
    counts = {n: table_names.count(n) for n in table_names}
    raw = _check_into(into, counts, reference is not None, check_config) if into is not None else None
    wanted = list(channels) + ([reference] if reference and reference not in channels else [])
    read = {c.name: c for c in read_channels(log, wanted, time=time, time_unit=time_unit)}
    chans = [read[c] for c in channels]
    warnings = list(dict.fromkeys(w for c in chans for w in c.warnings))
    timings = {c.name: analyse_timing(c.times, c.invalid_times) for c in chans}
    _check_tables(chans, table_names, timings)
    fits, components = _fit_channels(chans, table_names, timings, window)
    recorded = residuals_of(fits) if residuals_path is not None else None  # one T_s: refused early
    warnings += [w for f in fits for w in f.findings]
    warnings += [w for w in map(_static_warning, fits) if w]
    if reference:
        for f in fits:
            f.delay = _delay(f, read[reference])
    options = _options(fits)
    sim = _closed_loop(fits, options, envs, seed, progress) if simulate_config else None
    warnings += [w for w in map(_diagnose, fits) if w]
    lines = [f.closed_loop.line(f.channel.name) for f in fits if f.closed_loop is not None]
    result = FitResult(log, fits, options, sim, lines, warnings=warnings)
    if recorded is not None:
        result.files["residuals"] = write_residuals(residuals_path, *recorded)
    merged = None
    if raw is not None:
        merged = merge_into(raw, options, components, str(into), delay=reference is not None)
        result.into_changes, result.into_removed = merged.changes, merged.removed
        result.into_kept = merged.kept
        if check_config is not None:  # fitted_config.toml is written only once it loads
            check_config(merged.config)
    if out_dir is not None:
        from .report import write_outputs

        write_outputs(result, out_dir, merged.config if merged is not None else None, into)
    return result


__all__ += ["fitted_tables", "to_toml"]
