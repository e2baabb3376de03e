"""A log's channel (its times and values) and the checks every reader applies to one."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import FitError

__all__ = ["INDEXED", "Channel", "check_time_column", "check_times", "closest", "unit_of"]

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
    """

    name: str
    times: np.ndarray
    values: np.ndarray
    source: str
    warnings: list[str] = field(default_factory=list)

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


#: a column name that says it holds times
_TIME_NAME = re.compile(r"time|stamp|clock|elapsed|^t$|^t[\s_(\[]|^sec|seconds", re.IGNORECASE)
#: a time column's name that says its unit is not seconds: (pattern, unit, factor to seconds)
_NOT_SECONDS = (
    (
        re.compile(r"(^|[^a-z])(ms|msec|millis|milliseconds?)([^a-z]|$)", re.IGNORECASE),
        "milliseconds",
        "1000",
    ),
    (
        re.compile(r"(^|[^a-z])(us|µs|usec|micros|microseconds?)([^a-z]|$)", re.IGNORECASE),
        "microseconds",
        "1e6",
    ),
    (re.compile(r"(^|[^a-z])(ns|nsec|nanos|nanoseconds?)([^a-z]|$)", re.IGNORECASE), "nanoseconds", "1e9"),
)


def check_time_column(
    times: np.ndarray, name: str, given: bool, where: str, flag: str = "--time"
) -> tuple[np.ndarray, list[str]]:
    """The time column ``name`` of a CSV or NPZ as seconds, and warnings; refused in one line where it is
    not a time in seconds: no time column at all (the default first column does not increase and is not
    named like one), a sample counter (steps of exactly 1, not named like a time), a name that gives
    another unit (``t_ms``, ``time [us]``). A median interval of half a second or more is a warning.

    Example:
        >>> import numpy as np
        >>> try:
        ...     check_time_column(np.arange(100.0), "sample", False, "log.csv")
        ... except FitError as e:
        ...     print(e)  # doctest: +ELLIPSIS
        log.csv: the first column 'sample' counts samples (steps of exactly 1), it is not a time ... Fix: ...
    """
    times = np.asarray(times, dtype=np.float64)
    timely = bool(_TIME_NAME.search(name))
    which = f"the time column {name!r}" if given else f"the first column {name!r}"
    how = f"name the time column with {flag} COLUMN (in seconds), or put it first"
    for pattern, unit, factor in _NOT_SECONDS:
        if pattern.search(name):
            raise FitError(
                f"{where}: {which} is in {unit} by its name; times must be in seconds",
                f"convert it to seconds (divide by {factor}) and name it e.g. 'time'",
            )
    if len(times) >= 3 and np.all(np.isfinite(times)):
        steps = np.diff(times)
        if not given and not timely and np.any(steps <= 0):
            raise FitError(f"{where}: no time column ({which} does not increase: it is not a time)", how)
        if not timely and np.all(steps == 1.0):
            raise FitError(
                f"{where}: {which} counts samples (steps of exactly 1), it is not a time in seconds", how
            )
    times = check_times(times, f"{where} column {name!r}")
    warnings = []
    median = float(np.median(np.diff(times)))
    if median >= 0.5:
        warnings.append(
            f"{which} has a median interval of {median:.4g} s: if that is not seconds, convert it "
            f"(times must be in seconds; {flag} names another column)"
        )
    return times, warnings


_UNIT = re.compile(r"[(\[]([^()\[\]]+)[)\]]\s*$")


def unit_of(channel: str) -> str | None:
    """The unit a channel's name ends with, in parentheses or brackets, or ``None``.

    Example:
        >>> unit_of("Gyroscope X (deg/s)"), unit_of("acc_z [m/s^2]"), unit_of("gyro_x")
        ('deg/s', 'm/s^2', None)
    """
    m = _UNIT.search(channel)
    return m[1].strip() if m else None
