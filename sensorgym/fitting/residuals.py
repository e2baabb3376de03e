"""``sensorgym fit ... --residuals FILE``: a log's own errors at rest, for a sensor to replay.

The file (NPZ, loadable with ``allow_pickle=False``; its layout is :mod:`sensorgym.core.replay`'s) holds
``T_s`` (the log's sample interval, s), ``channels`` (the names, in ``--channels`` order) and per channel
one float64 array named as the channel: the received samples of the static window the fit used, minus
that window's mean, in order (lost samples are absent, not zero). The window is the one the report gives
(a warm-up at its start left out, or subtracted where too little of the window follows it, as the fit
does). A sensor's option ``replay`` (``acc_replay``, ... on an IMU) then takes its white noise, drift and
filtering from it.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> import sensorgym as sg
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> t = np.arange(5000) * 0.01
    >>> np.savez(folder / "log.npz", t=t, gx=np.random.default_rng(1).normal(0.2, 0.05, 5000))
    >>> _ = sg.fit(folder / "log.npz", ["gx"], residuals=folder / "rest.npz", simulate_config=False)
    >>> z = np.load(folder / "rest.npz", allow_pickle=False)
    >>> sorted(z.files), round(float(z["T_s"]), 9), z["channels"].tolist(), bool(abs(z["gx"].mean()) < 1e-12)
    (['T_s', 'channels', 'gx'], 0.01, ['gx'], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.recording import RESIDUALS_KEYS
from .errors import FitError

__all__ = ["check_residuals", "residuals_of"]

_SAME_RATE = 0.01  # channels of one file share its T_s within this


def check_residuals(path: str | Path, channels: Sequence[str]) -> Path:
    """``--residuals FILE``, refused before the work when it cannot be written or read back."""
    path = Path(path)
    if path.suffix.lower() != ".npz":
        raise FitError(f"--residuals {str(path)!r} is not an .npz file name", "end the file name with .npz")
    if path.is_dir():
        raise FitError(
            f"--residuals {str(path)!r} is a folder", "give a file name, e.g. --residuals rest.npz"
        )
    if not path.parent.is_dir():
        raise FitError(
            f"--residuals {str(path)!r}: its folder {str(path.parent)!r} does not exist", "create it first"
        )
    for name in channels:
        if name in RESIDUALS_KEYS:
            raise FitError(
                f"--residuals: a channel named {name!r} would overwrite the file's own {name!r} array",
                "rename the log's column",
            )
    return path


def residuals_of(fits: Sequence[Any]) -> tuple[float, dict[str, np.ndarray]]:
    """``(T_s, {channel: samples minus mean})`` of the fitted channels (:class:`ChannelFit`), refused when
    their sample intervals differ (one file has one ``T_s``)."""
    periods = {f.channel.name: f.timing.sample_interval for f in fits}
    low, high = min(periods.values()), max(periods.values())
    if high > (1.0 + _SAME_RATE) * low:
        shown = ", ".join(f"{n} {p:.4g} s" for n, p in periods.items())
        raise FitError(
            f"--residuals: the channels have different sample intervals ({shown}); a recording has one T_s",
            "write the residuals of channels of one rate per run (one fit per rate)",
        )
    first = fits[0].timing.sample_interval
    out = {}
    for f in fits:
        values = np.asarray(f.samples[1], dtype=np.float64)
        out[f.channel.name] = values - values.mean()
    return float(first), out
