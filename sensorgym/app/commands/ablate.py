"""``sensorgym ablate``: a resumable sweep over imperfection levels x critic type x seeds, with a summary
that states the answer with its uncertainty (the work is :func:`sensorgym.app.ablation.run_sweep`)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from .common import DEFAULT_OUT, bars, check_env, load, log, require, stopped
from .options import Argument, positive, shared

NAME = "ablate"
HELP = "sweep imperfection levels x critic type x seeds (resumable)"
DESCRIPTION = (
    "Train and score one PPO run per level x critic type x seed, then write a summary that answers the "
    "question with its uncertainty (paired asymmetric - symmetric differences with 95% intervals, and the "
    "smallest difference the seeds can detect with 80% probability) and a plot. Finished runs are appended "
    "to results.csv at once and skipped when the command is run again; Ctrl-C stops within seconds and "
    'keeps them. With [deploy.NAME] tables (deployment conditions: overrides such as "latency.delay" = '
    "0.04) every run is also scored under each condition on its own evaluation episodes, and the summary "
    "says which arm transfers best and how sure that is; a condition added later scores the finished runs "
    "without training them again."
)
EPILOG = (
    "writes into --out: results.csv (one row per run), summary.md, return_vs_level.png, config.json, "
    "runs/ (a run directory per run, for `sensorgym eval`), deploy.png (with [deploy] conditions)"
    "\n\nexamples:\n  sensorgym ablate\n  sensorgym ablate --workers 4 --seeds 0 1 2 3 4 5\n"
    "  sensorgym ablate --ray auto"
)

ARGUMENTS: tuple[Argument, ...] = (
    shared("config", help="config with a [sweep] table (default: the embedded ablate.toml)"),
    shared("out", help="output directory (default: sensorgym_outputs/ablate)"),
    (
        ("--workers",),
        dict(type=positive("workers", 2), help="parallel runs in local processes (default: min(2, cores))"),
    ),
    (
        ("--threads",),
        dict(
            type=positive("threads", 1),
            help="torch threads per run (default: max(1, cores // workers); on Ray 1, and each run reserves "
            "that many CPUs)",
        ),
    ),
    (
        ("--ray",),
        dict(metavar="ADDRESS", help="run on a Ray cluster ('auto', 'ray://host:port' or 'local')"),
    ),
    shared(
        "timesteps",
        type=positive("steps", 50000),
        help="override the training budget of every run (changes every run: an --out holding the study of "
        "another budget is refused; choose a new --out)",
    ),
    (
        ("--seeds",),
        dict(
            metavar="SEED",
            type=int,
            nargs="+",
            help="override the seeds (finished runs of these seeds are reused)",
        ),
    ),
    shared(
        "force",
        help="run even if --out holds a study of another config: that study is moved, untouched, into "
        "--out/replaced-<time>/ (without --force such a folder is refused; the same config resumes)",
    ),
    shared(
        "no_progress",
        help="no progress bars: one line per finished run, with its score and seconds (the default when "
        "the output is not a terminal)",
    ),
)


def run(args: argparse.Namespace) -> int:
    """Run the sweep's unfinished runs and print its summary; on Ctrl-C or SIGTERM say what is kept and
    how to resume (exit code 0, 130 or 143)."""
    show_bars = bars(args)
    require(
        "ablate",
        [
            "stable_baselines3",
            "matplotlib",
            "scipy",
            *(["tqdm"] if show_bars else []),
            *(["ray"] if args.ray else []),
        ],
    )
    from ..ablation import SweepInterrupted, available_cores, run_sweep
    from ..signals import interrupted_exit_code

    cfg = _config(args)
    out = Path(args.out or DEFAULT_OUT / "ablate")
    _prepare(args, cfg, out)
    workers = args.workers if args.workers is not None else min(2, available_cores())
    try:
        run_sweep(
            cfg, out, workers=workers, ray_address=args.ray, progress=show_bars, threads=args.threads, log=log
        )
    except SweepInterrupted as e:
        kept = (
            f"{e.done} of {e.total} runs finished and are kept in {e.csv_path}"
            if e.done
            else f"none of the {e.total} runs had finished"
        )
        print(
            f"sensorgym ablate: {stopped()}; {kept}. Resume (finished runs are skipped) with: "
            f"{shlex.join(['sensorgym', *args.argv])}",
            file=sys.stderr,
        )
        return interrupted_exit_code()
    print((out / "summary.md").read_text())
    figures = [out / "return_vs_level.png", *([out / "deploy.png"] if cfg.deploy else [])]
    print(
        f"outputs: {out / 'results.csv'}, {out / 'summary.md'}, {', '.join(map(str, figures))}; "
        f"a run directory per run in {out / 'runs'} (sensorgym eval reads it)"
    )
    return 0


def _config(args: argparse.Namespace) -> Any:
    """The study's config with ``--timesteps`` and ``--seeds`` applied, checked in every sweep cell."""
    cfg, source = load(args.config, "ablate")
    if args.timesteps:
        cfg.algorithm.timesteps = args.timesteps
        cfg.raw.setdefault("algorithm", {})["timesteps"] = args.timesteps
    if args.seeds:
        cfg.sweep.seeds = list(args.seeds)
        cfg.raw.setdefault("sweep", {})["seeds"] = list(args.seeds)
    check_env(cfg, source, sweep=True, training=True)
    if cfg.deploy:
        from ..ablation.task import check_deployable

        check_deployable(cfg, source)
    return cfg


def _prepare(args: argparse.Namespace, cfg: Any, out: Path) -> None:
    """``out`` ready for the study: a folder holding a study of another config refused, or moved aside
    with ``--force`` (the same config resumes)."""
    from ..ablation import plan_runs
    from ..config import UserError
    from ..outdir import STUDY_FILES, move_aside, prepare_folder, study_conflict

    prepare_folder(out)  # a file there, or a read-only place: one line, before any run
    conflict = study_conflict(out, cfg.raw, {r.run_id for r in plan_runs(cfg)})
    if conflict and not args.force:
        raise UserError(conflict)
    if conflict:
        moved = move_aside(out, STUDY_FILES)
        print(f"--force: moved the study {out} held to {moved} (nothing was deleted)")
