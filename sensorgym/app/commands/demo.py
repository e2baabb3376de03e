"""``sensorgym demo``: a few lines of ground truth vs what a delayed, noisy, quantized sensor reports
(the work is :mod:`sensorgym.app.demo`)."""

from __future__ import annotations

import argparse

from .options import Argument, positive, shared

NAME = "demo"
HELP = "print GT vs measured values of a delayed, noisy, quantized sensor"
DESCRIPTION = (
    "Print ground truth vs what a delayed, jittery, noisy, biased, quantized sensor reports for a sine, "
    "with the signed difference per step."
)
EPILOG = None

ARGUMENTS: tuple[Argument, ...] = (
    shared(
        "steps",
        type=positive("steps", 40),
        default=40,
        help="rows to show: the reset (step 0) and the control steps after it (default 40)",
    ),
    shared("seed", default=0, help="seed of the sensor's noise and jitter (default 0)"),
)


def run(args: argparse.Namespace) -> int:
    """Print the demo's table (exit code 0)."""
    from ..demo import run_demo

    print(run_demo(steps=args.steps, seed=args.seed))
    return 0
