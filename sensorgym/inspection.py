"""``sensorgym inspect``: run an env with a sensor configuration, record ground truth and measured
traces, estimate each channel's delay, noise, bias, drift and quantization *from the traces*, and plot.

Example:
    >>> from sensorgym.config import parse_config
    >>> from sensorgym.inspection import estimate_channel, record
    >>> import numpy as np
    >>> gt = np.sin(np.arange(300) * 0.1)
    >>> measured = np.round((np.r_[np.zeros(3), gt[:-3]] + 0.2) / 0.05) * 0.05
    >>> est = estimate_channel(gt, measured, max_lag=10)
    >>> est["delay_steps"], round(est["bias"], 2), est["quantization"]
    (3, 0.2, 0.05)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config

__all__ = ["InspectResult", "estimate_channel", "format_summary", "plot_traces", "record", "run_inspect"]


@dataclass
class InspectResult:
    times: np.ndarray  # (T,) seconds
    channels: list[str]  # "sensor[i]" names
    gt: np.ndarray  # (T, C)
    measured: np.ndarray  # (T, C)
    summary: list[dict[str, Any]]
    figure: Path | None = None


def record(
    cfg: Config, steps: int, seed: int = 0, model: Any = None
) -> tuple[np.ndarray, list, np.ndarray, np.ndarray]:
    """Step one env for ``steps`` steps (random actions, or ``model.predict``) and record every sensor's
    GT and measured reading (current read, no history). Returns (times, channel names, gt, measured)."""
    from .wrappers import make_sensor_vec

    envs = make_sensor_vec(
        cfg.env.id,
        1,
        cfg.sensors,
        seed=seed,
        env_kwargs=cfg.env.kwargs,
        policy=cfg.policy,
        critic=cfg.critic.sensors,
    )
    names = []
    for name, s in envs.sensors.items():
        width = s.return_slice.stop - s.return_slice.start
        names += [name] if width == 1 else [f"{name}[{i}]" for i in range(width)]

    def snapshot() -> tuple[np.ndarray, np.ndarray]:
        st = [
            (s._storage.gt_cache[0, s.return_slice], s._storage.m_cache[0, s.return_slice])
            for s in envs.sensors.values()
        ]
        return (
            np.concatenate([g.float().numpy() for g, _ in st]),
            np.concatenate([m.float().numpy() for _, m in st]),
        )

    obs, _ = envs.reset(seed=seed)
    envs.action_space.seed(seed)
    gts, ms = [], []
    g, m = snapshot()
    gts.append(g)
    ms.append(m)
    for _ in range(steps):
        if model is not None:
            action, _ = model.predict(obs, deterministic=True)
        else:
            action = envs.action_space.sample()
        obs, *_ = envs.step(action)
        g, m = snapshot()
        gts.append(g)
        ms.append(m)
    envs.close()
    times = np.arange(steps + 1) * envs.dt
    return times, names, np.stack(gts), np.stack(ms)


def _quantization(values: np.ndarray) -> float:
    """The grid step of a quantized signal (0 when it is not on a grid)."""
    u = np.unique(np.round(values, 9))
    if len(u) < 3:
        return 0.0
    d = np.diff(u)
    step = d.min()
    if step <= 0:
        return 0.0
    ratios = d / step
    on_grid = np.abs(ratios - np.round(ratios)) < 1e-3
    if on_grid.mean() < 0.99 or len(u) > 0.9 * len(values):
        return 0.0
    return float(np.round(step, 9))


def estimate_channel(gt: np.ndarray, measured: np.ndarray, max_lag: int = 20) -> dict[str, float]:
    """Delay (steps), bias, noise std, drift at the end and quantization step of one channel,
    estimated from its ground-truth and measured traces only."""
    gt, measured = np.asarray(gt, float), np.asarray(measured, float)
    n = len(gt)
    max_lag = max(0, min(max_lag, n // 3))
    if np.ptp(gt) == 0:  # a constant signal carries no timing: report no delay
        best = 0
    else:
        scores = [np.var(measured[k:] - gt[: n - k]) for k in range(max_lag + 1)]
        best = int(np.argmin(scores))
    resid = measured[best:] - gt[: n - best]
    window = max(3, len(resid) // 4)
    # medians and the MAD: robust to the few samples around an episode boundary, where the delayed
    # reading still shows the padding while the ground truth has jumped
    bias = float(np.median(resid[:window]))  # at the start: before a random walk wanders off
    drift = float(np.median(resid[-window:]) - bias)
    if len(resid) > 2:
        d = np.diff(resid)
        noise = float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))
    else:
        noise = 0.0
    return {
        "delay_steps": best,
        "bias": bias,
        "noise_std": noise,
        "drift_end": drift,
        "quantization": _quantization(measured),
    }


def format_summary(summary: list[dict[str, Any]], dt: float) -> str:
    lines = [
        f"{'channel':<16} {'delay [steps]':>13} {'delay [s]':>9} {'noise std':>10} {'bias':>9} "
        f"{'drift@end':>10} {'quant. step':>11}"
    ]
    for row in summary:
        q = f"{row['quantization']:.4g}" if row["quantization"] else "none"
        lines.append(
            f"{row['channel']:<16} {row['delay_steps']:>13d} {row['delay_steps'] * dt:>9.3f} "
            f"{row['noise_std']:>10.4f} {row['bias']:>9.4f} {row['drift_end']:>10.4f} {q:>11}"
        )
    return "\n".join(lines)


def plot_traces(result: InspectResult, path: str | Path, max_channels: int = 12) -> Path:
    """A PNG with one panel per channel: ground truth (line) and measured reading (steps)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(len(result.channels), max_channels)
    fig, axes = plt.subplots(n, 1, figsize=(9, 2.0 * n + 0.6), sharex=True, squeeze=False)
    for c, ax in enumerate(axes[:, 0]):
        s = result.summary[c]
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
        ax.set_ylabel(result.channels[c], fontsize=9)
        q = f"{s['quantization']:.3g}" if s["quantization"] else "none"
        ax.set_title(
            f"delay {s['delay_steps']} steps, noise {s['noise_std']:.3g}, bias {s['bias']:.3g}, "
            f"drift {s['drift_end']:.3g}, quantization {q}",
            fontsize=8,
            loc="left",
        )
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run_inspect(
    cfg: Config,
    steps: int = 200,
    seed: int = 0,
    out: str | Path | None = None,
    model: Any = None,
    max_lag: int = 20,
) -> InspectResult:
    times, names, gt, measured = record(cfg, steps, seed=seed, model=model)
    summary = []
    for c, name in enumerate(names):
        row = estimate_channel(gt[:, c], measured[:, c], max_lag=max_lag)
        summary.append({"channel": name, **row})
    result = InspectResult(times, names, gt, measured, summary)
    if out is not None:
        result.figure = plot_traces(result, out)
    return result
