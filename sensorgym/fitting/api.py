"""``sensorgym.fit``: read a log, estimate each channel's error-model options, simulate them, write the
outputs.

Example (a synthetic white-noise log; ``out=None`` writes no files):
    >>> import numpy as np, tempfile, pathlib
    >>> import sensorgym as sg
    >>> t = np.arange(20000) * 0.01
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.npz"
    >>> np.savez(path, t=t, gyro=np.random.default_rng(0).normal(0.0, 0.05, (20000, 2)))
    >>> result = sg.fit(path, ["gyro[0]", "gyro[1]"], names=["gyro"], envs=8)
    >>> sorted(result.options["gyro"])
    ['dropout', 'noise_density', 'update_period']
    >>> [round(v, 4) for v in result.options["gyro"]["noise_density"]]  # 0.05 * sqrt(0.01)
    [0.005, 0.005]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .allan import allan_deviation, fit_m, octave_m
from .channels import Channel
from .config_out import fitted_tables, merge_into, read_config, to_toml
from .delay import estimate_delay
from .errors import FitError
from .estimate import fit_allan
from .lattice import lattice_step
from .readers import read_channels
from .result import ChannelFit, ClosedLoop, FitResult
from .simulate import SimSensor, simulate
from .static import find_static_window
from .timing import analyse_timing

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


def _names(channels: Sequence[str], names: Sequence[str] | None) -> list[str]:
    if not names:
        return [default_name(c) for c in channels]
    if len(names) == 1:
        return list(names) * len(channels)
    if len(names) != len(channels):
        raise FitError(
            f"--names gives {len(names)} names for {len(channels)} channels",
            "give one name per channel (repeat a name to make channels its components), or a single name",
        )
    for n in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?", n):
            raise FitError(
                f"--names {n!r} is not a table name", "use letters, digits and _ (TABLE or TABLE.FIELD)"
            )
    return list(names)


def _fit_channel(
    ch: Channel, name: str, component: int, window: tuple[float, float] | None, found: tuple[float, float]
) -> ChannelFit:
    timing = analyse_timing(ch.times)
    t0 = ch.times[0]
    start, end = (t0 + window[0], t0 + window[1]) if window else found
    inside = (ch.times >= start) & (ch.times <= end)
    values = ch.values[inside]
    if len(values) < _MIN_STATIC:
        where = (
            f"--static {window[0]:g}:{window[1]:g}"
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
    allan = allan_deviation(values, ts, fit_m(len(values), len(values) // 10))
    step, step_se = lattice_step(values)
    noise = fit_allan(allan, ts, resolution=step or 0.0)
    return ChannelFit(
        ch,
        name,
        component,
        timing,
        (float(start - t0), float(end - t0)),
        window is not None,
        float(values.mean()),
        allan,
        (step, step_se),
        noise,
    )


def _options(fits: list[ChannelFit]) -> dict[str, dict[str, Any]]:
    """The fitted options per name: per-sensor timing, per-component error terms (lists for several)."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(f.name for f in fits):
        group = [f for f in fits if f.name == name]
        first = group[0].timing
        opts: dict[str, Any] = {"update_period": first.sample_interval, "dropout": first.dropout}
        if first.burst is not None:
            opts["dropout_burst"] = first.burst
        delays = [f.delay.delay for f in group if f.delay is not None and f.delay.delay is not None]
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


def _check_m(f: ChannelFit) -> np.ndarray:
    """Octave averaging factors with ``tau`` in ``[2 T_s, duration / 10]`` of the static window."""
    ts = f.timing.sample_interval
    return octave_m(f.allan.n, lo=2, hi=int(np.floor(f.duration / 10 / ts + 1e-9)))


def fit(
    log: str | Path,
    channels: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    time: str | None = None,
    static: str | tuple[float, float] | None = None,
    reference: str | None = None,
    into: str | Path | None = None,
    out: str | Path | None = None,
    envs: int = 64,
    seed: int = 0,
    simulate_config: bool = True,
    progress: Callable[[int, int], None] | None = None,
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
        static: ``"START:END"`` (or a tuple), seconds from the channel's first time stamp; default: found.
        reference: a channel of the same log measuring the same quantity without delay: the delay.
        into: a config whose sensor tables of those names take the fitted options.
        out: the folder to write into (``None``: write nothing).
        envs: simulated envs for the closed-loop check; ``seed``: their seed.
        simulate_config: run the closed-loop simulation (``False``: estimates only).
        progress: ``progress(done, total)`` during the simulation.
    """
    log = Path(log)
    table_names = _names(channels, names)
    window = _parse_static(static)
    counts = {n: table_names.count(n) for n in table_names}
    raw = None
    if into is not None:  # a config that cannot take the options is refused before the work
        raw = read_config(into)
        merge_into(raw, {n: {} for n in counts}, counts, str(into))
    wanted = list(channels) + ([reference] if reference and reference not in channels else [])
    read = {c.name: c for c in read_channels(log, wanted, time=time)}
    chans = [read[c] for c in channels]
    found = find_static_window([(c.times, c.values) for c in chans]) if window is None else (0.0, 0.0)
    components: dict[str, int] = {}
    fits = []
    for ch, name in zip(chans, table_names, strict=True):
        fits.append(_fit_channel(ch, name, components.get(name, 0), window, found))
        components[name] = components.get(name, 0) + 1
    for name in components:
        periods = {f.timing.sample_interval for f in fits if f.name == name}
        if max(periods) > 1.01 * min(periods):
            raise FitError(
                f"the channels named {name!r} have different sample intervals "
                f"({', '.join(f'{p:.4g}' for p in sorted(periods))} s)",
                "give channels of different rates different --names",
            )
    if reference:
        ref = read[reference]
        for f in fits:
            f.delay = estimate_delay(
                f.channel.times,
                f.channel.values,
                ref.times,
                ref.values,
                f.timing.sample_interval,
                bandwidth=f.noise.params.bandwidth,
            )
    options = _options(fits)
    sim = None
    if simulate_config:
        sensors = []
        for name, opts in options.items():
            group = [f for f in fits if f.name == name]
            error_terms = {
                k: v if isinstance(v, list) else [v]
                for k, v in opts.items()
                if k not in ("update_period", "delay", "dropout", "dropout_burst")
            }
            timing_terms = {k: v for k, v in opts.items() if k in ("dropout", "dropout_burst")}
            sensors.append(
                SimSensor(
                    name,
                    [f.channel.name for f in group],
                    {**error_terms, **timing_terms},
                    np.array([f.level for f in group]),
                    group[0].timing.sample_interval,
                    max(f.timing.slots for f in group),
                )
            )
        sim = simulate(
            sensors, {f.channel.name: _check_m(f) for f in fits}, envs=envs, seed=seed, progress=progress
        )
        for f in fits:
            m = sim.m[f.channel.name]
            log_at = f.allan.select(np.isin(f.allan.m, m))
            keep = np.isin(m, log_at.m)
            f.closed_loop = ClosedLoop(
                log_at.taus, log_at.adev, log_at.lo, log_at.hi, sim.adev[f.channel.name][keep]
            )
    lines = [f.closed_loop.line(f.channel.name) for f in fits if f.closed_loop is not None]
    result = FitResult(log, fits, options, sim, lines)
    if raw is not None:
        merged, result.into_changes = merge_into(raw, options, components, str(into))
    if out is not None:
        from .report import write_outputs

        write_outputs(result, Path(out), merged if into is not None else None, into)
    return result


__all__ += ["fitted_tables", "to_toml"]
