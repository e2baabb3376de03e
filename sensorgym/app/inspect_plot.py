"""``inspect``'s figures: the traces of every channel, configured -> estimated in each panel's title
(:func:`plot_traces`), and the samples taken, lost and the readings' ages of the sensors with their own
rate or dropout (:func:`plot_sampling`, written to :func:`sampling_path`). Each takes an
:class:`~sensorgym.app.inspection.InspectResult`.

Example:
    >>> sampling_path("fig.png").as_posix()
    'fig_sampler.png'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["plot_sampling", "plot_traces", "sampling_path"]

#: characters of a panel title per line at its font size (7 pt) on the 9-inch-wide figure
_TITLE_WIDTH = 150


def _panel_title(s: dict[str, Any]) -> str:
    """A channel panel's title: each quantity configured -> estimated (wrapped by :func:`plot_traces`)."""
    if "rows" in s:
        parts = [f"{k} {conf} → {got.split(' ± ')[0]}" for k, (conf, got, _) in s["rows"].items()]
        return "configured → estimated: " + "; ".join(parts)
    q = f"{s['quantization']:.3g}" if s["quantization"] else "none"
    return (
        f"delay {s['delay_steps']} steps, noise {s['noise_std']:.3g}, bias {s['bias']:.3g}, "
        f"drift {s['drift_end']:.3g}, quantization {q}"
    )


def plot_traces(result: Any, path: str | Path, max_channels: int = 12) -> Path:
    """A PNG with one panel per channel: ground truth (line) and measured reading (steps), each panel
    titled with its quantities configured -> estimated (wrapped onto as many lines as they need, so that
    none is cut at the figure's edge), and every episode reset marked by a dotted line (the traces jump
    there: a new episode starts from another state)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(len(result.channels), max_channels)
    titles = [textwrap.wrap(_panel_title(result.summary[c]), _TITLE_WIDTH) for c in range(n)]
    lines = max((len(t) for t in titles), default=1)
    fig, axes = plt.subplots(n, 1, figsize=(9, (2.0 + 0.13 * lines) * n + 0.7), sharex=True, squeeze=False)
    resets = (
        result.times[1:][np.asarray(result.resets, bool)[1:]] if result.resets is not None else np.zeros(0)
    )
    for c, ax in enumerate(axes[:, 0]):
        ax.plot(result.times, result.gt[:, c], color="black", lw=1.4, label="ground truth")
        ax.step(
            result.times,
            result.measured[:, c],
            where="post",
            color="tab:red",
            lw=1.0,
            alpha=0.85,
            label="measured",
        )
        for k, r in enumerate(resets):
            ax.axvline(r, color="gray", ls=":", lw=0.9, label="episode reset" if k == 0 else None)
        ax.set_ylabel(result.channels[c], fontsize=9)
        ax.set_title("\n".join(titles[c]), fontsize=7, loc="left")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    return save_figure(fig, path)


def _seconds(x: Any) -> str:
    return f"{x * 1000:.3g} ms" if x < 1 else f"{x:.3g} s"


def plot_sampling(result: Any, path: str | Path) -> dict[str, dict[str, int]]:
    """A PNG for the sensors with their own rate or dropout (see docs/pipeline.md): per sensor, its first
    channel's ground truth (line), the measured reading (steps: held between samples), a dot at each
    sample taken and an x at each due sample that was lost (both at the ground truth of their step), and
    below it the age of the reading (s since the sample behind it was taken). Episode resets are dotted lines.

    Returns, per sensor, the counts of the markers drawn (``fresh``, ``dropped``; read back from the
    figure's artists) and of the due steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result.sampling)
    fig, axes = plt.subplots(
        2 * len(names),
        1,
        figsize=(9, 3.1 * len(names) + 0.6),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": [2.2, 1.0] * len(names)},
    )
    counts: dict[str, dict[str, int]] = {}
    t = result.times
    for i, name in enumerate(names):
        d = result.sampling[name]
        ax, ax_age = axes[2 * i, 0], axes[2 * i + 1, 0]
        ax.plot(t, d["gt"], color="black", lw=1.2, label="ground truth")
        ax.step(t, d["measured"], where="post", color="tab:red", lw=1.0, alpha=0.85, label="measured (held)")
        fresh = ax.plot(
            t[d["fresh"]], d["gt"][d["fresh"]], "o", ms=3.2, color="tab:blue", label="sample taken", zorder=3
        )[0]
        dropped = ax.plot(
            t[d["dropped"]],
            d["gt"][d["dropped"]],
            "x",
            ms=6,
            mew=1.6,
            color="tab:orange",
            label="due, lost (dropout)",
            zorder=4,
        )[0]
        resets = t[1:][d["step"][1:] == 0]
        for a in (ax, ax_age):
            for r in resets:
                a.axvline(r, color="gray", ls=":", lw=0.9)
        ax_age.step(t, d["age"], where="post", color="tab:purple", lw=1.0)
        ax_age.set_ylabel("age [s]", fontsize=8)
        ax.set_ylabel(d["channel"], fontsize=9)
        counts[name] = {
            "fresh": len(fresh.get_xdata()),
            "dropped": len(dropped.get_xdata()),
            "due": int(d["due"].sum()),
        }
        period, phase, p = d["period"][-1], d["phase"][-1], d["dropout"][-1]
        rate = f"{_seconds(period)} ({1 / period:.3g} Hz)" if period > 0 else "every step"
        ax.set_title(
            f"{name}: update period {rate}, phase {_seconds(phase)}, dropout {p:.3g}"
            + (f", delay {d['delay']}" if d["delay"] else "")
            + f" (this episode) — {counts[name]['fresh']} samples taken, {counts[name]['dropped']} lost "
            f"of {counts[name]['due']} due in {len(t)} steps",
            fontsize=7.5,
            loc="left",
        )
        ax.grid(alpha=0.3)
        ax_age.grid(alpha=0.3)
    if names:
        axes[0, 0].legend(loc="upper right", fontsize=7, ncol=4)
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    save_figure(fig, path)
    return counts


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` (its folder made if missing) and close it; returns the path."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figure_beside(out: str | Path, tag: str) -> Path:
    """Where ``sensorgym inspect`` writes a second figure: beside ``out``, ``<stem>_<tag>.png``.

    Example:
        >>> figure_beside("sensorgym_outputs/inspect.png", "attitude").as_posix()
        'sensorgym_outputs/inspect_attitude.png'
    """
    out = Path(out)
    return out.with_name(f"{out.stem}_{tag}{out.suffix or '.png'}")


def sampling_path(out: str | Path) -> Path:
    """Where ``sensorgym inspect`` writes the sampler figure: beside ``out``, ``<stem>_sampler.png``.

    Example:
        >>> sampling_path("sensorgym_outputs/inspect.png").as_posix()
        'sensorgym_outputs/inspect_sampler.png'
    """
    return figure_beside(out, "sampler")
