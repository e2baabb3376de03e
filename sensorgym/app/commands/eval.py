"""``sensorgym eval RUN_DIR``: score the model of a run directory, by default on the final score's
episodes (so it reproduces that score), or under another config's sensors (the work is
:func:`sensorgym.app.training.evaluate_saved`)."""

from __future__ import annotations

import argparse

from .common import check_env, load, require
from .options import Argument, positive, shared

NAME = "eval"
HELP = "score a trained run (a run directory), optionally under another sensor config"
DESCRIPTION = (
    "Score the model in a run directory written by `sensorgym train`. By default it uses the final score's "
    "evaluation seed and episode count, so it reproduces that score; with --config it scores the same "
    "episodes under that config's sensors (train clean, test noisy). Only imperfection levels may change, "
    "not which sensors the policy reads."
)
EPILOG = (
    "examples:\n  sensorgym eval sensorgym_outputs/train\n"
    "  sensorgym eval sensorgym_outputs/train --config examples/configs/eval_noisy.toml"
)

ARGUMENTS: tuple[Argument, ...] = (
    (
        ("run",),
        dict(
            metavar="RUN_DIR", help="the run directory `sensorgym train` wrote (e.g. sensorgym_outputs/train)"
        ),
    ),
    shared("config", help="score under this config's sensors (e.g. noisier) instead of the training ones"),
    (
        ("--episodes",),
        dict(
            type=positive("episodes", 20),
            help="evaluation episodes (default: as many as the final score used)",
        ),
    ),
    shared("seed", help="seed of the evaluation envs (default: the final score's, training seed + 10000)"),
)


def run(args: argparse.Namespace) -> int:
    """Score the run and print it beside the score it had when trained (exit code 0)."""
    require("eval", ["stable_baselines3"])
    from ..training import evaluate_saved

    cfg = None
    if args.config:
        cfg, source = load(args.config, "train")
        check_env(cfg, source)
    result = evaluate_saved(args.run, cfg, episodes=args.episodes, seed=args.seed, config_name=args.config)
    where = f"under the sensors of {args.config}" if args.config else "under its training sensors"
    n, seed = result["eval_episodes"], result["eval_seed"]
    print(
        f"{args.run} {where}: score {result['eval_return_mean']:.1f} = mean return of {n} episodes "
        f"(sd {result['eval_return_std']:.1f}), deterministic policy, evaluation seed {seed}"
    )
    trained = result["trained_score"]
    if trained is not None and args.seed is None and args.episodes is None:
        if args.config:
            print(
                f"the final score under its training sensors, on the same {n} episodes: {trained:.1f} "
                f"(change: {result['eval_return_mean'] - trained:+.1f})"
            )
        else:
            print(f"(the final score `sensorgym train` reported: {trained:.1f}, same episodes and seed)")
    return 0
