"""Replayed real errors (docs/error_model.md, "Replayed real errors").

A component whose options name a recording (``replay``: an NPZ that ``sensorgym fit --residuals`` writes,
the residuals of a real sensor's log at rest) takes its white noise, drift and filtering from that
recording instead of the parametric terms: each sample of the sensor takes the next recorded sample, from
an offset drawn per env at every reset; the index wraps at the recording's end.

This module holds (the file itself is :mod:`sensorgym.core.recording`'s):

* the checks of the options ``replay`` and ``replay_channels`` (:func:`check_replay`,
  :func:`check_replay_channels`, :func:`check_replay_rate`), which ``SimpleSensorOptions`` runs;
* what a class's plan makes of them (:func:`replay_columns`: per component its samples and how many
  recorded samples it advances per due sample);
* the ``replay`` error term's operations (set up, bound, drawn at resets and applied every step), which
  :data:`sensorgym.core.terms.TERMS` holds as a record between the low-pass filter and the bias.

The per-step work is index arithmetic on ``(B, cols)`` int64 tables and one gather from the recordings,
written once against the array namespace (:mod:`sensorgym.core.xp`): both executors give the same bits.

Example: a one-channel recording replayed from env 0's drawn offset on
    >>> import numpy as np, torch, tempfile, pathlib, sensorgym as sg
    >>> from sensorgym.core import diagnostics
    >>> from sensorgym.core.recording import write_residuals
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "rest.npz"
    >>> _ = write_residuals(path, 0.02, {"gyro_x": np.arange(10.0) - 4.5})
    >>> mgr = sg.SensorManager(num_envs=1, dt=0.02, seed=0)
    >>> s = mgr.add_sensor(sg.StateSensorOptions(key="w", shape=(1,), replay=str(path)))
    >>> mgr.reset({"w": torch.zeros(1, 1)})
    >>> start = int(diagnostics.replay_state(s)["index"][0, 0])
    >>> seen = [float(s.read()[0, 0])]
    >>> for _ in range(3):
    ...     mgr.step({"w": torch.zeros(1, 1)})
    ...     seen.append(float(s.read()[0, 0]))
    >>> seen == [float(np.arange(10.0)[(start + k) % 10] - 4.5) for k in range(4)]
    True
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .recording import load_channel, read_header

__all__ = [
    "EXCLUSIVE",
    "advance_of",
    "check_replay",
    "check_replay_channels",
    "check_replay_rate",
    "component_source",
    "refuse_setter",
    "replay_columns",
]

#: the options a replayed component takes from its recording (combining them is refused)
EXCLUSIVE = ("noise", "noise_density", "random_walk", "random_walk_density", "bias_instability", "bandwidth")
#: how far the sensor's sample interval may lie from the recording's, or a whole multiple of it
RATE_TOLERANCE = 0.01
_WHOLE = 1e-6  # own samples per control step (dt / T_s below dt) must be a whole number this closely


# -- the options' checks (run by SimpleSensorOptions, in its field order) -----------------------------------
def _what(options: Any, name: str, value: Any) -> str:
    return f"{type(options).__name__}.{name}={value!r}"


def _path(options: Any, name: str, value: Any, v: Any) -> str:
    if not isinstance(v, (str, os.PathLike)) or not os.fspath(v):
        raise TypeError(
            f"{_what(options, name, value)} is invalid: expected the path of a recording, got "
            f"{type(v).__name__}. Fix: pass {name}='residuals.npz' (written by sensorgym fit --residuals), "
            "or None."
        )
    path = os.fspath(v)
    read_header(path, f"{_what(options, name, value)} is invalid: {path!r}")
    return path


def check_replay(options: Any, name: str, value: Any) -> str | tuple[str | None, ...] | None:
    """``replay``: None, the path of a recording (every component), or one path (or None: not replayed)
    per component; each file must be a recording. The sample interval must then be fixed (the index
    advances by a whole number of recorded samples per sample)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        if len(value) == 0:
            raise options._err(name, value, "the per-component sequence is empty", "pass one path, or None")
        paths = tuple(None if v is None else _path(options, name, value, v) for v in value)
        if all(p is None for p in paths):
            return None
        out: str | tuple[str | None, ...] = paths
    else:
        out = _path(options, name, value, value)
    period = options.update_period
    if hasattr(period, "bounds"):  # a Distribution: checked before the error options
        raise options._err(
            name,
            value,
            f"update_period={period!r} is drawn per episode, but a replay advances a whole number of "
            "recorded samples per sample, fixed by the sensor's sample interval",
            "give update_period as one number (the sensor's own rate)",
        )
    return out


def _per_component(value: Any) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def check_replay_channels(options: Any, name: str, value: Any) -> tuple[str | None, ...] | None:
    """``replay_channels``: None (the file's channels in order) or one channel name per component, each a
    channel of its file (checked after ``replay``); then no option the recording replaces may be given
    on a replayed component (:data:`EXCLUSIVE`)."""
    replay = options.replay
    if value is not None:
        if replay is None:
            raise options._err(
                name, value, "it names channels of a recording but replay is None",
                "give replay='residuals.npz' too, or leave replay_channels out",
            )  # fmt: skip
        names = (value,) if isinstance(value, str) else value
        if not isinstance(names, (list, tuple)) or not names:
            raise TypeError(
                f"{_what(options, name, value)} is invalid: expected channel names. Fix: pass one name per "
                "component, e.g. replay_channels=['gx', 'gy', 'gz'], or leave it out (the file's channels)."
            )
        names = tuple(names)
        paths = replay if isinstance(replay, tuple) else (replay,) * len(names)
        if len(paths) != len(names):
            raise options._err(
                name, value, f"it has {len(names)} names for the {len(paths)} components replay gives",
                "give one channel name per component (None where replay is None)",
            )  # fmt: skip
        for i, (path, channel) in enumerate(zip(paths, names, strict=True)):
            if path is None:
                if channel is not None:
                    raise options._err(
                        name, value, f"component {i} names {channel!r} but replay gives it no file",
                        "give None there, or a file in replay",
                    )  # fmt: skip
                continue
            if not isinstance(channel, str):
                raise options._err(
                    name, value, f"component {i}: {channel!r} is not a channel name",
                    "give one channel name of the file per replayed component",
                )  # fmt: skip
            known = read_header(path, f"{_what(options, 'replay', replay)} is invalid: {path!r}").channels
            if channel not in known:
                close = difflib.get_close_matches(channel, known, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise options._err(
                    name, value, f"the recording {path!r} has no channel {channel!r}",
                    f"{hint}its channels are {list(known)}",
                )  # fmt: skip
        value = names
    elif isinstance(replay, tuple):
        raise options._err(
            name, value, "replay gives a file per component, so each replayed component needs its channel",
            "give replay_channels with one name per component (None where replay is None)",
        )  # fmt: skip
    _check_exclusive(options, replay)
    return value


def _check_exclusive(options: Any, replay: Any) -> None:
    """No option the recording replaces on a replayed component: one line naming both."""
    if replay is None:
        return
    paths = _per_component(replay)
    for field in EXCLUSIVE:
        given = getattr(options, field, 0.0)
        values = _per_component(given)
        n = max(len(paths), len(values))
        for i in range(n):
            path = paths[i if len(paths) > 1 else 0]
            v = values[i if len(values) > 1 else 0]
            lo, hi = v.bounds if hasattr(v, "bounds") else (float(v), float(v))
            if path is not None and (lo != 0.0 or hi != 0.0):
                where = f" (component {i})" if n > 1 and (len(paths) > 1 or len(values) > 1) else ""
                raise options._err(
                    "replay", replay,
                    f"{field}={given!r} is given too{where}; a replayed component takes its white noise, "
                    "drift and filtering from the recording",
                    f"set {field}=0.0 (the recording holds it), or leave replay out to use the parametric "
                    "terms",
                )  # fmt: skip


def _advance(what: str, update_period: Any, path: str, dt: float) -> int:
    """Recorded samples per due sample of a sensor: ``M`` (its ``T_s`` over the file's) times its own
    samples per control step (``dt / T_s`` where ``T_s < dt``, else 1), refused in one line naming the
    intervals where either is not a whole number. ``what``: the option as the message names it."""
    recorded = read_header(path, f"{what} is invalid: {path!r}").sample_interval
    period = float(update_period)
    t_s, source = (period, "update_period") if period > 0 else (dt, "dt")
    ratio = t_s / recorded
    m = max(round(ratio), 1)
    if abs(ratio / m - 1.0) > RATE_TOLERANCE:
        raise ValueError(
            f"{what} is invalid: the sensor's sample interval T_s = {t_s:g} s (its {source}) is neither the "
            f"recording's T_s = {recorded:g} s ({path!r}) within 1% nor a whole multiple of it "
            f"(ratio {ratio:.4g}). Fix: record (or resample) the log at the sensor's rate or a whole "
            "multiple of it, or give the sensor an update_period that is a multiple of the recording's T_s."
        )
    own = 1
    if t_s < dt:  # several own samples per control step: the recording advances in real time
        n = dt / t_s
        own = round(n)
        if abs(n - own) > _WHOLE * n:
            raise ValueError(
                f"{what} is invalid: the sensor samples every T_s = {t_s:g} s (update_period) below the "
                f"control step dt = {dt:g} s, {n:.4g} own samples per step; a replay advances a whole number "
                f"of recorded samples (T_s = {recorded:g} s) per step. Fix: an update_period that divides dt."
            )
    return m * own


def check_replay_rate(options: Any, dt: float) -> None:
    """At ``add_sensor``: each recording's interval against the sensor's ``T_s`` (:func:`_advance`)."""
    replay = getattr(options, "replay", None)
    for path in dict.fromkeys(p for p in _per_component(replay) if p is not None):
        _advance(_what(options, "replay", replay), options.update_period, path, dt)


def component_source(options: Any, component: int) -> tuple[str, str] | None:
    """``(path, channel)`` of the recording component ``component`` of the options replays, or None."""
    replay = getattr(options, "replay", None)
    if replay is None:
        return None
    paths = _per_component(replay)
    path = paths[component if len(paths) > 1 else 0]
    if path is None:
        return None
    channels = options.replay_channels
    if channels is None:
        channels = read_header(path, f"{_what(options, 'replay', replay)} is invalid: {path!r}").channels
    return path, channels[component]


def advance_of(options: Any, path: str, dt: float) -> int:
    """Recorded samples a due sample of the sensor advances in the recording ``path`` at control step
    ``dt`` (refused in one line as at ``add_sensor``)."""
    return _advance(_what(options, "replay", options.replay), options.update_period, path, dt)


def refuse_setter(sensor: Any, name: str, value: Any, replay: Any) -> None:
    """``set_noise`` / ``set_random_walk`` of ``sensor`` with ``value``: refused where it would be non-zero on
    a component that replays (``replay``: the sensor's option). A value that does not broadcast is left to
    the setter's own check."""
    replayed = np.array([p is not None for p in _per_component(replay)])
    try:
        hit = bool(np.any((np.asarray(value, dtype=float) != 0) & replayed))
    except (TypeError, ValueError):
        return
    if hit:
        raise ValueError(
            f"{type(sensor).__name__}.set_{name}({value!r}): sensor {sensor.name!r} has replay={replay!r} on "
            f"these components, which takes their white noise and drift from the recording. Fix: set "
            f"{name} only on components that replay nothing, or leave replay out of the options."
        )


# -- what a class's plan makes of them -----------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayColumn:
    """One replayed component: its samples (float64, read-only) and the recorded samples it advances per
    due sample."""

    samples: np.ndarray
    advance: int


def replay_columns(sensor: Any, dt: float, width: int) -> list[ReplayColumn | None] | None:
    """Per component of a sensor's plan (``sensor.settings``, ``sensor.option_type``, ``sensor.name``),
    its :class:`ReplayColumn` (None: not replayed), or None when the sensor replays nothing. Refuses in one
    line a channel count that is not the component count."""
    settings = sensor.settings
    replay = settings.get("replay")
    if replay is None:
        return None
    what = f"{sensor.option_type}.replay={replay!r}"
    channels = settings.get("replay_channels")
    if isinstance(replay, tuple):
        paths = replay
    else:
        if channels is None:
            channels = read_header(replay, f"{what} is invalid: {replay!r}").channels
            count_of = f"the recording's {len(channels)} channels {list(channels)}"
        else:
            count_of = f"replay_channels' {len(channels)} names"
        if len(channels) != width:
            raise ValueError(
                f"{what} is invalid for sensor {sensor.name!r}: {count_of} for its {width} components. Fix: "
                "give replay_channels with one channel name per component."
            )
        paths = (replay,) * width
    if len(paths) != width:
        raise ValueError(
            f"{what} is invalid for sensor {sensor.name!r}: {len(paths)} per-component files for its {width} "
            "components. Fix: give one file (or None) per component."
        )
    out: list[ReplayColumn | None] = []
    for path, channel in zip(paths, channels, strict=True):
        if path is None:
            out.append(None)
            continue
        samples = load_channel(path, channel, f"{what} is invalid: {path!r}")
        advance = _advance(what, sensor.update_period, path, dt)
        if advance > len(samples):
            raise ValueError(
                f"{what} is invalid for sensor {sensor.name!r}: channel {channel!r} holds {len(samples)} "
                f"samples, fewer than the {advance} it advances per sample. Fix: a longer recording."
            )
        out.append(ReplayColumn(samples, advance))
    return out


# -- the error term: set up once, bound per plan, drawn at resets, applied every step ---------------------
def setup(m: Any) -> None:
    """The recordings of the class's replayed components as one buffer of the class's dtype (rounded once
    from float64), and per column its start in it, its length and its advance per due sample (a column
    that replays nothing reads a zero after the recordings, length 1, advance 0)."""
    plan = m.params.plan
    pieces: list[np.ndarray] = []
    columns: list[tuple[int, int, int, int]] = []  # (start, length, advance, draw column) per column
    draws = 0
    start = 0
    for s in plan.sensors:
        replayed = replay_columns(s, plan.dt, s.width)
        if replayed is None:
            columns += [(-1, 1, 0, 0)] * s.width
            continue
        for column in replayed:
            if column is None:
                columns.append((-1, 1, 0, draws))
                continue
            pieces.append(column.samples)
            columns.append((start, len(column.samples), column.advance, draws))
            start += len(column.samples)
        draws += 1  # one offset fraction per env and replaying sensor (its components stay aligned)
    pieces.append(np.zeros(1))
    zero = start
    like = m.scratch
    i64 = dict(dtype=torch.long, device=like.device)
    base = [zero if b < 0 else b for b, _, _, _ in columns]
    length = [n for _, n, _, _ in columns]
    m.buffer("replay_recording", torch.from_numpy(np.concatenate(pieces)).to(like.dtype).to(like.device))
    m.buffer("replay_base", torch.tensor(base, **i64))
    m.buffer("replay_length", torch.tensor(length, **i64))
    m.buffer("replay_last", torch.tensor(length, **i64) - 1)
    m.buffer("replay_advance", torch.tensor([a for _, _, a, _ in columns], **i64))
    m.buffer("replay_draw_column", torch.tensor([d for _, _, _, d in columns], **i64))
    b = like.shape[0]
    f64 = dict(dtype=torch.float64, device=like.device)
    m.buffer("replay_fraction", torch.zeros(b, max(draws, 1), **f64))
    m.buffer("replay_length_f64", torch.tensor(length, **f64))
    m.buffer("replay_drawn", torch.zeros(like.shape, **f64))
    m.buffer("replay_offset", torch.zeros(like.shape, **i64))


def redraw(m: Any, mask: torch.Tensor) -> None:
    """At a reset of the envs in ``mask``: each draws ``u ~ U[0, 1)`` per replaying sensor from its random
    stream and starts each replayed component at ``floor(u N)`` of its ``N`` recorded samples. The index
    is set one advance before it: the reset's own sample (always due) advances onto the offset."""
    fraction, drawn, offset = m.buffer("replay_fraction"), m.buffer("replay_drawn"), m.buffer("replay_offset")
    m.params.random.uniform_(fraction, mask, 0)
    torch.index_select(fraction, 1, m.buffer("replay_draw_column"), out=drawn)
    drawn.mul_(m.buffer("replay_length_f64")).floor_()
    offset.copy_(drawn)
    torch.minimum(offset, m.buffer("replay_last"), out=offset)  # u < 1, but u N may round up to N
    offset.sub_(m.buffer("replay_advance"))
    torch.remainder(offset, m.buffer("replay_length"), out=offset)
    index = m.state("replay_index")
    torch.where(mask[:, None], offset, index, out=index)


def bind(m: Any) -> tuple:
    """The arrays :func:`apply` takes: the index, the advance and its scratch, the sampler's due samples
    (with a sampler), the wrap tables, the flat positions and the recordings, and the value's buffer."""
    due = None
    if m.sampler is not None:  # a due sample advances (lost ones too); a reset's is always due
        due = (m.sampler.due, m.column_sensor(), m.table("replay_due"))
    flat, value = m.table("replay_flat"), m.scratch
    return (
        m.state("replay_index"), m.buffer("replay_advance"), m.table("replay_step"), due,
        m.buffer("replay_last"), m.buffer("replay_length"), m.table("replay_wrapped"),
        m.buffer("replay_base"), flat, flat.view(-1), m.buffer("replay_recording"), value, value.view(-1),
    )  # fmt: skip


def apply(
    xp: Any,
    x: Any,
    data: Any,
    rows: Any,
    index: Any,
    advance: Any,
    step: Any,
    due: tuple | None,
    last: Any,
    length: Any,
    wrapped: Any,
    base: Any,
    flat: Any,
    flat_1d: Any,
    recording: Any,
    value: Any,
    value_1d: Any,
) -> Any:
    """Advance each column's index by its advance where a sample is due (every capture without a
    sampler), wrap it at the recording's end (one subtraction: the advance is at most the length), and add
    the recorded sample it points at."""
    if due is None:
        xp.add(index, advance, index)
    else:
        sampler_due, col_to_sensor, due_cols = due
        xp.take_in_range(sampler_due, col_to_sensor, due_cols, 1)
        xp.mul(due_cols, advance, step)
        xp.add(index, step, index)
    xp.greater(index, last, wrapped)  # 1 where the index ran past the end
    xp.mul(wrapped, length, wrapped)
    xp.sub(index, wrapped, index)
    xp.add(index, base, flat)
    xp.take_in_range(recording, flat_1d, value_1d, 0)
    xp.add(x, value, data)
    return data


def derive(m: Any) -> None:
    """After a load: every index inside its recording (a recording that changed since the checkpoint was
    written is refused in one line, rather than read out of its range)."""
    index = m.state("replay_index")
    if bool(((index < 0) | (index > m.buffer("replay_last"))).any()):
        raise ValueError(
            "load_state_dict: a replay index lies outside its recording: the recording file changed since "
            "the checkpoint was written. Fix: load the checkpoint with the recording it was written with."
        )


def present(m: Any) -> bool:
    return True  # a class holds the term only where some sensor replays
