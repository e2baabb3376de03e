"""The ``sensorgym`` command line: see what sensors do, train with them, measure what they cost.

Commands (each runs an embedded default when called without ``--config``):

* ``sensorgym inspect``: GT vs measured traces (a PNG) and a table of each imperfection as configured and
  as estimated from the traces;
* ``sensorgym train`` / ``sensorgym eval``: PPO with a symmetric or asymmetric critic, saved with its
  config; replay it (``eval`` takes the run directory), optionally under another sensor configuration;
* ``sensorgym ablate``: a resumable sweep over imperfection levels x critic type x seeds, in local worker
  processes (``--workers``) or on a Ray cluster (``--ray``), with a CSV, a summary that states the answer
  with its uncertainty, and a plot;
* ``sensorgym demo``: a few lines of GT vs measured values.

A mistake the user can fix (a config, a flag, a path, a missing package) prints one line naming what is
wrong and the fix, and exits with code 2; Ctrl-C stops within seconds, keeps what is finished, prints how
to resume, and exits with code 130; SIGTERM (SLURM, ``timeout``, ``docker stop``) does the same and exits
with code 143 (:mod:`~sensorgym.app.signals`). A reused ``--out`` never loses results: ``train`` and
``ablate`` refuse a folder holding another run or study, and ``--force`` moves it aside
(:mod:`~sensorgym.app.outdir`). Progress bars are drawn on a terminal only; a log gets plain lines.

Example:
    >>> from sensorgym.app.cli import main
    >>> main(["demo", "--steps", "3"])  # doctest: +ELLIPSIS
    sensorgym demo: ...
    0
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import math
import os
import shlex
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering for camera sensors, before mujoco loads

DEFAULT_OUT = Path("sensorgym_outputs")

#: exit codes: a user error, and an interruption (128 + SIGINT, what shells report for Ctrl-C)
EXIT_USER_ERROR, EXIT_INTERRUPTED = 2, 130

#: optional modules -> the sensorgym extra that installs them (None: not in an extra, named by pip)
EXTRAS: dict[str, str | None] = {
    "stable_baselines3": "sb3",
    "matplotlib": "plot",
    "tqdm": "plot",
    "rich": "plot",
    "tensorboard": "plot",
    "scipy": "plot",  # the statistics of inspect's verdicts and ablate's summary
    "mujoco": "mujoco",
    "imageio": "mujoco",
    "ray": "ray",
    "rsl_rl": "rl",
    "skrl": "rl",
    "rl_games": "rl",
    "yaml": None,
}
# a module whose distribution has another name; pkg_resources left setuptools in 82.0 (an older package,
# e.g. ray before 2.10, still imports it)
_PIP_NAMES = {"yaml": "pyyaml", "pkg_resources": '"setuptools<82"'}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install_fix(modules: Sequence[str]) -> str:
    """The exact pip command that installs ``modules`` (through sensorgym's extras where they are in one).

    Example:
        >>> install_fix(["tqdm", "stable_baselines3"])
        'pip install "sensorgym[plot,sb3]"'
        >>> install_fix(["yaml"])
        'pip install pyyaml'
        >>> install_fix(["pkg_resources"])
        'pip install "setuptools<82"'
    """
    extras = sorted({e for m in modules if (e := EXTRAS.get(m.split(".")[0]))})
    others = sorted({_PIP_NAMES.get(m, m) for m in modules if not EXTRAS.get(m.split(".")[0])})
    parts = ([f'"sensorgym[{",".join(extras)}]"'] if extras else []) + others
    return "pip install " + " ".join(parts)


def _require(command: str, modules: Sequence[str]) -> None:
    """Raise one :class:`~sensorgym.app.config.UserError` naming every missing module and the pip command."""
    from .config import UserError

    missing = [m for m in modules if not _installed(m)]
    if missing:
        raise UserError(
            f"needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed. "
            f"Fix: {install_fix(missing)}"
        )


def exit_if_missing(program: str, modules: Sequence[str]) -> None:
    """For scripts outside the command line (the examples): when an optional module is missing, print one
    line naming it and the exact pip command, and exit with code 2 (instead of a raw
    ``ModuleNotFoundError`` traceback).

    Example:
        >>> exit_if_missing("my_script.py", ["numpy"])   # installed: nothing happens
    """
    missing = [m for m in modules if not _installed(m)]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        print(
            f"{program}: needs {', '.join(missing)}, which {verb} not installed. Fix: {install_fix(missing)}",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_USER_ERROR)


def _config(path: str | None, default: str) -> tuple[Any, str]:
    """The config at ``path`` (or the embedded default) and how to name it in messages."""
    from .config import load_config

    if path is not None:
        return load_config(path), path
    with resources.as_file(resources.files("sensorgym.app.configs") / f"{default}.toml") as p:
        return load_config(p), f"the embedded default {default}.toml (examples/configs/{default}.toml)"


def _check_env(cfg: Any, source: str, sweep: bool = False, training: bool = False) -> None:
    """Refuse, with one line naming ``source``, an unknown env id, a PPO argument PPO would reject or a
    sensor that does not fit the env (with ``sweep``: in any sweep cell; with ``training``: envs a run
    cannot checkpoint)."""
    from .config import ConfigError, check_env_ids

    check_env_ids(cfg, source)
    if training and cfg.env.vectorization == "async":
        raise ConfigError(
            f"{source}: config env.vectorization = 'async': a training run checkpoints its envs so that it "
            "can resume exactly, and the sub-envs of an AsyncVectorEnv live in other processes. Fix: write "
            'vectorization = "sync".'
        )
    if cfg.algorithm.kwargs and _installed("stable_baselines3"):
        from .training import check_ppo_kwargs

        check_ppo_kwargs(cfg.algorithm.kwargs, cfg.env.n_envs, source)
    _preflight(cfg, source, sweep)


def _preflight(cfg: Any, source: str, sweep: bool) -> None:
    """Build one env of the config (and of each sweep cell) with its sensors and reset it, so that a sensor
    that does not fit the env (a key it lacks, an index out of range) is one line naming ``source`` here,
    not a traceback later (or a failed run in a worker process)."""
    from .config import ConfigError, apply_overrides
    from .training import config_env_kwargs, make_sensor_env

    cells = [{}, *(cfg.sweep.cells() if sweep else [])]
    for cell in cells:
        c = apply_overrides(cfg, cell) if cell else cfg
        where = f"{source}: " + (
            f"with {', '.join(f'{k} = {v!r}' for k, v in cell.items())}: " if cell else ""
        )
        _check_dt(c, where)
        try:
            env = make_sensor_env(
                c.env.id, c.sensors, n_envs=1, seed=None, autoreset_mode="NextStep", **config_env_kwargs(c)
            )
            try:
                env.reset(seed=0)
            finally:
                env.close()
        except TypeError as e:
            if "unexpected keyword argument" not in str(e):
                raise  # not a config mistake: an internal bug keeps its traceback
            raise ConfigError(
                f"{where}config env.kwargs = {c.env.kwargs!r}: {_one_line(e).split(' was raised')[0]}. Fix: "
                "use the keyword arguments of the env's constructor (or of gymnasium.make, e.g. "
                "max_episode_steps)."
            ) from None
        except (ValueError, KeyError, IndexError) as e:
            text = _one_line(e)
            if "cannot infer the control step" in text:  # the wrapper's fix names its Python keyword
                text = text.split(" Fix:")[0] + " Fix: add dt = <seconds per step> to [env], e.g. dt = 0.02."
            fix = (
                ""
                if "Fix:" in text
                else (
                    " Fix: check the sensors' key, index and shape against the env's observation "
                    "(`sensorgym inspect --config ...` shows the channels)."
                )
            )
            raise ConfigError(f"{where}{text.rstrip('.')}.{fix}") from None


def _check_dt(cfg: Any, where: str) -> None:
    """Refuse an ``[env] dt`` that contradicts the env's own control step: every delay, period and latency
    in seconds is converted to steps with it, so a wrong one shifts them all (``dt = 0.02`` for Pendulum,
    whose step is 0.05 s, made a 0.1 s delay 5 steps = 0.25 s, and ``inspect`` said "ok")."""
    from .config import ConfigError
    from .control_step import own_control_step

    if cfg.env.dt is None:
        return
    own = own_control_step(cfg.env.id, cfg.env.kwargs)
    if own is None or math.isclose(own, float(cfg.env.dt), rel_tol=1e-6):
        return
    kwargs = f" (with its kwargs {cfg.env.kwargs})" if cfg.env.kwargs else ""
    steps = round(0.1 / float(cfg.env.dt))
    raise ConfigError(
        f"{where}config env.dt = {cfg.env.dt!r}: {cfg.env.id} gives its own control step, {own:g} s{kwargs}; "
        f"every delay, period and latency would be converted with the wrong one (a delay of 0.1 s would be "
        f"{steps} steps = {steps * own:g} s). Fix: remove dt from [env]; it is only for an env that does not "
        "give its control step."
    )


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    print(run_demo(steps=args.steps, seed=args.seed))
    return 0


def _inspect(args: argparse.Namespace) -> int:
    _require("inspect", ["matplotlib", "scipy", *(["stable_baselines3"] if args.model else [])])
    from .inspection import format_summary, run_inspect
    from .outdir import prepare_file

    model = None
    if args.model:
        from .saved_policy import SavedPolicy, check_run_dir

        run_config = check_run_dir(Path(args.model), "--model")
        if args.config is None:  # the policy's own config: the sensors, shapes and latency it was trained on
            from .config import load_config

            cfg, source = load_config(run_config), str(run_config)
        else:
            cfg, source = _config(args.config, "inspect")
        _check_env(cfg, source)
        model = SavedPolicy(args.model, source)  # normalized as in training, checked against the config
    else:
        cfg, source = _config(args.config, "inspect")
        _check_env(cfg, source)
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
    if result.sampler_figure is not None:
        print(
            f"sampler figure: {result.sampler_figure} (sensors with update_period/dropout: samples taken, "
            "samples lost, and the reading's age)"
        )
    return 0


def _bars(args: argparse.Namespace) -> bool:
    """Progress bars only on a terminal: elsewhere (a log file, a pipe, a batch job) their redraws fill
    the log with control codes (~21 KB a minute), so the commands print plain lines instead."""
    return not args.no_progress and sys.stderr.isatty()


def _log(line: str) -> None:
    print(line, flush=True)  # flushed: a log read while the command runs (tail -f, a batch job) shows it


def _stopped() -> str:
    from .signals import signal_name

    return "interrupted" if signal_name() == "Ctrl-C" else "stopped by SIGTERM"


def _train(args: argparse.Namespace) -> int:
    bars = _bars(args)
    _require("train", ["stable_baselines3", "tensorboard", *(["tqdm"] if bars else [])])
    from .outdir import RUN_FILES, STUDY_FILES, move_aside, prepare_folder, resume_conflict, run_conflict
    from .signals import interrupted_exit_code
    from .training import TrainingInterrupted, planned_timesteps, rollout_steps, train_from_config

    out = Path(args.out or DEFAULT_OUT / "train")
    if args.resume:
        from .config import UserError, parse_config

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
            import json

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
        source = str(out / "config.json")
    else:
        cfg, source = _config(args.config, "train")
    _check_env(cfg, source, training=True)
    prepare_folder(out)  # a file there, or a read-only place: one line, before anything is trained
    from .config import UserError

    if args.resume:
        conflict = resume_conflict(out)  # a study is not a run: say so before "resuming ..."
        if conflict:
            raise UserError(conflict)
    else:
        conflict = run_conflict(out)
        if conflict and not args.force:
            raise UserError(conflict)
        if conflict:
            moved = move_aside(out, [*RUN_FILES, *STUDY_FILES])
            print(f"--force: moved what {out} held to {moved} (nothing was deleted)")
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
    resume_cmd = shlex.join(
        ["sensorgym", "train", "--out", str(out), "--resume"]
        + (["--checkpoint-every", str(args.checkpoint_every)] if args.checkpoint_every else [])
    )
    try:
        result = train_from_config(
            cfg,
            out,
            progress_bar=bars,
            timesteps=args.timesteps,
            seed=args.seed,
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
            interruptible=True,
            progress_log=None if bars else _log,
        )
    except TrainingInterrupted as e:
        if e.checkpoint is None:
            print(
                f"sensorgym train: {_stopped()} at {e.timesteps:,} steps, before the first update wrote a "
                "checkpoint; nothing to resume: run the same command again to start over.",
                file=sys.stderr,
            )
            return interrupted_exit_code()
        redo = e.timesteps - e.checkpoint_timesteps
        again = f"; the {redo:,} steps of the rollout it cut short are trained again" if redo > 0 else ""
        print(
            f"sensorgym train: {_stopped()} at {e.timesteps:,} steps; checkpoint saved in {e.checkpoint} "
            f"at {e.checkpoint_timesteps:,} steps (the last update{again}, so the resumed run is the "
            f"uninterrupted one). Resume with: {resume_cmd}",
            file=sys.stderr,
        )
        return interrupted_exit_code()
    except KeyboardInterrupt:
        if (out / "checkpoint" / "model.zip").exists():
            print(f"sensorgym train: {_stopped()}. Resume with: {resume_cmd}", file=sys.stderr)
        else:
            line = f"sensorgym train: {_stopped()} before training started; nothing to resume."
            print(line, file=sys.stderr)
        return interrupted_exit_code()
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
    return 0


def _eval(args: argparse.Namespace) -> int:
    _require("eval", ["stable_baselines3"])
    from .training import evaluate_saved

    cfg = None
    if args.config:
        cfg, source = _config(args.config, "train")
        _check_env(cfg, source)
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


def _ablate(args: argparse.Namespace) -> int:
    bars = _bars(args)
    _require(
        "ablate",
        [
            "stable_baselines3",
            "matplotlib",
            "scipy",
            *(["tqdm"] if bars else []),
            *(["ray"] if args.ray else []),
        ],
    )
    from .ablation import SweepInterrupted, available_cores, plan_runs, run_sweep
    from .config import UserError
    from .outdir import STUDY_FILES, move_aside, prepare_folder, study_conflict
    from .signals import interrupted_exit_code

    cfg, source = _config(args.config, "ablate")
    if args.timesteps:
        cfg.algorithm.timesteps = args.timesteps
        cfg.raw.setdefault("algorithm", {})["timesteps"] = args.timesteps
    if args.seeds:
        cfg.sweep.seeds = list(args.seeds)
        cfg.raw.setdefault("sweep", {})["seeds"] = list(args.seeds)
    _check_env(cfg, source, sweep=True, training=True)
    out = Path(args.out or DEFAULT_OUT / "ablate")
    prepare_folder(out)  # a file there, or a read-only place: one line, before any run
    conflict = study_conflict(out, cfg.raw, {r.run_id for r in plan_runs(cfg)})
    if conflict and not args.force:
        raise UserError(conflict)
    if conflict:
        moved = move_aside(out, STUDY_FILES)
        print(f"--force: moved the study {out} held to {moved} (nothing was deleted)")
    workers = args.workers if args.workers is not None else min(2, available_cores())
    try:
        run_sweep(
            cfg,
            out,
            workers=workers,
            ray_address=args.ray,
            progress=bars,
            threads=args.threads,
            log=_log,
        )
    except SweepInterrupted as e:
        kept = (
            f"{e.done} of {e.total} runs finished and are kept in {e.csv_path}"
            if e.done
            else f"none of the {e.total} runs had finished"
        )
        print(
            f"sensorgym ablate: {_stopped()}; {kept}. Resume (finished runs are skipped) with: "
            f"{shlex.join(['sensorgym', *args.argv])}",
            file=sys.stderr,
        )
        return interrupted_exit_code()
    print((out / "summary.md").read_text())
    print(f"outputs: {out / 'results.csv'}, {out / 'summary.md'}, {out / 'return_vs_level.png'}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block): what is wrong and where to look."""

    def error(self, message: str) -> Any:
        fix = "" if "Fix:" in message else f" Fix: see `{self.prog} --help`."
        self.exit(EXIT_USER_ERROR, f"{self.prog}: {message}.{fix}\n")


class _Formatter(argparse.HelpFormatter):
    """Wraps the description's and epilog's paragraphs to the terminal, but keeps indented lines (examples)
    as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out = []
        for line in text.splitlines():
            if line.startswith(" ") or not line:
                out.append(indent + line)
            else:
                out.append(textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent))
        return "\n".join(out)


def _positive(what: str, example: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a positive whole number of {what}. Fix: pass e.g. {example}"
            )
        return value

    return parse


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0. Fix: pass e.g. 20000, or 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``sensorgym`` argument parser (every option has help text)."""
    fmt = _Formatter
    parser = _Parser(
        prog="sensorgym",
        description="Robot sensors for Gymnasium envs: see what they do (inspect, demo), train with them "
        "(train, eval) and measure what they cost (ablate). Each command runs an embedded default config "
        "unless given --config (examples: examples/configs/).",
        formatter_class=fmt,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    demo = sub.add_parser(
        "demo",
        help="print GT vs measured values of a delayed, noisy, quantized sensor",
        description="Print ground truth vs what a delayed, jittery, noisy, biased, quantized sensor reports "
        "for a sine, with the signed difference per step.",
        formatter_class=fmt,
    )
    demo.add_argument(
        "--steps",
        type=_positive("steps", 40),
        default=40,
        help="rows to show: the reset (step 0) and the control steps after it (default 40)",
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the sensor's noise and jitter (default 0)")
    demo.set_defaults(func=_demo)

    ins = sub.add_parser(
        "inspect",
        help="plot GT vs measured traces; each imperfection configured vs estimated",
        description="Run one env under random actions (or a trained policy), record every sensor's ground "
        "truth and measured reading, estimate delay, noise, bias, drift and quantization from the traces, "
        "and print them beside the configured values (with why an estimate can differ).",
        epilog="examples:\n  sensorgym inspect\n  sensorgym inspect --config examples/configs/inspect.toml "
        "--steps 400 --out fig.png",
        formatter_class=fmt,
    )
    ins.add_argument("--config", help="TOML/YAML/JSON config (default: the embedded inspect.toml)")
    ins.add_argument(
        "--steps",
        type=_positive("steps", 200),
        default=200,
        help="control steps to record (default 200); short traces give rough estimates",
    )
    ins.add_argument("--seed", type=int, default=0, help="seed of the env, actions and sensors (default 0)")
    ins.add_argument(
        "--out",
        help="PNG path (default: sensorgym_outputs/inspect.png); with a sensor that has update_period or "
        "dropout a second figure is written beside it, named after it: inspect_sampler.png for the default, "
        "fig_sampler.png for --out fig.png (samples taken, samples lost, the reading's age)",
    )
    ins.add_argument(
        "--model",
        metavar="RUN_DIR",
        help="a run directory from `sensorgym train` to act instead of random actions (with the run's own "
        "config.json unless --config is given)",
    )
    ins.set_defaults(func=_inspect)

    tr = sub.add_parser(
        "train",
        help="train PPO with a symmetric or asymmetric critic",
        description="Train PPO on the config's env and sensors, then score it: the final score is the mean "
        "return of the config's eval_episodes episodes on evaluation envs seeded seed + 10000 "
        "(`sensorgym eval RUN_DIR` reproduces it). PPO trains whole rollouts (n_steps x n_envs), so it "
        "may train a little more than the budget. Ctrl-C stops within seconds and writes a checkpoint "
        "that --resume continues from.",
        epilog="writes into --out: model.zip, vecnormalize.pkl, config.json (the config used), result.json "
        "(score, episodes, seed, steps), checkpoint/, tb/ (TensorBoard)\n\nexamples:\n"
        "  sensorgym train                                  # clean sensors\n"
        "  sensorgym eval sensorgym_outputs/train --config examples/configs/eval_noisy.toml",
        formatter_class=fmt,
    )
    tr.add_argument("--config", help="config file (default: the embedded train.toml: clean sensors)")
    tr.add_argument("--out", help="run directory (default: sensorgym_outputs/train)")
    tr.add_argument(
        "--timesteps",
        metavar="STEPS",
        type=_positive("steps", 20000),
        help="training budget in env steps (all envs together), rounded up to whole PPO rollouts "
        "(default: the config's algorithm.timesteps)",
    )
    tr.add_argument("--seed", type=int, help="training seed (default: the config's algorithm.seed)")
    tr.add_argument("--critic", choices=["symmetric", "asymmetric"], help="override the config's critic.type")
    tr.add_argument(
        "--checkpoint-every",
        type=_non_negative,
        default=0,
        metavar="STEPS",
        help="write a resumable checkpoint every STEPS steps (always at the end and on Ctrl-C)",
    )
    tr.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its checkpoint and config.json"
    )
    tr.add_argument(
        "--force",
        action="store_true",
        help="start a new run even if --out holds one: what it holds is moved, untouched, into "
        "--out/replaced-<time>/ (without --force such a folder is refused)",
    )
    tr.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar: a plain line per tenth of the run (the default when the output is not a "
        "terminal)",
    )
    tr.set_defaults(func=_train)

    ev = sub.add_parser(
        "eval",
        help="score a trained run (a run directory), optionally under another sensor config",
        description="Score the model in a run directory written by `sensorgym train`. By default it uses the "
        "final score's evaluation seed and episode count, so it reproduces that score; with --config it "
        "scores the same episodes under that config's sensors (train clean, test noisy). Only imperfection "
        "levels may change, not which sensors the policy reads.",
        epilog="examples:\n  sensorgym eval sensorgym_outputs/train\n"
        "  sensorgym eval sensorgym_outputs/train --config examples/configs/eval_noisy.toml",
        formatter_class=fmt,
    )
    ev.add_argument(
        "run",
        metavar="RUN_DIR",
        help="the run directory `sensorgym train` wrote (e.g. sensorgym_outputs/train)",
    )
    ev.add_argument(
        "--config", help="score under this config's sensors (e.g. noisier) instead of the training ones"
    )
    ev.add_argument(
        "--episodes",
        type=_positive("episodes", 20),
        help="evaluation episodes (default: as many as the final score used)",
    )
    ev.add_argument(
        "--seed",
        type=int,
        help="seed of the evaluation envs (default: the final score's, training seed + 10000)",
    )
    ev.set_defaults(func=_eval)

    ab = sub.add_parser(
        "ablate",
        help="sweep imperfection levels x critic type x seeds (resumable)",
        description="Train and score one PPO run per level x critic type x seed, then write a summary that "
        "answers the question with its uncertainty (paired asymmetric - symmetric differences with 95% "
        "intervals, and the smallest difference the seeds can detect with 80% probability) and a plot. "
        "Finished runs are appended to results.csv at once and skipped when the "
        "command is run again; Ctrl-C stops within seconds and keeps them.",
        epilog="writes into --out: results.csv (one row per run), summary.md, return_vs_level.png, "
        "config.json\n\nexamples:\n  sensorgym ablate\n  sensorgym ablate --workers 4 --seeds 0 1 2 3 4 5\n"
        "  sensorgym ablate --ray auto",
        formatter_class=fmt,
    )
    ab.add_argument("--config", help="config with a [sweep] table (default: the embedded ablate.toml)")
    ab.add_argument("--out", help="output directory (default: sensorgym_outputs/ablate)")
    ab.add_argument(
        "--workers",
        type=_positive("workers", 2),
        help="parallel runs in local processes (default: min(2, cores))",
    )
    ab.add_argument(
        "--threads",
        type=_positive("threads", 1),
        help="torch threads per run (default: max(1, cores // workers); on Ray 1, and each run reserves "
        "that many CPUs)",
    )
    ab.add_argument(
        "--ray", metavar="ADDRESS", help="run on a Ray cluster ('auto', 'ray://host:port' or 'local')"
    )
    ab.add_argument(
        "--timesteps",
        metavar="STEPS",
        type=_positive("steps", 50000),
        help="override the training budget of every run (changes every run: an --out holding the study of "
        "another budget is refused; choose a new --out)",
    )
    ab.add_argument(
        "--seeds",
        metavar="SEED",
        type=int,
        nargs="+",
        help="override the seeds (finished runs of these seeds are reused)",
    )
    ab.add_argument(
        "--force",
        action="store_true",
        help="run even if --out holds a study of another config: that study is moved, untouched, into "
        "--out/replaced-<time>/ (without --force such a folder is refused; the same config resumes)",
    )
    ab.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bars: one line per finished run, with its score and seconds (the default when "
        "the output is not a terminal)",
    )
    ab.set_defaults(func=_ablate)

    from .fit_command import add_fit_parser  # issue 27: its flags and run live in fit_command.py

    add_fit_parser(sub, fmt)
    return parser


def _one_line(message: Any) -> str:
    return " ".join(str(message).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0, 2 for a user error, 130 for Ctrl-C, 143 for
    SIGTERM)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help (0) or a bad flag (2, its one-line message already printed)
        return e.code if isinstance(e.code, int) else 0
    args.argv = argv
    prefix = f"sensorgym {args.command}:"
    from .signals import interrupted_exit_code, sigterm_as_sigint, stop_requested

    try:
        with sigterm_as_sigint():  # SIGTERM (SLURM, timeout, docker stop) stops a command as Ctrl-C does
            try:
                code = args.func(args)
            except KeyboardInterrupt:  # outside the commands' own handling (e.g. while loading torch)
                print(f"{prefix} {_stopped()}.", file=sys.stderr)
                code = interrupted_exit_code()
    except KeyboardInterrupt:  # a second signal during the first one's message
        code = interrupted_exit_code()
    except BrokenPipeError:  # the output went to a pipe that closed early (e.g. `| head`)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python would otherwise complain when flushing at exit
        return 141
    except Exception as e:
        message = _user_message(e)
        if message is None:
            raise  # an internal bug: the traceback is for us
        print(f"{prefix} {message}", file=sys.stderr)
        return EXIT_USER_ERROR
    if stop_requested():
        # CPython remembers a KeyboardInterrupt that left code run by exec() (dataclasses and namedtuples
        # build their methods so: a stop during an import that makes one lands there) as "unhandled" even
        # once caught, and at exit kills the process with SIGINT (exit status -2, not 130/143); the next
        # exec() forgets it
        exec("None")
    return code


def _user_message(e: Exception) -> str | None:
    """The one-line message of an error the user can fix, or ``None`` for an internal bug."""
    from .config import UserError

    if isinstance(e, UserError):
        return _one_line(e)
    if isinstance(e, ModuleNotFoundError) and e.name and not e.name.startswith("sensorgym"):
        top = e.name.split(".")[0]
        return f"needs {top}, which is not installed. Fix: {install_fix([top])}"
    try:
        import gymnasium as gym
    except ImportError:  # pragma: no cover - gymnasium is a core dependency
        gym = None
    if gym is not None and isinstance(e, gym.error.DependencyNotInstalled):
        return _dependency_message(_one_line(e))
    if isinstance(e, (ValueError, TypeError, RuntimeError)) and "Fix:" in str(e):
        return _one_line(e)
    if isinstance(e, OSError) and e.errno in _ENVIRONMENT_ERRNOS:
        # the machine, not the code: a full disk, a read-only or protected folder, a file in the way; each
        # with its own fix ("free space" had been the fix for a folder without write permission too)
        from .outdir import write_error

        return write_error(e.filename or ".", e)
    return None


#: OSErrors that say something about the machine's folders and disks, not about sensorgym's code
_ENVIRONMENT_ERRNOS = {
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EEXIST,
    errno.ENOTDIR,
    errno.EISDIR,
}


def _dependency_message(text: str) -> str:
    """Gymnasium's "X is not installed" as one line with one fix (its own text names a fix of its own, so
    printing it with ours gave two different ones).

    Example:
        >>> _dependency_message('MuJoCo is not installed, run `pip install "gymnasium[mujoco]"`')
        'an env of the config needs MuJoCo, which is not installed. Fix: pip install "sensorgym[mujoco]"'
        >>> _dependency_message('Box2D is not installed, you can install it by run `pip install swig` '
        ...                     'followed by `pip install "gymnasium[box2d]"`').split(". ")[1]
        'Fix: pip install swig followed by pip install "gymnasium[box2d]"'
    """
    import re

    what = re.split(r" is not installed| not installed", text, maxsplit=1)[0].strip() or "a package"
    if "mujoco" in text.lower():
        fix = install_fix(["mujoco"])
    else:
        commands = re.findall(r"`([^`]+)`", text)
        fix = " followed by ".join(commands) if commands else f"install {what}"
    return f"an env of the config needs {what}, which is not installed. Fix: {fix}"


if __name__ == "__main__":
    raise SystemExit(main())
