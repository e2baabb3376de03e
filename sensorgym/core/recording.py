"""The recording a sensor replays (docs/error_model.md, "Replayed real errors"): the file ``sensorgym fit
--residuals FILE`` writes and the option ``replay`` names, in one place.

An NPZ (loadable with ``allow_pickle=False``): ``T_s`` (the log's sample interval, s), ``channels`` (a
string array of the channel names, in order) and per channel one float64 array named as the channel (its
samples at rest, less their mean; lost samples absent). :func:`write_residuals` writes it;
:func:`read_header` and :func:`load_channel` read it, refusing in one line a file that is not one.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "rest.npz"
    >>> _ = write_residuals(path, 0.01, {"gx": np.zeros(5), "gy": np.ones(5)})
    >>> read_header(str(path), "replay")
    Header(sample_interval=0.01, channels=('gx', 'gy'))
    >>> load_channel(str(path), "gy", "replay").tolist()
    [1.0, 1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["FIX_FILE", "RESIDUALS_KEYS", "Header", "load_channel", "read_header", "write_residuals"]

#: the file's pinned names besides one array per channel: the sample interval (s) and the channel names
RESIDUALS_KEYS = ("T_s", "channels")
#: the fix of every refusal of a file that is not a recording
FIX_FILE = "pass the NPZ that `sensorgym fit LOG --channels NAME --residuals FILE` wrote"


@dataclass(frozen=True)
class Header:
    """A recording's sample interval ``T_s`` (s) and its channel names, in the file's order."""

    sample_interval: float
    channels: tuple[str, ...]


def write_residuals(path: str | os.PathLike, sample_interval: float, channels: Mapping[str, Any]) -> Path:
    """Write a recording to ``path`` (returned): ``T_s``, ``channels`` (a string array of the names, in
    order) and per channel one float64 array named as the channel (loadable with ``allow_pickle=False``)."""
    names = list(channels)
    for name in names:
        if name in RESIDUALS_KEYS:
            raise ValueError(
                f"write_residuals: a channel named {name!r} would overwrite the file's own {name!r} array. "
                "Fix: rename the channel (e.g. with the log's column name)."
            )
    arrays = {name: np.asarray(channels[name], dtype=np.float64).reshape(-1) for name in names}
    # np.savez names each array's zip entry by its key: any string, slashes and spaces included
    np.savez(
        Path(path),
        T_s=np.float64(sample_interval),
        channels=np.array(names, dtype=np.str_),
        **arrays,
    )
    return Path(path)


#: the channels read, by file, channel and the CRC-32 the zip directory gives the channel's array (a file
#: rewritten with other values reads afresh, whenever it was rewritten)
_SAMPLES: dict[tuple, np.ndarray] = {}


def _open(path: str, what: str) -> Any:
    """``np.load`` of a recording, refusing in one line a file that is not one."""
    try:
        archive = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        if not os.path.isabs(path):  # relative paths are read from the working directory, not the config's
            raise ValueError(
                f"{what}: no such file in the working directory {os.getcwd()} (a relative path is read from "
                "there). Fix: run from the folder the path is relative to, or give an absolute path."
            ) from None
        raise ValueError(f"{what}: no such file. Fix: {FIX_FILE}.") from None
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise ValueError(f"{what}: not a recording NPZ ({e}). Fix: {FIX_FILE}.") from None
    if not hasattr(archive, "files"):
        raise ValueError(f"{what}: a single array, not a recording NPZ. Fix: {FIX_FILE}.")
    return archive


def read_header(path: str, what: str) -> Header:
    """The ``T_s`` and channel names of the recording ``path``; ``what`` starts every message (the option
    and its value)."""
    with _open(path, what) as archive:
        missing = [k for k in RESIDUALS_KEYS if k not in archive.files]
        if missing:
            raise ValueError(
                f"{what}: the file has no {' and no '.join(repr(k) for k in missing)} array (it holds "
                f"{sorted(archive.files)[:8]}). Fix: {FIX_FILE}."
            )
        try:
            interval, names = archive["T_s"], archive["channels"]
        except ValueError as e:  # an object array: allow_pickle=False refuses it
            raise ValueError(f"{what}: {e}. Fix: {FIX_FILE}.") from None
        t_s = float(interval.reshape(-1)[0]) if interval.size == 1 and interval.dtype.kind in "fiu" else None
        if t_s is None or not (math.isfinite(t_s) and t_s > 0):
            raise ValueError(
                f"{what}: its T_s {interval.tolist()!r} is not one positive number of seconds. "
                f"Fix: {FIX_FILE}."
            )
        if names.ndim != 1 or names.dtype.kind not in "US" or names.size == 0:
            raise ValueError(
                f"{what}: its 'channels' is not a non-empty 1-D array of names. Fix: {FIX_FILE}."
            )
        channels = tuple(str(n) for n in names.tolist())
        absent = [c for c in channels if c not in archive.files]
        if absent:
            raise ValueError(
                f"{what}: the file names channel {absent[0]!r} but holds no array of it. Fix: {FIX_FILE}."
            )
    return Header(t_s, channels)


def load_channel(path: str, channel: str, what: str) -> np.ndarray:
    """The float64 samples of ``channel`` in the recording ``path`` (cached by the CRC of its array), refused
    in one line unless a non-empty 1-D array of finite numbers."""
    with _open(path, what) as archive:
        if channel not in archive.files:
            raise ValueError(f"{what}: the file holds no channel {channel!r}. Fix: {FIX_FILE}.")
        member = archive.zip.getinfo(f"{channel}.npy")
        key = (os.path.realpath(path), channel, member.CRC, member.file_size)
        known = _SAMPLES.get(key)
        if known is not None:
            return known
        try:
            values = archive[channel]
        except ValueError as e:
            raise ValueError(f"{what}: channel {channel!r}: {e}. Fix: {FIX_FILE}.") from None
    if values.ndim != 1 or values.size == 0 or values.dtype.kind not in "fiu":
        raise ValueError(
            f"{what}: channel {channel!r} is not a non-empty 1-D array of numbers (shape {values.shape}, "
            f"dtype {values.dtype}). Fix: {FIX_FILE}."
        )
    values = values.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        raise ValueError(
            f"{what}: channel {channel!r} holds {values[bad[0]]} at sample {bad[0]}; a recording is finite. "
            f"Fix: {FIX_FILE}."
        )
    values.setflags(write=False)
    if len(_SAMPLES) > 64:  # a few recordings per process: keep the cache from growing without end
        _SAMPLES.clear()
    _SAMPLES[key] = values
    return values
