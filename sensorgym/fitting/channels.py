"""A log's channel (its times and values) and the checks every reader applies to one."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import FitError

__all__ = ["INDEXED", "Channel", "check_times", "closest"]

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
    """

    name: str
    times: np.ndarray
    values: np.ndarray
    source: str

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
            f"{where}: the time {what} at sample {i + 1} ({times[i]!r} then {times[i + 1]!r}); times must "
            "increase",
            f"{fix_sort}, or drop repeated rows",
        )
    return times
