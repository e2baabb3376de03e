"""``inspect``'s view of an ``AttitudeSensor``: the estimate against the truth over time, as the attitude
errors the BROAD benchmark reports: the inclination error (the angle between the estimated and the true
gravity direction: what a policy reading the projected gravity gets wrong) and the heading error, with
their RMSE (:func:`attitude_traces`, :func:`attitude_rows`), and a figure of both
(:func:`plot_attitude`, written to :func:`attitude_path`).

The heading of the estimator's earth frame is its own (6-axis: the first sample's, which then drifts with
the gyroscope; 9-axis: the horizontal magnetic field's), not the simulator's world frame: the heading
error is measured against the offset the estimate had at the start of each episode, so it shows the
heading's drift (with a magnetometer: its wander about the field's direction).

Example:
    >>> import numpy as np
    >>> t = np.linspace(0, 1, 5)
    >>> true_pg = np.tile([0.0, 0.0, -1.0], (5, 1))
    >>> est_pg = np.stack([np.sin(np.radians(2 * t)), 0 * t, -np.cos(np.radians(2 * t))], -1)
    >>> out = attitude_traces(("projected_gravity",), true_pg, est_pg, np.r_[True, [False] * 4])
    >>> np.round(out["inclination"], 3).tolist(), out["heading"] is None
    ([0.0, 0.5, 1.0, 1.5, 2.0], True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .inspect_plot import figure_beside, save_figure

__all__ = ["attitude_path", "attitude_rows", "attitude_traces", "is_attitude", "plot_attitude"]

_WIDTHS = {"projected_gravity": 3, "quaternion": 4, "roll_pitch": 2, "bias": 3, "ang_vel": 3}


def is_attitude(options: Any) -> bool:
    """Whether ``options`` configure an IMU read through an attitude estimator."""
    return hasattr(options, "estimator") and hasattr(options, "outputs")


def _columns(outputs: tuple[str, ...], values: np.ndarray) -> dict[str, np.ndarray]:
    """The sensor's columns ``(T, width)`` split by output."""
    out, at = {}, 0
    for name in outputs:
        out[name] = values[:, at : at + _WIDTHS[name]]
        at += _WIDTHS[name]
    return out


def _gravity(cols: dict[str, np.ndarray]) -> np.ndarray | None:
    """Gravity's direction in the IMU frame ``(T, 3)`` from whichever output holds it."""
    if "projected_gravity" in cols:
        g = cols["projected_gravity"].astype(np.float64)
    elif "quaternion" in cols:
        w, x, y, z = cols["quaternion"].astype(np.float64).T
        g = -np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z], -1)
    elif "roll_pitch" in cols:
        r, p = cols["roll_pitch"].astype(np.float64).T
        g = np.stack([np.sin(p), -np.sin(r) * np.cos(p), -np.cos(r) * np.cos(p)], -1)
    else:
        return None
    return g / np.maximum(np.linalg.norm(g, axis=-1, keepdims=True), 1e-12)


def _yaw_of_error(q_est: np.ndarray, q_true: np.ndarray) -> np.ndarray:
    """The heading (rad) of ``e = q_est ⊗ q_true*`` (the error in the earth frame), signed."""
    w1, x1, y1, z1 = q_est.T
    w2, x2, y2, z2 = q_true.T * np.array([1.0, -1.0, -1.0, -1.0])[:, None]
    ew = w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2
    ez = w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2
    return 2 * np.arctan2(ez, ew)


def attitude_traces(
    outputs: tuple[str, ...], gt: np.ndarray, measured: np.ndarray, resets: np.ndarray
) -> dict[str, Any]:
    """Per step, the inclination error (degrees) of the estimate and, with the ``quaternion`` output, the
    heading error (degrees, against each episode's initial offset; else None). ``gt``/``measured`` are the
    sensor's columns ``(T, width)``; ``resets`` ``(T,)`` marks the episodes' first steps."""
    true, est = _columns(outputs, gt), _columns(outputs, measured)
    g_true, g_est = _gravity(true), _gravity(est)
    inclination = None
    if g_true is not None:
        cos = np.clip(np.sum(g_true * g_est, -1), -1.0, 1.0)
        inclination = np.degrees(np.arccos(cos))
    heading = None
    if "quaternion" in outputs:
        yaw = _yaw_of_error(est["quaternion"].astype(np.float64), true["quaternion"].astype(np.float64))
        start = np.maximum.accumulate(np.where(np.asarray(resets, bool), np.arange(len(yaw)), 0))
        heading = np.degrees(np.angle(np.exp(1j * (yaw - yaw[start]))))  # wrapped to [-180, 180]
    return {"inclination": inclination, "heading": heading}


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def attitude_rows(name: str, options: Any, traces: dict[str, Any]) -> dict[str, Any]:
    """The summary entry ``inspect`` prints for an AttitudeSensor: the inclination and heading errors'
    RMSE and maximum (there is nothing configured to compare them with: the columns name the estimator)."""
    gains = ", ".join(f"{k} {v}" for k, v in options.gains().items())
    conf = f"{options.estimator}, {'9' if options.estimator_magnetometer else '6'}-axis"
    rows: dict[str, tuple[str, str, str]] = {}
    notes = [f"estimator {options.estimator}, gains {gains}, initialized from {options.estimator_init}"]
    inc, head = traces["inclination"], traces["heading"]
    if inc is not None:
        rows["incl. RMSE"] = (conf, f"{_rms(inc):.3f} deg", "")
        rows["incl. max"] = (conf, f"{np.max(inc):.3f} deg", "")
    if head is not None:
        rows["heading RMSE"] = (conf, f"{_rms(head):.3f} deg", "drift since each episode start")
        rows["heading max"] = (conf, f"{np.max(np.abs(head)):.3f} deg", "")
        if not options.estimator_magnetometer:
            notes.append(
                "without a magnetometer the heading is not observable: it drifts with the gyroscope's "
                "bias and noise (estimator_magnetometer=true corrects it from the field)"
            )
    else:
        notes.append("add 'quaternion' to outputs to see the heading error")
    notes.append(
        "inclination error: the angle between the estimated and the true gravity direction in the IMU "
        "frame (incl., BROAD's metric); figure: the errors over time"
    )
    return {"channel": f"{name} (estimate vs truth)", "rows": rows, "notes": notes}


def attitude_path(out: str | Path) -> Path:
    """Where ``sensorgym inspect`` writes the attitude figure: beside ``out``, ``<stem>_attitude.png``.

    Example:
        >>> attitude_path("sensorgym_outputs/inspect.png").as_posix()
        'sensorgym_outputs/inspect_attitude.png'
    """
    return figure_beside(out, "attitude")


def plot_attitude(times: np.ndarray, traces: dict[str, dict[str, Any]], path: str | Path) -> Path:
    """One panel per error (inclination, heading) with a line per AttitudeSensor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    for name, tr in traces.items():
        for ax, key in zip(axes, ("inclination", "heading"), strict=True):
            if tr[key] is not None:
                ax.plot(times, tr[key], lw=1.0, label=f"{name}: RMSE {_rms(tr[key]):.2f} deg")
    if not any(tr["heading"] is not None for tr in traces.values()):
        axes[1].text(0.5, 0.5, "add 'quaternion' to the sensor's outputs to see the heading error",
                     transform=axes[1].transAxes, ha="center", va="center", fontsize=9)  # fmt: skip
    axes[0].set_ylabel("inclination error [deg]")
    axes[1].set_ylabel("heading error [deg]\n(vs episode start)")
    axes[1].set_xlabel("time [s]")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper right")
    axes[0].set_title("attitude estimate vs truth", fontsize=9, loc="left")
    fig.tight_layout()
    return save_figure(fig, path)
