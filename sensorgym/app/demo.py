"""A short demo: ground truth vs what a delayed, jittery, noisy, quantized sensor reports.

Run it with ``sensorgym demo`` (or ``python -m sensorgym demo``).

Example:
    >>> from sensorgym.app.demo import demo_traces
    >>> gt, measured = demo_traces(steps=5, seed=0)
    >>> gt.shape, measured.shape
    (torch.Size([6]), torch.Size([6]))
"""

from __future__ import annotations

import math

import torch

from ..core.manager import SensorManager
from ..sensors.state import StateSensorOptions

DT = 0.02
OPTIONS = StateSensorOptions(key="angle", delay=0.06, jitter=0.02, noise=0.02, bias=0.01, resolution=0.05)


def _angle(t: int) -> dict[str, torch.Tensor]:
    return {"angle": torch.tensor([[math.sin(2 * math.pi * 0.8 * t * DT)]])}


def demo_traces(steps: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """GT and measured traces of one env over ``steps`` control steps (plus the reset)."""
    mgr = SensorManager(num_envs=1, dt=DT, seed=seed)
    sensor = mgr.add_sensor(OPTIONS, name="angle")
    mgr.reset(_angle(0))
    gt, measured = [sensor.read_ground_truth().item()], [sensor.read().item()]
    for t in range(1, steps + 1):
        mgr.step(_angle(t))
        gt.append(sensor.read_ground_truth().item())
        measured.append(sensor.read().item())
    return torch.tensor(gt), torch.tensor(measured)


def signed_bar(diff: float, scale: float = 40.0, width: int = 16) -> str:
    """A text bar for a signed difference around a ``|`` at a fixed column: ``round(|diff| * scale)``
    (at most ``width``) ``-`` marks to its left when negative, ``+`` marks to its right when positive.

    Example:
        >>> signed_bar(-0.1, width=6), signed_bar(0.05, width=6), signed_bar(0.0, width=6)
        ('  ----|', '      |++', '      |')
    """
    n = min(width, round(abs(diff) * scale))
    if diff < 0:
        return " " * (width - n) + "-" * n + "|"
    return " " * width + "|" + "+" * n


def run_demo(steps: int = 40, seed: int = 0) -> str:
    """The text ``sensorgym demo`` prints: per step GT, measured and their signed difference, ``steps``
    rows (the reset, step 0, and the ``steps - 1`` control steps after it: ``--steps 40`` had printed 41).

    Example:
        >>> text = run_demo(steps=3)
        >>> [line.split()[0] for line in text.splitlines()[4:7]]
        ['0', '1', '2']
        >>> text.splitlines()[7]
        ''
    """
    gt, measured = demo_traces(steps - 1, seed)
    lines = [
        "sensorgym demo: a 0.8 Hz sine seen through one sensor at dt=0.02 s",
        f"options: {OPTIONS}",
        "",
        f"{'step':>4} {'time [s]':>8} {'ground truth':>13} {'measured':>9} {'measured - GT':>14}",
    ]
    for t in range(len(gt)):
        diff = (measured[t] - gt[t]).item()
        lines.append(
            f"{t:>4} {t * DT:>8.2f} {gt[t].item():>13.4f} {measured[t].item():>9.4f} {diff:>+14.4f}  "
            f"{signed_bar(diff)}"
        )
    # the delay shows as the lag that best aligns the traces
    lags = range(max(1, min(8, len(gt) // 2)))
    errs = [((measured[k:] - gt[: len(gt) - k]) ** 2).mean().item() for k in lags]
    lag = min(lags, key=errs.__getitem__)
    quant = measured / OPTIONS.resolution
    residual = measured[lag:] - gt[: len(gt) - lag]
    spread = f"{residual.std().item():.4f}" if residual.numel() > 1 else "n/a (one row)"
    lines += [
        "",
        f"best-aligning lag: {lag} steps ({lag * DT:.2f} s; delay 3 steps + jitter up to 1 step)",
        f"measured values on the {OPTIONS.resolution} grid: "
        f"{bool(torch.allclose(quant, quant.round(), atol=1e-4))}",
        f"residual after alignment: mean {residual.mean().item():+.4f} (bias {OPTIONS.bias}), std {spread}",
    ]
    return "\n".join(lines)
