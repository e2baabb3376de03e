"""What :func:`sensorgym.fit` returns: per channel its estimates and data, the closed loop, the fitted
options (the report and the figures read these, below the fit that makes them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .allan import Allan
from .channels import Channel
from .delay import DelayEstimate
from .diagnose import Component, Unexplained
from .estimate import NoiseFit
from .simulate import SimResult
from .timing import Timing
from .warmup import Warmup

__all__ = ["ChannelFit", "ClosedLoop", "FitResult"]


@dataclass
class ClosedLoop:
    """The log's Allan deviation against the fitted config's, at the octave ``tau`` of the check."""

    taus: np.ndarray
    log: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    sim: np.ndarray

    @property
    def inside(self) -> np.ndarray:
        return (self.sim >= self.lo) & (self.sim <= self.hi)

    @property
    def relative(self) -> np.ndarray:
        return self.sim / self.log - 1.0

    def line(self, channel: str) -> str:
        if not len(self.taus):
            too_short = "no octave tau in [2 T_s, duration/10]: the static window is too short"
            return f"closed loop {channel}: {too_short}"
        worst = int(np.argmax(np.abs(self.relative)))
        return (
            f"closed loop {channel}: within the log's 95% band at {int(self.inside.sum())} of "
            f"{len(self.taus)} τ; "
            f"largest relative difference {100 * self.relative[worst]:+.1f}% at τ = {self.taus[worst]:.3g} s"
        )


@dataclass
class ChannelFit:
    """Everything fitted for one channel."""

    channel: Channel
    name: str
    component: int
    timing: Timing
    window: tuple[float, float]  # seconds from the channel's first time stamp
    window_given: bool
    level: float
    allan: Allan
    resolution: tuple[float | None, float | None]
    noise: NoiseFit
    delay: DelayEstimate | None = None
    closed_loop: ClosedLoop | None = None
    #: what the fit found about the window and what its model leaves unexplained (printed as warnings)
    findings: list[str] = field(default_factory=list)
    #: logging gaps inside the window asked for or around the one found (``(before, after)``, s)
    gaps: list[tuple[float, float]] = field(default_factory=list)
    #: a warm-up trend at the window's start, left out of the window or subtracted before the fit
    warmup: Warmup | None = None
    #: the samples fitted (times, values less a subtracted warm-up)
    samples: tuple[np.ndarray, np.ndarray] | None = None
    #: a narrow-band component of the window's spectrum beyond the model's, and the tau the fitted
    #: config leaves outside the log's band with their causes (diagnose.py)
    spectral: Component | None = None
    unexplained: list[Unexplained] = field(default_factory=list)

    @property
    def duration(self) -> float:
        return self.window[1] - self.window[0]


@dataclass
class FitResult:
    """What :func:`fit` found and wrote.

    Attributes:
        log: the log's path.
        channels: per channel, its estimates and data (:class:`ChannelFit`).
        options: the fitted options per name, as written to ``fitted.toml``.
        sim: the simulation of those options (:class:`~sensorgym.fitting.simulate.SimResult`).
        lines: the closed-loop lines, one per channel.
        files: the files written (``"fitted.toml"``, ``"fit_report.md"``, ...), by name.
        into_changes: with ``into``, what changed in each sensor table of the config.
        into_removed: with ``into``, per table the keys removed (and why).
        into_kept: with ``into``, per table the error-model keys kept from the config, not fitted.
        warnings: what the fit doubts (a time column that may not be seconds, a window not at rest).
    """

    log: Path
    channels: list[ChannelFit]
    options: dict[str, dict[str, Any]]
    sim: SimResult | None
    lines: list[str]
    files: dict[str, Path] = field(default_factory=dict)
    into_changes: list[str] = field(default_factory=list)
    into_removed: dict[str, list[str]] = field(default_factory=dict)
    into_kept: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
