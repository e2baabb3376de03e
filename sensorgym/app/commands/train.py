"""``sensorgym train``: train PPO on the config's env and sensors, score it, and save the run (the work is
:func:`sensorgym.app.training.train_from_config`); ``--resume`` continues an interrupted run exactly."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from .common import DEFAULT_OUT, bars, check_env, load, log, require, stopped
from .options import Argument, non_negative, positive, shared

NAME = "train"
HELP = "train PPO with a symmetric or asymmetric critic"
DESCRIPTION = (
    "Train PPO on the config's env and sensors, then score it: the final score is the mean return of the "
    "config's eval_episodes episodes on evaluation envs seeded seed + 10000 (`sensorgym eval RUN_DIR` "
    "reproduces it). PPO trains whole rollouts (n_steps x n_envs), so it may train a little more than the "
    "budget. Ctrl-C stops within seconds and writes a checkpoint that --resume continues from."
)
EPILOG = (
    "writes into --out: model.zip, vecnormalize.pkl, config.json (the config used), result.json "
    "(score, episodes, seed, steps), checkpoint/, tb/ (TensorBoard)\n\nexamples:\n"
    "  sensorgym train                                  # clean sensors\n"
    "  sensorgym eval sensorgym_outputs/train --config examples/configs/eval_noisy.toml"
)

ARGUMENTS: tuple[Argument, ...] = (
    shared("config", help="config file (default: the embedded train.toml: clean sensors)"),
    shared("out", help="run directory (default: sensorgym_outputs/train)"),
    shared(
        "timesteps",
        type=positive("steps", 20000),
        help="training budget in env steps (all envs together), rounded up to whole PPO rollouts "
        "(default: the config's algorithm.timesteps)",
    ),
    shared("seed", help="training seed (default: the config's algorithm.seed)"),
    (("--critic",), dict(choices=["symmetric", "asymmetric"], help="override the config's critic.type")),
    (
        ("--checkpoint-every",),
        dict(
            type=non_negative,
            default=0,
            metavar="STEPS",
            help="write a resumable checkpoint every STEPS steps (always at the end and on Ctrl-C)",
        ),
    ),
    (
        ("--resume",),
        dict(action="store_true", help="continue the run in --out from its checkpoint and config.json"),
    ),
    shared(
        "force",
        help="start a new run even if --out holds one: what it holds is moved, untouched, into "
        "--out/replaced-<time>/ (without --force such a folder is refused)",
    ),
    shared(
        "no_progress",
        help="no progress bar: a plain line per tenth of the run (the default when the output is not a "
        "terminal)",
    ),
)


def run(args: argparse.Namespace) -> int:
    """Train, score and save; on Ctrl-C or SIGTERM say how to resume (exit code 0, 130 or 143)."""
    show_bars = bars(args)
    require("train", ["stable_baselines3", "tensorboard", *(["tqdm"] if show_bars else [])])
    from ..training import TrainingInterrupted, train_from_config

    out = Path(args.out or DEFAULT_OUT / "train")
    cfg = _config(args, out)
    _announce(args, cfg, out)
    resume_cmd = shlex.join(
        ["sensorgym", "train", "--out", str(out), "--resume"]
        + (["--checkpoint-every", str(args.checkpoint_every)] if args.checkpoint_every else [])
    )
    try:
        result = train_from_config(
            cfg,
            out,
            progress_bar=show_bars,
            timesteps=args.timesteps,
            seed=args.seed,
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
            interruptible=True,
            progress_log=None if show_bars else log,
        )
    except TrainingInterrupted as e:
        return _interrupted(e, resume_cmd)
    except KeyboardInterrupt:
        from ..signals import interrupted_exit_code

        if (out / "checkpoint" / "model.zip").exists():
            print(f"sensorgym train: {stopped()}. Resume with: {resume_cmd}", file=sys.stderr)
        else:
            line = f"sensorgym train: {stopped()} before training started; nothing to resume."
            print(line, file=sys.stderr)
        return interrupted_exit_code()
    _report(result, out)
    return 0


def _config(args: argparse.Namespace, out: Path) -> Any:
    """The run's config, checked against its env, with ``out`` ready for it: with ``--resume`` the run's
    own ``config.json`` (flags it would ignore refused); else ``--config`` (or the embedded default), and an
    ``out`` holding another run refused, or moved aside with ``--force``."""
    from ..config import UserError
    from ..outdir import RUN_FILES, STUDY_FILES, move_aside, prepare_folder, resume_conflict, run_conflict

    if args.resume:
        cfg, source = _resumed_config(args, out)
    else:
        cfg, source = load(args.config, "train")
    check_env(cfg, source, training=True)
    prepare_folder(out)  # a file there, or a read-only place: one line, before anything is trained
    if args.resume:
        conflict = resume_conflict(out)  # a study is not a run: say so before "resuming ..."
        if conflict:
            raise UserError(conflict)
        return cfg
    conflict = run_conflict(out)
    if conflict and not args.force:
        raise UserError(conflict)
    if conflict:
        moved = move_aside(out, [*RUN_FILES, *STUDY_FILES])
        print(f"--force: moved what {out} held to {moved} (nothing was deleted)")
    return cfg


def _resumed_config(args: argparse.Namespace, out: Path) -> tuple[Any, str]:
    """``--resume``: the config saved in ``out/config.json`` and how to name it; ``--critic`` and
    ``--force`` refused (the run keeps its own critic; --force would move it aside)."""
    import json

    from ..config import UserError, parse_config

    if args.critic:
        raise UserError(
            f"--critic {args.critic}: resuming continues the run in {out} with its own critic. Fix: drop "
            "--critic, or start a new run in another --out."
        )
    if args.force:
        raise UserError(
            "--force with --resume: --resume continues the run in --out, --force would move it aside. "
            "Fix: drop one of them."
        )
    if args.config:
        print(f"(--config {args.config} is not used: resuming continues with {out / 'config.json'})")
    try:
        cfg = parse_config(json.loads((out / "config.json").read_text()))
    except FileNotFoundError:
        raise UserError(
            f"--out {out}: no run to resume there (no config.json). Fix: pass the --out of a run "
            "that `sensorgym train` wrote, or drop --resume."
        ) from None
    except NotADirectoryError:
        raise UserError(
            f"--out {out} is a file, not a run directory. Fix: pass the --out of a run that "
            "`sensorgym train` wrote."
        ) from None
    return cfg, str(out / "config.json")


def _announce(args: argparse.Namespace, cfg: Any, out: Path) -> None:
    """Apply ``--critic`` to a new run and say what will be trained: the critic, seed, env, sensors and,
    for a new run, how the budget rounds up to whole rollouts."""
    from ..training import planned_timesteps, rollout_steps

    if args.critic and not args.resume:
        cfg.critic.type = args.critic
        cfg.raw.setdefault("critic", {})["type"] = args.critic
    budget = args.timesteps if args.timesteps is not None else cfg.algorithm.timesteps
    seed = args.seed if args.seed is not None else cfg.algorithm.seed
    rollout = rollout_steps(cfg.algorithm.kwargs, cfg.env.n_envs)
    what = "resuming" if args.resume else "training"
    print(
        f"{what} PPO ({cfg.critic.type} critic, seed {seed}) on {cfg.env.id} with sensors "
        f"{list(cfg.sensors)} -> {out}"
    )
    if not args.resume:
        planned = planned_timesteps(budget, rollout)
        print(
            f"budget {budget:,} steps; PPO trains whole rollouts of {cfg.env.n_envs} envs x "
            f"{rollout // cfg.env.n_envs:,} steps = {rollout:,}, so {planned:,} steps will be trained"
        )


def _interrupted(e: Any, resume_cmd: str) -> int:
    """The lines of a run stopped by Ctrl-C or SIGTERM: what its checkpoint holds and how to resume."""
    from ..signals import interrupted_exit_code

    if e.checkpoint is None:
        print(
            f"sensorgym train: {stopped()} at {e.timesteps:,} steps, before the first update wrote a "
            "checkpoint; nothing to resume: run the same command again to start over.",
            file=sys.stderr,
        )
        return interrupted_exit_code()
    redo = e.timesteps - e.checkpoint_timesteps
    again = f"; the {redo:,} steps of the rollout it cut short are trained again" if redo > 0 else ""
    print(
        f"sensorgym train: {stopped()} at {e.timesteps:,} steps; checkpoint saved in {e.checkpoint} "
        f"at {e.checkpoint_timesteps:,} steps (the last update{again}, so the resumed run is the "
        f"uninterrupted one). Resume with: {resume_cmd}",
        file=sys.stderr,
    )
    return interrupted_exit_code()


def _report(result: dict[str, Any], out: Path) -> None:
    """The finished run: its learning curve, the final score and how it was made, and what was saved."""
    episodes, eval_seed = result["eval_episodes"], result["eval_seed"]
    if result["eval_history"]:
        print(
            f"learning curve (mean return of {episodes} episodes on the evaluation envs, seed {eval_seed}):"
        )
        for step, ret in result["eval_history"]:
            print(f"  {step:>10,} steps: {ret:8.1f}")
    trained, budget_used = result["timesteps"], result["timesteps_budget"]
    why = (
        f" (budget {budget_used:,}, rounded up to whole rollouts of {result['rollout_steps']:,})"
        if trained != budget_used
        else ""
    )
    print(
        f"final score: {result['eval_return_mean']:.1f} = mean return of {episodes} evaluation episodes "
        f"(sd {result['eval_return_std']:.1f}), deterministic policy, evaluation seed {eval_seed}, after "
        f"{trained:,} steps{why}; {result['train_seconds']:.0f} s of training"
    )
    print(f"reproduce it: sensorgym eval {shlex.quote(str(out))}")
    print(
        f"saved in {out}: model.zip, vecnormalize.pkl, config.json, result.json, checkpoint/, "
        f"tb/ (TensorBoard: tensorboard --logdir {out / 'tb'})"
    )
