"""Running a sweep: every missing run of the plan, in this process, in local worker processes or as Ray
tasks (:mod:`~sensorgym.app.ablation.on_ray`), each finished run appended to ``results.csv`` at once (a
resumed sweep skips it) and kept as a run directory in ``runs/`` (:mod:`~sensorgym.app.ablation.task`),
with progress bars on a terminal and a line per finished run in a log. A finished run that lacks a score
under a ``[deploy]`` condition is scored with its saved model, not trained again, and its row updated.

Ctrl-C (SIGINT), or SIGTERM under :func:`~sensorgym.app.signals.sigterm_as_sigint`, stops a sweep within
seconds: queued runs are cancelled, running workers terminated, every finished run is kept in
``results.csv``, and :class:`SweepInterrupted` says how many are done. Then ``summary.md`` and
``return_vs_level.png`` are written (:mod:`~sensorgym.app.ablation.report`), and with ``[deploy]``
conditions ``deploy.png`` (:mod:`~sensorgym.app.ablation.deploy_report`).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..config_deploy import deploy_column
from ..outdir import read_results
from ..signals import stop_deferred, stop_requested
from .deploy_report import deploy_markdown, plot_deploy
from .on_ray import connect_ray, run_ray
from .plan import RESULT_FIELDS, Run, _label, default_threads, plan_runs
from .progress import Bars, LocalChannel, drain
from .report import plot_results, summary_markdown
from .task import RUNS, check_deployable, is_trained, missing_conditions, run_one, unpack_run

__all__ = ["SweepInterrupted", "read_results", "run_one", "run_sweep"]


#: folder (inside the output directory) where worker processes drop finished rows before the CSV
_FINISHED = ".finished"


class SweepInterrupted(KeyboardInterrupt):
    """The sweep stopped on Ctrl-C: ``done`` of ``total`` runs are in ``csv_path``; rerun to resume."""

    def __init__(self, done: int, total: int, csv_path: Path) -> None:
        super().__init__(f"sweep interrupted: {done} of {total} runs in {csv_path}")
        self.done, self.total, self.csv_path = done, total, csv_path


def _save_row(path: Path, row: dict[str, Any], fields: list[str]) -> None:
    """Append one row, or replace the row of its run when the CSV has one (a finished run scored under a
    new deployment condition, or trained again). A CSV whose header lacks some of ``fields`` (another
    sweep of the same config, a new condition, or an older version) is rewritten with the union of both
    headers, its own columns first: a rewrite never drops a column, so the rows already there keep every
    value (a key a row does not set stays empty, which the summary reads as the config's own value)."""
    header: list[str] = []
    if path.exists():
        with path.open() as f:
            header = next(csv.reader(f), [])
    columns = header + [k for k in fields if k not in header] if header else list(fields)
    rows = read_results(path) if header else []
    run_id = str(row["run_id"])
    known = any(r.get("run_id") == run_id for r in rows)
    if known or (header and columns != header):
        rows = [{**r, **row} if r.get("run_id") == run_id else r for r in rows]
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)  # a kill mid-rewrite leaves the old file whole
        if known:
            return
    new = not header
    with path.open("a" if header else "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Hold back SIGINT (delivered on exit) while starting worker processes: a child inherits the blocked
    mask, so a Ctrl-C during its start-up cannot kill it with a traceback before it ignores SIGINT."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def run_sweep(
    cfg: Config,
    out: str | Path,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """Run every missing run of the sweep, then write ``summary.md`` and ``return_vs_level.png``.

    ``threads``: torch intra-op threads per run; default ``max(1, cores // workers)`` for local runs
    (:func:`default_threads`) and 1 on Ray, where each task reserves ``threads`` CPUs.

    Without ``progress`` bars (output that is not a terminal, or ``--no-progress``), ``log`` gets one line
    per finished run: its setting, score and seconds.

    Raises :class:`SweepInterrupted` on Ctrl-C (or SIGTERM, under
    :func:`~sensorgym.app.signals.sigterm_as_sigint`), after keeping every finished run in ``results.csv``.
    """
    out = Path(out)
    check_deployable(cfg)  # a condition the trained policies cannot be scored under: before any run
    runs = plan_runs(cfg)
    # before anything is written: no cluster there is a one-line mistake, not a half-written study
    ray_started = connect_ray(ray_address) if ray_address else False
    try:
        return _sweep(cfg, out, runs, workers, ray_address, progress, log, threads)
    finally:
        if ray_started:
            import ray

            with stop_deferred():
                ray.shutdown()


def _sweep(
    cfg: Config,
    out: Path,
    runs: list[Run],
    workers: int,
    ray_address: str | None,
    progress: bool,
    log: Callable[[str], None],
    threads: int | None,
) -> list[dict[str, Any]]:
    """:func:`run_sweep` once Ray (if used) is connected."""
    out.mkdir(parents=True, exist_ok=True)
    _write_atomic(out / "config.json", json.dumps(cfg.raw, indent=2, default=str))
    csv_path = out / "results.csv"
    cell_keys = sorted({k for r in runs for k in r.cell})
    fields = ["run_id", "critic", "seed", *cell_keys, *RESULT_FIELDS[3:], *map(deploy_column, cfg.deploy)]
    wanted = {r.run_id for r in runs}
    _collect_finished(out, csv_path, fields)  # rows a killed sweep's workers finished
    todo, scored_only, again = _todo(cfg, runs, out, csv_path)
    workers = max(1, workers)
    if threads is None:
        threads = 1 if ray_address else default_threads(min(workers, max(1, len(todo))))
    to_train = len(todo) - len(scored_only)
    log(_plan_line(cfg, len(runs), to_train, csv_path, cell_keys, workers, threads, ray_address))
    if scored_only:
        log(
            f"{len(scored_only)} finished run(s) lack a score under a [deploy] condition: they are scored "
            f"with their saved models in {out / RUNS} (not trained again)"
        )
    if again:
        log(
            f"{again} finished run(s) lack a score under a [deploy] condition and have no saved model in "
            f"{out / RUNS} (a study of an older version): they are trained again with their seeds, then "
            "scored"
        )
    labels = {r.run_id: f"{r.critic} s{r.seed} {_label(r.cell)}" for r in runs}
    bars = Bars(len(runs), len(runs) - len(todo), progress)
    finished = [len(runs) - len(todo)]

    def on_row(row: dict[str, Any]) -> None:
        files = row.pop("_files", None)
        if files:  # a Ray task's run directory
            unpack_run(files, out / RUNS / row["run_id"])
        _save_row(csv_path, row, fields)
        bars.finish(row["run_id"])
        finished[0] += 1
        if not progress:  # a log, not a terminal: one plain line per finished run instead of bars
            log(f"[{finished[0]}/{len(runs)}] " + _row_line(row, labels, cfg, row["run_id"] in scored_only))

    try:
        if not todo:
            pass
        elif ray_address:
            run_ray(cfg, todo, ray_address, on_row, bars, labels, threads, out / RUNS)
        elif workers > 1 and len(todo) > 1:
            _run_processes(
                cfg, todo, min(workers, len(todo)), out, csv_path, fields, on_row, bars, labels, threads
            )
        else:
            channel = LocalChannel(bars, labels) if progress else None
            for run in todo:
                on_row(run_one(cfg.raw, run, channel, threads, out / RUNS / run.run_id))
    except KeyboardInterrupt:
        with stop_deferred():
            bars.close()
            _collect_finished(out, csv_path, fields)
            finished = sum(r["run_id"] in wanted for r in read_results(csv_path))
        raise SweepInterrupted(finished, len(runs), csv_path) from None
    finally:
        bars.close()
    rows = [r for r in read_results(csv_path) if r["run_id"] in wanted]
    deployed = "\n" + deploy_markdown(rows, cell_keys, cfg) if cfg.deploy else ""
    (out / "summary.md").write_text(summary_markdown(rows, cell_keys, cfg) + deployed)
    plot_results(rows, cell_keys, out / "return_vs_level.png", cfg)
    if cfg.deploy:
        plot_deploy(rows, cell_keys, out / "deploy.png", cfg)
    return rows


def _todo(cfg: Config, runs: list[Run], out: Path, csv_path: Path) -> tuple[list[Run], set[str], int]:
    """The runs to work on, in plan order: those not in ``results.csv`` (to train and score), and the
    finished ones that lack a score under a ``[deploy]`` condition (or hold one made under other
    overrides of its name): those are only scored, unless their run directory holds no trained model (a
    study of an older version), and then trained again. Returns them, the ids of those only scored and
    the number trained again."""
    done = {row["run_id"]: row for row in read_results(csv_path)}
    scored_only, again = set(), set()
    if cfg.deploy:
        for r in runs:
            row, run_dir = done.get(r.run_id), out / RUNS / r.run_id
            if row is not None and (
                any(not row.get(deploy_column(name)) for name in cfg.deploy)
                or missing_conditions(run_dir, cfg.deploy)
            ):
                (scored_only if is_trained(run_dir, r) else again).add(r.run_id)
    todo = [r for r in runs if r.run_id not in done or r.run_id in scored_only | again]
    return todo, scored_only, len(again)


def _row_line(row: dict[str, Any], labels: dict[str, str], cfg: Config, scored_only: bool) -> str:
    """One finished run in a log: its setting, its score (and under each deployment condition) and the
    seconds it trained."""
    label = labels.get(row["run_id"], row["run_id"])
    own = f"score {float(row['eval_return_mean']):.1f}"
    deployed = ", ".join(f"{n} {float(row[deploy_column(n)]):.1f}" for n in cfg.deploy)
    if scored_only:
        return f"{label}: scored under [deploy] only ({own}; deployed: {deployed})"
    line = (
        f"{label}: {own} (sd {float(row['eval_return_std']):.1f} over {row['eval_episodes']} episodes), "
        f"{float(row['train_seconds']):.0f} s of training"
    )
    return line + (f"; deployed: {deployed}" if deployed else "")


def _plan_line(
    cfg: Config,
    runs: int,
    todo: int,
    csv_path: Path,
    cell_keys: list[str],
    workers: int,
    threads: int,
    ray_address: str | None,
) -> str:
    """The sweep's first line: how many runs of how many steps, how many are done, and where the rest
    run."""
    where = (
        f"on Ray at {ray_address} ({threads} CPU(s) and torch thread(s) per run)"
        if ray_address
        else f"with {workers} worker(s) x {threads} torch thread(s)"
    )
    from ..training import planned_timesteps, rollout_steps

    rollout = rollout_steps(cfg.algorithm.kwargs, cfg.env.n_envs)
    planned = planned_timesteps(cfg.algorithm.timesteps, rollout)
    budget = cfg.algorithm.timesteps
    steps = f"{planned:,} steps each" + (
        f" (the budget of {budget:,} rounded up to whole PPO rollouts of {rollout:,})"
        if planned != budget
        else ""
    )
    if any(k.startswith(("algorithm.", "env.")) for k in cell_keys):  # the budget differs per cell
        steps = "varying steps"
    return f"sweep: {runs} runs of {steps}; {runs - todo} already in {csv_path}, {todo} to run {where}"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _collect_finished(out: Path, csv_path: Path, fields: list[str], on_row: Callable | None = None) -> list:
    """Move the rows workers dropped in ``out/.finished`` into the CSV (once each); return them."""
    folder = out / _FINISHED
    if not folder.is_dir():
        return []
    rows = []
    for path in sorted(folder.glob("*.json")):
        row = json.loads(path.read_text())
        # a row already in the CSV (a kill came between its write and this unlink) is written again, the same
        (on_row or (lambda r: _save_row(csv_path, r, fields)))(row)
        rows.append(row)
        path.unlink()
    return rows


def _worker(cfg_raw: dict, tasks: Any, progress: Any, folder: str, threads: int) -> None:
    """A sweep worker process: runs queued runs until a ``None``, dropping each row in ``folder``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it terminates the workers
    while True:
        run = tasks.get()
        if run is None:
            return
        try:
            row = run_one(cfg_raw, run, progress, threads, Path(folder).parent / RUNS / run.run_id)
        except Exception:
            _write_atomic(Path(folder) / f"{run.run_id}.error", traceback.format_exc())
            return
        _write_atomic(Path(folder) / f"{run.run_id}.json", json.dumps(row))


def _stop_processes(procs: Sequence[Any], timeout: float = 3.0) -> None:
    """Terminate (SIGTERM) every live worker, then kill those still alive after ``timeout`` seconds."""
    procs = [p for p in procs if p.pid is not None]  # started ones only
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(1.0)


def _run_processes(
    cfg: Config,
    todo: list[Run],
    workers: int,
    out: Path,
    csv_path: Path,
    fields: list[str],
    on_row: Callable,
    bars: Bars,
    labels: dict[str, str],
    threads: int,
) -> None:
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("spawn")  # no forked torch/MuJoCo state in the workers
    folder = out / _FINISHED
    folder.mkdir(exist_ok=True)
    tasks = ctx.Queue()
    channel = ctx.Queue() if bars.enabled else None
    for run in todo:
        tasks.put(run)
    for _ in range(workers):
        tasks.put(None)
    procs = [
        ctx.Process(target=_worker, args=(cfg.raw, tasks, channel, str(folder), threads), name=f"sweep-{i}")
        for i in range(workers)
    ]
    remaining = {r.run_id for r in todo}
    try:
        with _sigint_blocked():  # a child started now must not die of this Ctrl-C while importing torch
            for p in procs:
                p.start()
        while remaining:
            wait([p.sentinel for p in procs], timeout=0.25)
            drain(channel, bars, labels)
            for row in _collect_finished(out, csv_path, fields, on_row):
                remaining.discard(row["run_id"])
            errors = sorted(folder.glob("*.error"))
            if errors:
                run_id = errors[0].stem
                text = errors[0].read_text()
                errors[0].unlink()
                raise RuntimeError(f"run {labels.get(run_id, run_id)} failed in a worker process:\n{text}")
            if remaining and not any(p.is_alive() for p in procs):
                for row in _collect_finished(out, csv_path, fields, on_row):
                    remaining.discard(row["run_id"])
                if remaining and stop_requested():  # a SIGTERM to the whole group reached them first
                    raise KeyboardInterrupt
                if remaining:
                    codes = [p.exitcode for p in procs]
                    raise RuntimeError(
                        f"the sweep's worker processes exited (exit codes {codes}) with {len(remaining)} "
                        "runs left; rerun to resume them"
                    )
    finally:
        with stop_deferred():
            _stop_processes(procs)
            for q in (tasks, channel):
                if q is not None:
                    q.cancel_join_thread()
                    q.close()
