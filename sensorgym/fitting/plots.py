"""``allan.png`` and ``timing.png`` of ``sensorgym fit`` (matplotlib, the ``plot`` extra).

``allan.png``: per channel, the log's Allan deviation with its 95% band, the fitted model's closed form,
and the deviation of the fitted config simulated through ``SensorManager``; the closed-loop ``tau`` range
is shaded. ``timing.png``: per sensor, the intervals between received samples (in ``T_s``) and the
lengths of the runs of lost samples, log against simulation.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import require

if TYPE_CHECKING:
    from .result import FitResult

__all__ = ["plot_allan", "plot_timing"]


def _grid(n: int) -> tuple[int, int]:
    cols = min(3, n)
    return math.ceil(n / cols), cols


def plot_allan(result: FitResult, path: Path) -> Path:
    """Write the Allan-deviation figure to ``path`` and return it."""
    require("matplotlib", "plot", "drawing allan.png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = _grid(len(result.channels))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows), squeeze=False)
    for ax, f in zip(axes.flat, result.channels, strict=False):
        a = f.allan
        ax.fill_between(a.taus, a.lo, a.hi, color="tab:blue", alpha=0.2, lw=0, label="log, 95% band")
        ax.loglog(a.taus, a.adev, "o", ms=3.5, color="tab:blue", label="log")
        dense = np.unique(np.geomspace(1, a.m.max(), 200).round().astype(np.int64))
        gaps = f.noise.gaps
        ax.loglog(
            dense * f.timing.sample_interval * (gaps.mean if gaps is not None else 1.0),
            f.noise.model_adev(dense),
            "-",
            color="black",
            lw=1.2,
            label="fitted model",
        )
        c = f.closed_loop
        if c is not None and len(c.taus):
            ax.loglog(c.taus, c.sim, "s", mfc="none", ms=6, color="tab:red", label="fitted config, simulated")
            ax.axvspan(c.taus[0], c.taus[-1], color="0.9", zorder=-1)
            ax.set_title(
                f"{f.channel.name}\nwithin the band at {int(c.inside.sum())} of {len(c.taus)} τ", fontsize=9
            )
        else:
            ax.set_title(f.channel.name, fontsize=9)
        ax.set_xlabel("τ (s)")
        ax.set_ylabel("Allan deviation")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(result.channels) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle(f"{result.log.name}: Allan deviation (grey: the closed-loop τ range)", fontsize=10)
    _margins(fig, top=0.85, bottom=0.5, left=0.7, right=0.15, wspace=0.3, hspace=0.55)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_timing(result: FitResult, path: Path) -> Path:
    """Write the timing figure to ``path`` and return it."""
    require("matplotlib", "plot", "drawing timing.png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(f.name.partition(".")[0] for f in result.channels))  # one sensor per table
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 3.2 * len(names)), squeeze=False)
    for row, name in zip(axes, names, strict=True):
        f = next(f for f in result.channels if f.name.partition(".")[0] == name)
        t = f.timing
        sim = result.sim.timing.get(name) if result.sim is not None else None
        bins = np.linspace(0, max(4.0, float(np.max(t.intervals)) + 0.5), 80)
        row[0].hist(t.intervals, bins=bins, density=True, color="tab:blue", alpha=0.6, label="log")
        if sim is not None and len(sim.intervals):
            row[0].hist(
                sim.intervals,
                bins=bins,
                density=True,
                histtype="step",
                color="tab:red",
                lw=1.5,
                label="simulated",
            )
        row[0].set_yscale("log")
        row[0].set_xlabel("interval between received samples (T_s)")
        row[0].set_ylabel("fraction of intervals (density)")
        row[0].set_title(f"{name}: T_s = {t.sample_interval:.5g} s", fontsize=9)
        row[0].legend(fontsize=7)
        top = max([1, *t.runs.tolist(), *((sim.runs.tolist()) if sim is not None else [])])
        edges = np.arange(0.5, top + 1.5)
        if len(t.runs):
            row[1].hist(
                t.runs,
                bins=edges,
                density=True,
                color="tab:blue",
                alpha=0.6,
                label=f"log: p = {t.dropout:.3g}",
            )
        if sim is not None and len(sim.runs):
            row[1].hist(
                sim.runs,
                bins=edges,
                density=True,
                histtype="step",
                color="tab:red",
                lw=1.5,
                label=f"simulated: p = {sim.dropout:.3g}",
            )
        if not len(t.runs) and (sim is None or not len(sim.runs)):
            row[1].text(0.5, 0.5, "no lost samples", ha="center", va="center", transform=row[1].transAxes)
        row[1].set_xlabel("run of lost samples (samples)")
        row[1].set_ylabel("fraction of runs")
        row[1].set_title("loss runs", fontsize=9)
        if row[1].get_legend_handles_labels()[0]:  # a lossless log has nothing to label
            row[1].legend(fontsize=7)
    _margins(fig, top=0.35, bottom=0.5, left=0.75, right=0.15, wspace=0.25, hspace=0.55)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _margins(fig, top: float, bottom: float, left: float, right: float, wspace: float, hspace: float) -> None:
    """Fixed margins in inches (``tight_layout`` measures every tick label first: half of a figure's
    time on a 1-hour log)."""
    width, height = fig.get_size_inches()
    fig.subplots_adjust(
        left=left / width,
        right=1 - right / width,
        bottom=bottom / height,
        top=1 - top / height,
        wspace=wspace,
        hspace=hspace,
    )
