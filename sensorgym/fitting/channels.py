"""A log's channel (its times and values) and the checks every reader applies to one: time stamps in
seconds (a time column in another unit is converted when its name or ``--time-unit`` says which, and
refused when its values suggest one and nothing says it), values that are numbers (the others are left out
and said), a channel that varies, and the unit its name gives."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import FitError

__all__ = [
    "INDEXED",
    "TIME_UNITS",
    "Channel",
    "check_time_column",
    "check_times",
    "closest",
    "make_channel",
    "unit_of",
]

#: a column of a 2-D array (NPZ) or an element of an array field (ULog, bags): ``name[i]``
INDEXED = re.compile(r"^(?P<base>.+)\[(?P<index>\d+)\]$")


@dataclass
class Channel:
    """One channel of a log.

    Attributes:
        name: the channel as the user named it (``"Gyroscope X (deg/s)"``, ``"sensor_combined.gyro_rad[0]"``).
        times: ``(n,)`` float64 seconds, strictly increasing.
        values: ``(n,)`` float64 values, finite.
        source: where it came from, for the report (e.g. ``"CSV column 3, times from 'Time (s)'"``).
        warnings: what the reader doubts about it (printed and written to the report).
        invalid_times: the time stamps of the sensor's own samples whose value was not a finite number
            (nan, inf, an empty field): left out of ``times`` and ``values``, and not lost samples either
            (:func:`sensorgym.fitting.timing.analyse_timing` counts them apart).
    """

    name: str
    times: np.ndarray
    values: np.ndarray
    source: str
    warnings: list[str] = field(default_factory=list)
    invalid_times: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def duration(self) -> float:
        """Seconds from the first time stamp to the last."""
        return float(self.times[-1] - self.times[0]) if len(self.times) else 0.0


def closest(name: str, known: Sequence[str], limit: int = 12) -> str:
    """A fix naming the closest known channel names (and a few others), for an unknown ``name``."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    if not close:  # an abbreviation: every word of the name starts a word of the channel ("Gyro X")
        words = re.findall(r"[a-z0-9]+", name.lower())
        close = [k for k in known if words and all(
            any(w.startswith(q) for w in re.findall(r"[a-z0-9]+", k.lower())) for q in words
        )][:3]  # fmt: skip
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    shown = list(known)[:limit]
    more = f" (and {len(known) - limit} more)" if len(known) > limit else ""
    return f"{hint}the log has {shown}{more}"


def check_times(times: np.ndarray, where: str, fix_sort: str = "sort the log by time") -> np.ndarray:
    """``times`` as float64 seconds, refused in one line unless finite and strictly increasing."""
    times = np.asarray(times, dtype=np.float64)
    if times.ndim != 1 or len(times) < 3:
        raise FitError(
            f"{where}: {len(times)} time stamps", "a channel needs at least 3 samples; record a longer log"
        )
    bad = np.flatnonzero(~np.isfinite(times))
    if len(bad):
        raise FitError(f"{where}: time stamp {bad[0]} is {times[bad[0]]}", "remove rows without a time")
    steps = np.diff(times)
    back = np.flatnonzero(steps <= 0)
    if len(back):
        i = int(back[0])
        what = "repeats" if steps[i] == 0 else "goes back"
        raise FitError(
            f"{where}: the time {what} at sample {i + 1} ({float(times[i]):.10g} then "
            f"{float(times[i + 1]):.10g}); times must increase",
            f"{fix_sort}, or drop repeated rows",
        )
    return times


#: a time column's unit -> how many of it make a second (``--time-unit``)
TIME_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
_UNIT_WORDS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}
#: a column name that says it holds times
_TIME_NAME = re.compile(r"time|stamp|clock|elapsed|^t$|^t[\s_(\[]|^sec|seconds", re.IGNORECASE)
#: a time column's name that says its unit is not seconds
_NAMED_UNIT = (
    (re.compile(r"(^|[^a-z])(ms|msec|millis|milliseconds?)([^a-z]|$)", re.IGNORECASE), "ms"),
    (re.compile(r"(^|[^a-z])(us|µs|μs|usec|micros|microseconds?)([^a-z]|$)", re.IGNORECASE), "us"),
    (re.compile(r"(^|[^a-z])(ns|nsec|nanos|nanoseconds?)([^a-z]|$)", re.IGNORECASE), "ns"),
)
#: a sample interval a sensor plausibly has (s): 50 kHz to 2 Hz; a median interval of SLOW or more in
#: the column's numbers is read as seconds only when something says so
_PLAUSIBLE = (2e-5, 0.5)
SLOW = _PLAUSIBLE[1]


def _named_unit(name: str) -> str | None:
    return next((unit for pattern, unit in _NAMED_UNIT if pattern.search(name)), None)


def _likely_unit(times: np.ndarray, median: float) -> tuple[str, str] | None:
    """``(unit, why)`` a time column whose numbers step slowly for seconds is probably in: a Unix time's
    magnitude (2001 to 2286) first, else the unit that puts the median interval at a sensor's rate."""
    first = abs(float(times[0]))
    for unit in ("s", "ms", "us", "ns"):
        if 1e9 <= first / TIME_UNITS[unit] < 1e10:
            return unit, f"its first value {first:.4g} is a Unix time in {_UNIT_WORDS[unit]}"
    for unit in ("ms", "us", "ns"):
        interval = median / TIME_UNITS[unit]
        if _PLAUSIBLE[0] <= interval < _PLAUSIBLE[1]:
            return unit, f"in {_UNIT_WORDS[unit]} it is a {1 / interval:.4g} Hz sensor"
    return None


def check_time_column(
    times: np.ndarray,
    name: str,
    given: bool,
    where: str,
    flag: str = "--time",
    unit: str | None = None,
) -> tuple[np.ndarray, list[str]]:
    """The time column ``name`` of a CSV or NPZ as seconds, and what was done to it (lines to print).

    ``unit`` (``--time-unit``: ``s``, ``ms``, ``us`` or ``ns``) says the column's unit; without it a name
    that gives one (``t_ms``, ``time [us]``, ``stamp_ns``) is read in that unit, with a line saying so.
    Refused in one line: no time column at all (the default first column does not increase and is not
    named like one), a sample counter (steps of exactly 1, neither named like a time nor given a unit), a
    unit that contradicts the name, and numbers whose median interval is ``SLOW`` (0.5) or more with no
    unit said: milliseconds named ``time`` look so, and so does a slow sensor (``--time-unit s``).

    Example:
        >>> import numpy as np
        >>> try:
        ...     check_time_column(np.arange(100.0), "sample", False, "log.csv")
        ... except FitError as e:
        ...     print(e)  # doctest: +ELLIPSIS
        log.csv: the first column 'sample' counts samples (steps of exactly 1), it is not a time ... Fix: ...
        >>> t, said = check_time_column(np.arange(100.0) * 5, "t_ms", True, "log.csv")
        >>> float(t[1]), said  # doctest: +ELLIPSIS
        (0.005, ["the time column 't_ms' is read as milliseconds, as its name says ..."])
    """
    times = np.asarray(times, dtype=np.float64)
    which = f"the time column {name!r}" if given else f"the first column {name!r}"
    how = f"name the time column with {flag} COLUMN (in seconds), or put it first"
    named = _named_unit(name)
    said: list[str] = []
    if unit is not None:
        if unit not in TIME_UNITS:
            raise FitError(f"--time-unit {unit!r} is not a unit of time", "use one of s, ms, us, ns")
        if named is not None and named != unit:
            raise FitError(
                f"--time-unit {unit} contradicts {which}, which is in {_UNIT_WORDS[named]} by its name",
                f"drop --time-unit (the name says {named}) or pass --time-unit {named}",
            )
    elif named is not None:
        unit = named
        said.append(
            f"{which} is read as {_UNIT_WORDS[named]}, as its name says (--time-unit sets another unit)"
        )
    if len(times) >= 3 and np.all(np.isfinite(times)):
        steps = np.diff(times)
        timely = bool(_TIME_NAME.search(name))
        if not given and not timely and np.any(steps <= 0):
            raise FitError(f"{where}: no time column ({which} does not increase: it is not a time)", how)
        if not timely and unit is None and np.all(steps == 1.0):
            raise FitError(
                f"{where}: {which} counts samples (steps of exactly 1), it is not a time in seconds", how
            )
    times = check_times(times, f"{where} column {name!r}")
    if unit is None:
        median = float(np.median(np.diff(times)))
        if median >= SLOW:
            _refuse_slow(times, median, which, where)
        return times, said
    return times / TIME_UNITS[unit], said


def _refuse_slow(times: np.ndarray, median: float, which: str, where: str) -> None:
    """A time column whose numbers step by half a unit or more: seconds of a slow sensor, or (far more
    often) milliseconds, microseconds or nanoseconds; the user says which."""
    likely = _likely_unit(times, median)
    seconds = f"as seconds a {1 / median:.3g} Hz sensor"
    if likely is None or likely[0] == "s":
        why = f"; {likely[1]}" if likely else ""
        fix = "pass --time-unit s if the sensor is that slow (or ms, us, ns: the column's unit)"
    else:
        why = f"; {likely[1]}"
        fix = f"pass --time-unit {likely[0]} (or s for a sensor that slow; the column's unit: s, ms, us, ns)"
    raise FitError(f"{where}: {which} has a median interval of {median:.4g}: {seconds}{why}", fix)


def make_channel(
    name: str,
    times: np.ndarray,
    values: np.ndarray,
    source: str,
    where: str,
    warnings: Sequence[str] = (),
) -> Channel:
    """A :class:`Channel` of the values that are numbers, refused in one line when fewer than 3 are or
    when they never change (a sensor's log varies at least by its noise).

    A value that is not a finite number (nan, inf, an empty field) is left out, with a line saying how
    many. Where the channel keeps the rate of the rows (a few bad values among its samples), their time
    stamps go to ``invalid_times``: the sensor sampled then and its value was unusable, which is not a lost
    sample. Where it does not (its values stand only on every k-th row: a log that interleaves sensors of
    several rates), its samples are its rows with values.

    Example:
        >>> import numpy as np
        >>> v = np.random.default_rng(0).normal(size=100); v[[10, 11]] = np.nan
        >>> c = make_channel("gx", np.arange(100) * 0.01, v, "test", "log.csv")
        >>> len(c.values), c.invalid_times.tolist()
        (98, [0.1, 0.11])
    """
    times = np.asarray(times, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    notes = list(warnings)
    keep = np.isfinite(values)
    invalid = np.empty(0)
    if not keep.all():
        count = int(keep.sum())
        if count < 3:
            raise FitError(
                f"{where}: channel {name!r} has {count} finite values of {len(values)}",
                "choose another channel",
            )
        nan, inf = int(np.isnan(values).sum()), int(np.isinf(values).sum())
        what = ", ".join(f"{k} {w}" for k, w in ((nan, "nan"), (inf, "inf")) if k)
        bad = f"{len(values) - count} of {len(values)} values of {name!r} are not numbers ({what})"
        interleaved = np.median(np.diff(times[keep])) > 1.5 * np.median(np.diff(times))
        if interleaved:
            notes.append(
                f"{bad}: its values stand on fewer rows than the log has (a log of sensors of several "
                "rates), so its samples are its rows with values"
            )
        else:
            first = float(times[~keep][0] - times[0])
            invalid = times[~keep]
            notes.append(
                f"{bad}, the first {first:.4g} s from its start: left out of every estimate and not counted "
                "as lost samples (their time stamps are there; dropout counts only missing time stamps)"
            )
        times, values = times[keep], values[keep]
    if values.min() == values.max():
        raise FitError(
            f"{where}: channel {name!r} holds the one value {float(values[0]):g} in all its {len(values)} "
            "samples: there is no noise to fit",
            "check that it is the sensor's channel (not a status field or an input that was not "
            "connected), or fit another channel",
        )
    return Channel(name, times, values, source, notes, invalid)


_UNIT = re.compile(r"[(\[]([^()\[\]]+)[)\]]\s*$")
_INDEX = re.compile(r"\[\d+\]\s*$")
#: the unit a field's name gives (PX4 ULog names, ROS messages): (pattern on the field, unit)
_FIELD_UNITS = (
    (re.compile(r"^gyro(scope)?_rad$|_rad_s$"), "rad/s"),
    (re.compile(r"_m_s2$"), "m/s^2"),
    (re.compile(r"_m_s$"), "m/s"),
    (re.compile(r"_(ga|gauss)$"), "Ga"),
    (re.compile(r"_pa$"), "Pa"),
    (re.compile(r"_cel[cs]ius$"), "°C"),
    (re.compile(r"_meters?$"), "m"),
    (re.compile(r"_rad$"), "rad"),
    (re.compile(r"^angular_velocity$"), "rad/s"),  # sensor_msgs/Imu (REP 103)
    (re.compile(r"^linear_acceleration$"), "m/s^2"),
    (re.compile(r"^magnetic_field$"), "T"),  # sensor_msgs/MagneticField
    (re.compile(r"^fluid_pressure$"), "Pa"),
)
#: the unit of a PX4 topic's x/y/z fields
_TOPIC_UNITS = (
    (re.compile(r"^sensor_gyro"), "rad/s"),
    (re.compile(r"^sensor_accel"), "m/s^2"),
    (re.compile(r"^sensor_mag"), "Ga"),
)


def unit_of(channel: str) -> str | None:
    """The unit a channel's name gives, or ``None``: a unit it ends with, in parentheses or brackets
    (an element index such as ``[0]`` is not one), else the unit of a field whose name carries it (PX4's
    ``gyro_rad``, ``accelerometer_m_s2``, ``magnetometer_ga``; ``sensor_gyro.x``; ROS's
    ``angular_velocity``, ``linear_acceleration``, ``magnetic_field``).

    Example:
        >>> unit_of("Gyroscope X (deg/s)"), unit_of("acc_z [m/s^2]"), unit_of("gyro_x")
        ('deg/s', 'm/s^2', None)
        >>> unit_of("sensor_combined.gyro_rad[0]"), unit_of("/imu/data.linear_acceleration.z")
        ('rad/s', 'm/s^2')
        >>> unit_of("imu[2]") is None  # a column index, not a unit
        True
    """
    base = _INDEX.sub("", channel.strip())
    m = _UNIT.search(base)
    if m:
        return m[1].strip()
    parts = [_INDEX.sub("", p) for p in base.split(".") if p]
    for part in reversed(parts):
        for pattern, unit in _FIELD_UNITS:
            if pattern.search(part.lower()):
                return unit
    if len(parts) == 2 and parts[1].lower() in ("x", "y", "z"):
        for pattern, unit in _TOPIC_UNITS:
            if pattern.search(parts[0].lower()):
                return unit
    return None
