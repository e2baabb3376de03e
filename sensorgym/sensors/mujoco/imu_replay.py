"""The IMU's per-field replay options (``acc_replay``, ``gyro_replay``, ``mag_replay`` and their
``*_replay_channels``; docs/error_model.md, "Replayed real errors").

Each names a recording (the NPZ ``sensorgym fit --residuals`` writes) for the three components of one
field, and merges into the 9-component ``replay`` / ``replay_channels`` of :class:`~sensorgym.IMUOptions`
(one path and one channel name per component, None where not replayed) exactly as ``acc_noise`` merges
into ``noise``: a field's channels default to its file's, which must then be three. A replayed field takes
its white noise, drift and filtering from the recording, so its noise, walk, bias instability and
bandwidth options may not be given too; the refusal names the options as the user wrote them.

Example:
    >>> import numpy as np, tempfile, pathlib, sensorgym as sg
    >>> from sensorgym.core.recording import write_residuals
    >>> path = str(pathlib.Path(tempfile.mkdtemp()) / "gyro.npz")
    >>> _ = write_residuals(path, 0.01, {c: np.zeros(100) for c in ("gx", "gy", "gz")})
    >>> o = sg.IMUOptions(body="torso", gyro_replay=path, acc_noise=0.05)
    >>> o.replay[:3], o.replay[3] == path, o.replay_channels[3:6]
    ((None, None, None), True, ('gx', 'gy', 'gz'))
"""

from __future__ import annotations

import os
from typing import Any

from ...core.options import did_you_mean, option_error
from ...core.recording import read_header
from ...core.replay import EXCLUSIVE

__all__ = ["REPLAY_FIELDS", "merge_replay"]

FIELDS = ("acc", "gyro", "mag")
#: the per-field replay options of the IMU
REPLAY_FIELDS = tuple(f"{f}_{kind}" for kind in ("replay", "replay_channels") for f in FIELDS)


def _field_replay(options: Any, f: str) -> tuple[str, tuple[str, ...]] | None:
    """``(path, 3 channel names)`` of field ``f``'s replay, or None; each checked against its file."""
    name, channels_name = f"{f}_replay", f"{f}_replay_channels"
    path, channels = getattr(options, name), getattr(options, channels_name)
    if path is None:
        if channels is not None:
            raise option_error(
                "IMUOptions", channels_name, channels, f"it names channels of a recording but {name} is None",
                f"give {name}='residuals.npz' too, or leave {channels_name} out",
            )  # fmt: skip
        return None
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(
            f"IMUOptions.{name}={path!r} is invalid: expected the path of a recording. Fix: pass "
            f"{name}='residuals.npz' (written by sensorgym fit --residuals), or None."
        )
    path = os.fspath(path)
    known = read_header(path, f"IMUOptions.{name}={path!r} is invalid: {path!r}").channels
    if channels is None:
        if len(known) != 3:
            raise option_error(
                "IMUOptions", name, path, f"the recording has {len(known)} channels {list(known)}, and the "
                f"{f} field has 3 components", f"give {channels_name} with its 3 channels (x, y, z)",
            )  # fmt: skip
        return path, known
    names = (channels,) if isinstance(channels, str) else tuple(channels)
    if len(names) != 3 or not all(isinstance(c, str) for c in names):
        raise option_error(
            "IMUOptions", channels_name, channels, "expected 3 channel names (x, y, z)",
            f"pass e.g. {channels_name}=['x', 'y', 'z'] (the file has {list(known)})",
        )  # fmt: skip
    for c in names:
        if c not in known:
            raise option_error(
                "IMUOptions", channels_name, channels, f"the recording {path!r} has no channel {c!r}",
                f"{did_you_mean(c, known)}its channels are {list(known)}",
            )  # fmt: skip
    return path, names


def _base(options: Any) -> tuple[list, list]:
    """The 9-component ``replay`` and ``replay_channels`` before the per-field ones override theirs."""
    replay, channels = options.replay, options.replay_channels
    if replay is None:
        return [None] * 9, [None] * 9
    if isinstance(replay, (list, tuple)):
        paths = list(replay)
    else:
        replay = os.fspath(replay)
        paths = [replay] * 9
        if channels is None:
            channels = read_header(replay, f"IMUOptions.replay={replay!r} is invalid: {replay!r}").channels
    names = list(channels) if isinstance(channels, (list, tuple)) else [channels] * len(paths)
    if len(paths) != 9 or len(names) != 9:
        raise option_error(
            "IMUOptions", "replay", options.replay,
            f"with the per-field replays it needs one file and one channel per IMU component (9), and it "
            f"gives {len(paths)} files and {len(names)} channels",
            "give the recordings per field (acc_replay, gyro_replay, mag_replay) only",
        )  # fmt: skip
    return paths, names


def merge_replay(options: Any, written: dict[str, Any]) -> None:
    """Merge the per-field replays into ``replay`` / ``replay_channels`` (in place, on the frozen options)
    and refuse a replayed field that also gives an option the recording replaces (``written``: the
    9-component options as the user gave them, for the message)."""
    per_field = {f: _field_replay(options, f) for f in FIELDS}
    if all(v is None for v in per_field.values()):
        return
    paths, names = _base(options)
    for i, f in enumerate(FIELDS):
        if per_field[f] is not None:
            path, channels = per_field[f]
            paths[3 * i : 3 * i + 3] = [path] * 3
            names[3 * i : 3 * i + 3] = list(channels)
    object.__setattr__(options, "replay", tuple(paths))
    object.__setattr__(options, "replay_channels", tuple(names))
    for i, f in enumerate(FIELDS):
        if per_field[f] is None:
            continue
        for kind in EXCLUSIVE:
            merged = getattr(options, kind)
            values = (
                merged[3 * i : 3 * i + 3] if isinstance(merged, tuple) and len(merged) == 9 else (merged,)
            )
            if any(_nonzero(v) for v in values):
                own = getattr(options, f"{f}_{kind}", None)
                spelled = (f"{f}_{kind}", own) if own is not None else (kind, written[kind])
                raise option_error(
                    "IMUOptions", f"{f}_replay", per_field[f][0],
                    f"{spelled[0]}={spelled[1]!r} is given too on the {f} field; a replayed field takes its "
                    "white noise, drift and filtering from the recording",
                    f"set {spelled[0]} to 0.0 on {f} (the recording holds it), or leave {f}_replay out",
                )  # fmt: skip


def _nonzero(v: Any) -> bool:
    if hasattr(v, "bounds"):
        return tuple(v.bounds) != (0.0, 0.0)
    try:
        return float(v) != 0.0
    except (TypeError, ValueError):
        return False  # not a number: the base class reports it
