"""Read the channels of a sensor log: time stamps in seconds and values, one array each per channel.

Formats, chosen by the file's suffix: CSV (a header line; ``--time`` names the time column, default the
first; times in seconds unless ``--time-unit`` or the column's name says otherwise) and NPZ (arrays; a 2-D
array's column ``name[i]``) built in; PX4 ULog, ROS 1 / ROS 2 bags and MCAP through optional extras
(:mod:`sensorgym.fitting.log_formats`). A ``.txt`` or ``.tsv`` table is read as CSV, with a line saying
so. A CSV may be UTF-8 (with or without Excel's byte-order mark), UTF-16 (with a byte-order mark, or
plain ASCII in UTF-16) or Latin-1; its fields are separated by commas, semicolons, tabs or (a ``.txt``)
spaces. A channel is named as its format names it (docs/fit.md). Every problem is a
:class:`~sensorgym.fitting.errors.FitError` naming the file, the channel and the fix: a file that is
empty, binary (with the format its first bytes show, when they show one), or not of its suffix's format.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = path.write_text("time,gyro_x\\n0.00,0.1\\n0.01,0.2\\n0.02,0.15\\n")
    >>> [c] = read_channels(path, ["gyro_x"])
    >>> c.times.tolist(), c.values.tolist()
    ([0.0, 0.01, 0.02], [0.1, 0.2, 0.15])
"""

from __future__ import annotations

import codecs
import csv
import warnings
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .channels import INDEXED, Channel, check_time_column, check_times, closest, make_channel
from .errors import FitError

__all__ = ["FORMATS", "Channel", "check_times", "closest", "read_channels"]

#: what ``fit`` reads, for the messages that list it
FORMATS = ".csv (or .txt, .tsv), .npz, .ulg, .bag, .mcap, or a ROS 2 bag directory"
#: the first bytes of the formats fit reads (and of files often mistaken for logs)
_MAGIC = (
    (b"ULog", "a PX4 ULog", ".ulg"),
    (b"#ROSBAG", "a ROS 1 bag", ".bag"),
    (b"\x89MCAP", "an MCAP file", ".mcap"),
    (b"SQLite format 3\x00", "an SQLite database (a ROS 2 bag's .db3?)", ".db3 inside its bag directory"),
    (b"PK\x03\x04", "a zip archive (NPZ, or a spreadsheet: .xlsx)", ".npz if numpy.savez wrote it"),
    (b"\x93NUMPY", "a single numpy array (.npy)", ".npz: numpy.savez(path, t=times, name=values)"),
    (b"\x1f\x8b", "a gzip archive", "its unpacked contents"),
)
_HEAD = 1 << 16  # bytes read to tell the encoding and whether a file is text
_FILES = (".csv", ".txt", ".tsv", ".npz", ".ulg", ".bag", ".mcap")


def _magic(head: bytes) -> str:
    """``"; its first bytes are those of X: pass it as Y"`` when ``head`` shows a known format."""
    for magic, what, fix in _MAGIC:
        if head.startswith(magic):
            return f"; its first bytes are those of {what}: pass it as {fix}"
    return ""


def _encoding(path: Path, head: bytes) -> tuple[str, str]:
    """``(codec, what to call it)`` of a text table, from its first bytes; a binary file is refused."""
    if head.startswith(codecs.BOM_UTF8):
        return "utf-8-sig", "UTF-8"
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32", "UTF-32"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16", "UTF-16"
    even, odd = head[0::2], head[1::2]
    if len(head) >= 4 and b"\x00" not in even and odd.count(0) == len(odd):
        return "utf-16-le", "UTF-16 (no byte-order mark)"
    if len(head) >= 4 and b"\x00" not in odd and even.count(0) == len(even):
        return "utf-16-be", "UTF-16 (no byte-order mark)"
    controls = sum(head.count(bytes([c])) for c in (*range(0, 9), *range(14, 32)) if c != 0x1A)
    if b"\x00" in head or controls > 1e-3 * len(head):
        at = next(i for i, c in enumerate(head) if c < 9 or 14 <= c < 32)
        raise FitError(
            f"{path}: a binary file, not a text table (byte {at} is {head[at]:#04x}){_magic(head)}",
            f"export the log as CSV (a header line, then rows of numbers), or pass it as one of {FORMATS}",
        )
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:  # not a character cut at the end of the sample
            return "latin-1", "Latin-1 (not UTF-8)"
    return "utf-8", "UTF-8"


def _delimiter(first: str, second: str, txt: bool) -> tuple[str | None, str]:
    """The field separator (``None``: runs of spaces, a ``.txt``'s) and its name, from the first lines."""
    try:
        d = csv.Sniffer().sniff(first, delimiters=",;\t").delimiter
        return d, {",": "commas", ";": "semicolons", "\t": "tabs"}[d]
    except csv.Error:
        pass
    if txt and len(first.split()) > 1 and len(first.split()) == len(second.split()):
        return None, "spaces"
    return ",", "commas"


def _one_line(text: object) -> str:
    """An error's text on one line, with characters a terminal would not show escaped."""
    return " ".join(repr(str(text))[1:-1].split())


# -- CSV ------------------------------------------------------------------------------------------------
def _empty_as_nan(field: str) -> float:
    return float(field) if field.strip() else np.nan


def _numbers(path: Path, delimiter: str | None, columns: list[int], codec: str) -> np.ndarray:
    """The ``columns`` below the header line, as float64 rows. An empty field (what pandas writes for a
    missing value, and what a log of sensors at several rates has in the rows of the others) is nan: read
    through a converter, slower, only when the fast read meets one."""
    kwargs = {"delimiter": delimiter, "skiprows": 1, "usecols": columns, "ndmin": 2, "encoding": codec}
    try:
        with warnings.catch_warnings():  # numpy warns of an empty file: said in one line by the caller
            warnings.simplefilter("ignore")
            try:
                return np.loadtxt(path, dtype=np.float64, **kwargs)
            except ValueError as e:
                if "could not convert string ''" not in str(e):
                    raise
                return np.loadtxt(path, dtype=np.float64, converters=_empty_as_nan, **kwargs)
    except (ValueError, UnicodeDecodeError) as e:
        raise FitError(
            f"{path}: a value is not a number ({_one_line(e)})",
            "leave only numbers below the header (an empty field or nan for a missing value)",
        ) from None


def _read_csv(
    path: Path, head: bytes, channels: Sequence[str], time: str | None, time_unit: str | None
) -> list[Channel]:
    codec, what = _encoding(path, head)
    with open(path, newline="", encoding=codec, errors="replace") as f:
        first, second = f.readline(), f.readline()
    if not first.strip():
        raise FitError(f"{path}: empty file or no header line", "write a header line of column names first")
    txt = path.suffix.lower() != ".csv"
    delimiter, sep = _delimiter(first, second, txt)
    header = [
        h.strip()
        for h in (first.split() if delimiter is None else next(csv.reader([first], delimiter=delimiter)))
    ]
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
            kind = "time column" if name == time else "channel"
            raise FitError(f"{path}: no {kind} {name!r}", closest(name, header))
    cols = [header.index(time), *(header.index(c) for c in channels)]
    unique = sorted(set(cols))
    data = _numbers(path, delimiter, unique, codec)
    if len(data) == 0:
        raise FitError(
            f"{path}: a header and no data rows", "export the log with its samples below the header"
        )
    column = {c: data[:, unique.index(c)] for c in unique}
    times, said = check_time_column(column[cols[0]], time, given, str(path), unit=time_unit)
    if txt:
        said.insert(0, f"{path.name} is read as CSV: a header line, then rows of numbers separated by {sep}")
    source = f"CSV column {{!r}} ({what}, separated by {sep}), times from column {time!r}"
    return [
        make_channel(name, times, column[c], source.format(name), str(path), said)
        for name, c in zip(channels, cols[1:], strict=True)
    ]


# -- NPZ ------------------------------------------------------------------------------------------------
def _npz_names(arrays: dict[str, np.ndarray]) -> list[str]:
    names = []
    for key, a in arrays.items():
        names += [key] if a.ndim == 1 else [f"{key}[{i}]" for i in range(a.shape[1])] if a.ndim == 2 else []
    return names


def _load_npz(path: Path, head: bytes) -> dict[str, np.ndarray]:
    """The arrays of an NPZ file, or one line saying why it is not one."""
    fix = "save the time stamps and channels with numpy.savez(path, t=times, gyro=values)"
    if not head.startswith(b"PK"):
        raise FitError(f"{path}: not an NPZ archive (numpy.savez writes a zip file){_magic(head)}", fix)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except ValueError as e:  # an object array: it would need pickle, which a log has no use for
        raise FitError(f"{path}: an array of the NPZ holds Python objects ({_one_line(e)})", fix) from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as e:
        raise FitError(f"{path}: a damaged NPZ archive ({_one_line(e) or type(e).__name__})", fix) from None
    other = [k for k, a in arrays.items() if not isinstance(a, np.ndarray)]  # numpy hands back raw bytes
    if other:
        raise FitError(f"{path}: a damaged NPZ archive (its member {other[0]!r} is not a numpy array)", fix)
    return arrays


def _read_npz(
    path: Path, head: bytes, channels: Sequence[str], time: str | None, time_unit: str | None
) -> list[Channel]:
    arrays = _load_npz(path, head)
    if not arrays:
        raise FitError(f"{path}: no arrays", "save the time stamps and channels with numpy.savez")
    given = time is not None
    time = next(iter(arrays)) if time is None else time
    if time not in arrays or arrays[time].ndim != 1:
        raise FitError(f"{path}: no 1-D time array {time!r}", closest(time, list(arrays)))
    numeric = [k for k, a in arrays.items() if a.dtype.kind not in "biuf"]
    if numeric:
        raise FitError(
            f"{path}: array {numeric[0]!r} holds {arrays[numeric[0]].dtype} values, not numbers",
            "save numbers only (numpy.savez with float arrays)",
        )
    times, said = check_time_column(arrays[time], time, given, str(path), unit=time_unit)
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
        source = f"NPZ array {name!r}, times from {time!r}"
        out.append(make_channel(name, times, values, source, str(path), said))
    return out


def _head(path: Path) -> bytes:
    """The first bytes of the log file (``b""`` for a directory or an empty file), refused when it cannot
    be read."""
    if path.is_dir():
        return b""
    try:
        with open(path, "rb") as f:
            return f.read(_HEAD)
    except OSError as e:
        raise FitError(
            f"log {str(path)!r} cannot be read ({e.strerror or e})", "check its permissions"
        ) from None


def read_channels(
    path: str | Path,
    channels: Sequence[str],
    time: str | None = None,
    time_unit: str | None = None,
) -> list[Channel]:
    """Read ``channels`` from the log at ``path`` (the format from its suffix; a directory is a ROS 2 bag).

    ``time`` names the time column of a CSV or the time array of an NPZ (default: the first) and
    ``time_unit`` its unit (``s``, ``ms``, ``us``, ``ns``; default: what its name says, else seconds); the
    other formats carry their own time stamps and refuse both.
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
    if path.is_dir() and suffix in _FILES and suffix != ".bag":  # a directory is a ROS 2 bag
        raise FitError(f"log {str(path)!r} is a folder", f"pass the log file inside it ({FORMATS})")
    head = _head(path)
    if suffix not in _FILES and not path.is_dir() and suffix != ".db3":
        raise FitError(f"log {str(path)!r}: unknown format {suffix!r}{_magic(head)}", f"pass a {FORMATS}")
    if not head and not path.is_dir():
        raise FitError(
            f"log {str(path)!r} is empty (0 bytes)", "pass the log itself: this file was never written"
        )
    if suffix in (".csv", ".txt", ".tsv"):
        return _read_csv(path, head, channels, time, time_unit)
    if suffix == ".npz":
        return _read_npz(path, head, channels, time, time_unit)
    if time is not None or time_unit is not None:
        flag = f"--time {time}" if time is not None else f"--time-unit {time_unit}"
        raise FitError(
            f"{flag}: a {suffix or 'bag'} log carries its own time stamps",
            f"drop {flag.split()[0]} for this log",
        )
    if suffix == ".ulg":
        return log_formats.read_ulog(path, channels)
    if suffix == ".mcap":
        return log_formats.read_mcap(path, channels)
    return log_formats.read_rosbag(path, channels)  # a .bag, a ROS 2 bag's directory or its .db3
