"""Read the channels of a sensor log: time stamps in seconds and values, one array each per channel.

Formats, chosen by the file's suffix: CSV (a header line; ``--time`` names the time column, default the
first; times in seconds) and NPZ (arrays; a 2-D array's column ``name[i]``) built in; PX4 ULog, ROS 1 /
ROS 2 bags and MCAP through optional extras (:mod:`sensorgym.fitting.log_formats`). A channel is named
as its format names it (docs/fit.md). Every problem is a :class:`~sensorgym.fitting.errors.FitError`
naming the file, the channel and the fix.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = path.write_text("time,gyro_x\\n0.00,0.1\\n0.01,0.2\\n0.02,0.15\\n")
    >>> [c] = read_channels(path, ["gyro_x"])
    >>> c.times.tolist(), c.values.tolist()
    ([0.0, 0.01, 0.02], [0.1, 0.2, 0.15])
"""

from __future__ import annotations

import csv
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .channels import INDEXED, Channel, check_time_column, check_times, closest
from .errors import FitError

__all__ = ["Channel", "check_times", "closest", "read_channels"]


def _finite(name: str, times: np.ndarray, values: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Drop samples whose value is not finite (a logger's empty field); refuse a channel with none left."""
    values = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(values)
    if not keep.all():
        if keep.sum() < 3:
            raise FitError(f"{where}: channel {name!r} has no finite values", "choose another channel")
        times, values = times[keep], values[keep]
    return times, values


# -- CSV ------------------------------------------------------------------------------------------------
def _read_csv(path: Path, channels: Sequence[str], time: str | None) -> list[Channel]:
    with open(path, newline="") as f:
        first = f.readline()
    if not first.strip():
        raise FitError(f"{path}: empty file or no header line", "write a header line of column names first")
    try:
        delimiter = csv.Sniffer().sniff(first, delimiters=",;\t").delimiter
    except csv.Error:
        delimiter = ","
    header = [h.strip() for h in next(csv.reader([first], delimiter=delimiter))]
    try:
        [float(h) for h in header]
    except ValueError:
        pass
    else:
        raise FitError(
            f"{path}: the first line holds numbers, not column names",
            "add a header line naming the columns (e.g. time,gyro_x,...)",
        )
    given = time is not None
    time = header[0] if time is None else time
    for name in [time, *channels]:
        if name not in header:
            what = "time column" if name == time else "channel"
            raise FitError(f"{path}: no {what} {name!r}", closest(name, header))
    cols = [header.index(time), *(header.index(c) for c in channels)]
    unique = sorted(set(cols))
    try:
        with warnings.catch_warnings():  # numpy warns of an empty file: said below in one line instead
            warnings.simplefilter("ignore")
            data = np.loadtxt(
                path, delimiter=delimiter, skiprows=1, usecols=unique, ndmin=2, dtype=np.float64
            )
    except ValueError as e:
        raise FitError(
            f"{path}: a value is not a number ({' '.join(str(e).split())})",
            "leave only numbers below the header (empty fields as nan)",
        ) from None
    if len(data) == 0:
        raise FitError(
            f"{path}: a header and no data rows", "export the log with its samples below the header"
        )
    column = {c: data[:, unique.index(c)] for c in unique}
    times, doubts = check_time_column(column[cols[0]], time, given, str(path))
    out = []
    for name, c in zip(channels, cols[1:], strict=True):
        t, v = _finite(name, times, column[c], str(path))
        out.append(Channel(name, t, v, f"CSV column {name!r}, times from column {time!r} (s)", list(doubts)))
    return out


# -- NPZ ------------------------------------------------------------------------------------------------
def _npz_names(arrays: dict[str, np.ndarray]) -> list[str]:
    names = []
    for key, a in arrays.items():
        names += [key] if a.ndim == 1 else [f"{key}[{i}]" for i in range(a.shape[1])] if a.ndim == 2 else []
    return names


def _read_npz(path: Path, channels: Sequence[str], time: str | None) -> list[Channel]:
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    if not arrays:
        raise FitError(f"{path}: no arrays", "save the time stamps and channels with numpy.savez")
    given = time is not None
    time = next(iter(arrays)) if time is None else time
    if time not in arrays or arrays[time].ndim != 1:
        raise FitError(f"{path}: no 1-D time array {time!r}", closest(time, list(arrays)))
    times, doubts = check_time_column(arrays[time], time, given, str(path))
    out = []
    for name in channels:
        m = INDEXED.match(name)
        if name in arrays and arrays[name].ndim == 1:
            values = arrays[name]
        elif m and m["base"] in arrays and arrays[m["base"]].ndim == 2:
            a, i = arrays[m["base"]], int(m["index"])
            if i >= a.shape[1]:
                raise FitError(
                    f"{path}: {name}: {m['base']} has {a.shape[1]} columns", f"use 0..{a.shape[1] - 1}"
                )
            values = a[:, i]
        else:
            raise FitError(f"{path}: no channel {name!r}", closest(name, _npz_names(arrays)))
        if len(values) != len(times):
            raise FitError(
                f"{path}: {name!r} has {len(values)} values and {time!r} {len(times)} times",
                "save one value per time stamp",
            )
        t, v = _finite(name, times, values, str(path))
        out.append(Channel(name, t, v, f"NPZ array {name!r}, times from {time!r} (s)", list(doubts)))
    return out


def read_channels(path: str | Path, channels: Sequence[str], time: str | None = None) -> list[Channel]:
    """Read ``channels`` from the log at ``path`` (the format from its suffix; a directory is a ROS 2 bag).

    ``time`` names the time column of a CSV or the time array of an NPZ (default: the first); the other
    formats carry their own time stamps and refuse ``time``.
    """
    from . import log_formats

    path = Path(path)
    if not path.exists():
        raise FitError(f"log {str(path)!r} does not exist", "check the path")
    if not channels:
        raise FitError("no channels given", "name them with --channels, e.g. --channels gyro_x gyro_y")
    if len(set(channels)) != len(channels):
        raise FitError(f"--channels {list(channels)} names a channel twice", "name each channel once")
    suffix = path.suffix.lower()
    if suffix in (".csv", ".txt", ".tsv"):
        return _read_csv(path, channels, time)
    if suffix == ".npz":
        return _read_npz(path, channels, time)
    if time is not None:
        raise FitError(
            f"--time {time}: a {suffix or 'bag'} log carries its own time stamps", "drop --time for this log"
        )
    if suffix == ".ulg":
        return log_formats.read_ulog(path, channels)
    if suffix == ".bag" or path.is_dir() or suffix == ".db3":
        return log_formats.read_rosbag(path, channels)
    if suffix == ".mcap":
        return log_formats.read_mcap(path, channels)
    raise FitError(
        f"log {str(path)!r}: unknown format {suffix!r}",
        "use a .csv, .npz, .ulg, .bag, .mcap file or a ROS 2 bag directory",
    )
