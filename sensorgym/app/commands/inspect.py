"""``sensorgym inspect``: record an env's sensors under random actions (or a trained policy) and print
each imperfection as configured beside its estimate from the traces, with a figure (the work is
:func:`sensorgym.app.inspection.run_inspect`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import DEFAULT_OUT, check_env, load, require
from .options import Argument, positive, shared

NAME = "inspect"
HELP = "plot GT vs measured traces; each imperfection configured vs estimated"
DESCRIPTION = (
    "Run one env under random actions (or a trained policy), record every sensor's ground truth and "
    "measured reading, estimate delay, noise, bias, drift and quantization from the traces, and print them "
    "beside the configured values (with why an estimate can differ)."
)
EPILOG = (
    "examples:\n  sensorgym inspect\n  sensorgym inspect --config examples/configs/inspect.toml "
    "--steps 400 --out fig.png"
)

ARGUMENTS: tuple[Argument, ...] = (
    shared("config", help="TOML/YAML/JSON config (default: the embedded inspect.toml)"),
    shared(
        "steps",
        type=positive("steps", 200),
        default=200,
        help="control steps to record (default 200); short traces give rough estimates",
    ),
    shared("seed", default=0, help="seed of the env, actions and sensors (default 0)"),
    shared(
        "out",
        help="PNG path (default: sensorgym_outputs/inspect.png); with a sensor that has update_period or "
        "dropout a second figure is written beside it, named after it: inspect_sampler.png for the default, "
        "fig_sampler.png for --out fig.png (samples taken, samples lost, the reading's age)",
    ),
    (
        ("--model",),
        dict(
            metavar="RUN_DIR",
            help="a run directory from `sensorgym train` to act instead of random actions (with the run's "
            "own config.json unless --config is given)",
        ),
    ),
)


def run(args: argparse.Namespace) -> int:
    """Record, estimate, compare and plot; print the table and where the figures are (exit code 0)."""
    require("inspect", ["matplotlib", "scipy", *(["stable_baselines3"] if args.model else [])])
    from ..inspection import format_summary, run_inspect
    from ..outdir import prepare_file

    cfg, model = _config_and_policy(args)
    out = Path(args.out or DEFAULT_OUT / "inspect.png")
    prepare_file(out)  # a folder there, or a read-only place: one line, before anything is recorded
    result = run_inspect(cfg, steps=args.steps, seed=args.seed, out=out, model=model)
    dt = float(result.times[1] - result.times[0]) if len(result.times) > 1 else 0.0
    print(
        f"{cfg.env.id}, {args.steps} steps of {dt:g} s, "
        f"{'policy ' + args.model if args.model else 'random actions'}; each imperfection as configured "
        "and as estimated from the recorded traces:\n"
    )
    print(format_summary(result.summary, dt, result.z, result.checks))
    print(f"\nfigure: {result.figure}")
    if result.attitude_figure is not None:
        print(f"attitude figure: {result.attitude_figure} (the estimate's inclination and heading errors)")
    if result.sampler_figure is not None:
        print(
            f"sampler figure: {result.sampler_figure} (sensors with update_period/dropout: samples taken, "
            "samples lost, and the reading's age)"
        )
    return 0


def _config_and_policy(args: argparse.Namespace) -> tuple[Any, Any]:
    """The config to record (checked against its env) and, with ``--model``, the trained policy that acts
    (else None)."""
    if not args.model:
        cfg, source = load(args.config, "inspect")
        check_env(cfg, source)
        return cfg, None
    from ..saved_policy import SavedPolicy, check_run_dir

    run_config = check_run_dir(Path(args.model), "--model")
    if args.config is None:  # the policy's own config: the sensors, shapes and latency it was trained on
        from ..config import load_config

        cfg, source = load_config(run_config), str(run_config)
    else:
        cfg, source = load(args.config, "inspect")
    check_env(cfg, source)
    return cfg, SavedPolicy(args.model, source)  # normalized as in training, checked against the config
