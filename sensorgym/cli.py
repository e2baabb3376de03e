"""The ``sensorgym`` command line: see what sensors do, train with them, measure what they cost.

Commands (each runs an embedded default when called without ``--config``):

* ``sensorgym inspect``: GT vs measured traces (a PNG) and a table of delay, noise, bias, drift and
  quantization measured from the traces;
* ``sensorgym train`` / ``sensorgym eval``: PPO with a symmetric or asymmetric critic, saved with its
  config; replay it, optionally under another sensor configuration;
* ``sensorgym ablate``: a resumable sweep over imperfection levels x critic type x seeds, in local worker
  processes (``--workers``) or on a Ray cluster (``--ray``), with a CSV, a Markdown table and plots;
* ``sensorgym demo``: a few lines of GT vs measured values.

Example:
    >>> from sensorgym.cli import main
    >>> main(["demo", "--steps", "3"])  # doctest: +ELLIPSIS
    sensorgym demo: ...
    0
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering for camera sensors, before mujoco loads

DEFAULT_OUT = Path("sensorgym_outputs")


def _config(path: str | None, default: str):
    from .config import load_config

    if path is not None:
        return load_config(path)
    with resources.as_file(resources.files("sensorgym.configs") / f"{default}.toml") as p:
        return load_config(p)


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    print(run_demo(steps=args.steps, seed=args.seed))
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from .inspection import format_summary, run_inspect

    cfg = _config(args.config, "inspect")
    model = None
    if args.model:
        from stable_baselines3 import PPO

        model = PPO.load(Path(args.model) / "model.zip", device="cpu")
    out = Path(args.out or DEFAULT_OUT / "inspect.png")
    result = run_inspect(cfg, steps=args.steps, seed=args.seed, out=out, model=model)
    dt = float(result.times[1] - result.times[0]) if len(result.times) > 1 else 0.0
    print(
        f"{cfg.env.id}, {args.steps} steps of {dt:g} s, "
        f"{'policy ' + args.model if args.model else 'random actions'}; estimated from the traces:\n"
    )
    print(format_summary(result.summary, dt))
    print(f"\nfigure: {result.figure}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from .training import train_from_config

    cfg = _config(args.config, "train")
    if args.critic:
        cfg.critic.type = args.critic
        cfg.raw.setdefault("critic", {})["type"] = args.critic
    out = Path(args.out or DEFAULT_OUT / "train")
    what = "resuming" if args.resume else "training"
    print(f"{what} PPO ({cfg.critic.type} critic) on {cfg.env.id} with sensors {list(cfg.sensors)} -> {out}")
    result = train_from_config(
        cfg,
        out,
        progress_bar=not args.no_progress,
        timesteps=args.timesteps,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every,
        resume=args.resume,
    )
    for step, ret in result["eval_history"]:
        print(f"  eval at {step:>8} steps: mean return {ret:.1f}")
    print(
        f"final evaluation: {result['eval_return_mean']:.1f} ± {result['eval_return_std']:.1f} "
        f"over {len(result['eval_returns'])} episodes ({result['train_seconds']:.0f} s of training)"
    )
    print(f"saved: {out / 'model.zip'}, {out / 'config.json'}; TensorBoard logs: {out / 'tb'}")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from .config import load_config
    from .training import evaluate_saved

    cfg = load_config(args.config) if args.config else None
    result = evaluate_saved(args.run, cfg, episodes=args.episodes)
    where = f"under {args.config}" if args.config else "under its training sensors"
    print(
        f"{args.run} {where}: mean return {result['eval_return_mean']:.1f} ± {result['eval_return_std']:.1f} "
        f"over {len(result['eval_returns'])} episodes"
    )
    return 0


def _ablate(args: argparse.Namespace) -> int:
    from .ablation import run_sweep

    cfg = _config(args.config, "ablate")
    if args.timesteps:
        cfg.algorithm.timesteps = args.timesteps
        cfg.raw.setdefault("algorithm", {})["timesteps"] = args.timesteps
    if args.seeds:
        cfg.sweep.seeds = list(args.seeds)
        cfg.raw.setdefault("sweep", {})["seeds"] = list(args.seeds)
    out = Path(args.out or DEFAULT_OUT / "ablate")
    workers = args.workers if args.workers is not None else min(2, os.cpu_count() or 1)
    run_sweep(cfg, out, workers=workers, ray_address=args.ray, progress=not args.no_progress)
    print((out / "summary.md").read_text())
    print(f"outputs: {out / 'results.csv'}, {out / 'summary.md'}, {out / 'return_vs_level.png'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sensorgym", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="print GT vs measured values of a delayed, noisy, quantized sensor")
    demo.add_argument("--steps", type=int, default=40)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)

    ins = sub.add_parser("inspect", help="plot GT vs measured traces and estimate each imperfection")
    ins.add_argument("--config", help="TOML/YAML/JSON config (default: the embedded inspect.toml)")
    ins.add_argument("--steps", type=int, default=200)
    ins.add_argument("--seed", type=int, default=0)
    ins.add_argument("--out", help="PNG path (default: sensorgym_outputs/inspect.png)")
    ins.add_argument(
        "--model", help="a run directory from `sensorgym train` to act instead of random actions"
    )
    ins.set_defaults(func=_inspect)

    tr = sub.add_parser("train", help="train PPO with a symmetric or asymmetric critic")
    tr.add_argument("--config", help="config file (default: the embedded train.toml)")
    tr.add_argument("--out", help="run directory (default: sensorgym_outputs/train)")
    tr.add_argument("--timesteps", type=int)
    tr.add_argument("--seed", type=int)
    tr.add_argument("--critic", choices=["symmetric", "asymmetric"])
    tr.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        metavar="STEPS",
        help="write a resumable checkpoint every STEPS steps (always at the end)",
    )
    tr.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    tr.add_argument("--no-progress", action="store_true")
    tr.set_defaults(func=_train)

    ev = sub.add_parser("eval", help="replay a trained model, optionally under another sensor config")
    ev.add_argument("run", help="the run directory `sensorgym train` wrote")
    ev.add_argument("--config", help="evaluate under this config's sensors (e.g. noisier) instead")
    ev.add_argument("--episodes", type=int)
    ev.set_defaults(func=_eval)

    ab = sub.add_parser("ablate", help="sweep imperfection levels x critic type x seeds (resumable)")
    ab.add_argument("--config", help="config with a [sweep] table (default: the embedded ablate.toml)")
    ab.add_argument("--out", help="output directory (default: sensorgym_outputs/ablate)")
    ab.add_argument("--workers", type=int, help="parallel runs in local processes (default: min(2, cores))")
    ab.add_argument(
        "--ray", metavar="ADDRESS", help="run on a Ray cluster ('auto', 'ray://host:port' or 'local')"
    )
    ab.add_argument("--timesteps", type=int, help="override the training steps of every run")
    ab.add_argument("--seeds", type=int, nargs="+", help="override the seeds")
    ab.add_argument("--no-progress", action="store_true")
    ab.set_defaults(func=_ablate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        from .config import ConfigError

        if isinstance(e, (ConfigError, FileNotFoundError)) or "Fix:" in str(e):
            print(f"sensorgym {args.command}: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    raise SystemExit(main())
