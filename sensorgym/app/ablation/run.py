"""Running a sweep: every missing run of the plan, in this process, in local worker processes or as Ray
tasks, each finished run appended to ``results.csv`` at once (a resumed sweep skips it), with progress
bars on a terminal and a line per finished run in a log.

Ctrl-C (SIGINT), or SIGTERM under :func:`~sensorgym.app.signals.sigterm_as_sigint`, stops a sweep within
seconds: queued runs are cancelled, running workers terminated, every finished run is kept in
``results.csv``, and :class:`SweepInterrupted` says how many are done. Then ``summary.md`` and
``return_vs_level.png`` are written (:mod:`~sensorgym.app.ablation.report`).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import queue as queue_mod
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..config import Config, apply_overrides
from ..outdir import read_results
from ..signals import stop_deferred, stop_requested
from .plan import RESULT_FIELDS, Run, _label, default_threads, plan_runs
from .report import plot_results, summary_markdown

__all__ = ["SweepInterrupted", "read_results", "run_one", "run_sweep"]


#: folder (inside the output directory) where worker processes drop finished rows before the CSV
_FINISHED = ".finished"


class SweepInterrupted(KeyboardInterrupt):
    """The sweep stopped on Ctrl-C: ``done`` of ``total`` runs are in ``csv_path``; rerun to resume."""

    def __init__(self, done: int, total: int, csv_path: Path) -> None:
        super().__init__(f"sweep interrupted: {done} of {total} runs in {csv_path}")
        self.done, self.total, self.csv_path = done, total, csv_path


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` torch intra-op threads, restoring the previous number afterwards."""
    import torch

    if threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run_one(cfg_raw: dict, run: Run, progress: Any = None, threads: int | None = None) -> dict[str, Any]:
    """Train and evaluate one run (in this process, a worker process or a Ray task) with ``threads``
    torch intra-op threads (``None``: leave the process's setting). Returns its ``results.csv`` row."""
    import torch

    from ..config import parse_config
    from ..training import planned_timesteps, rollout_steps, train_ppo

    cfg = apply_overrides(parse_config(cfg_raw), run.cell)
    planned = planned_timesteps(cfg.algorithm.timesteps, rollout_steps(cfg.algorithm.kwargs, cfg.env.n_envs))
    callback = _progress_callback(progress, run.run_id, planned) if progress is not None else None
    with _torch_threads(threads):
        used_threads = torch.get_num_threads()
        # the run's critic and seed; no learning curve (a sweep scores each run once, at its end)
        result = train_ppo(cfg, critic=run.critic, seed=run.seed, eval_every=0, callback=callback)
    row: dict[str, Any] = {"run_id": run.run_id, "critic": run.critic, "seed": run.seed, **run.cell}
    row.update(
        {
            "eval_return_mean": result["eval_return_mean"],
            "eval_return_std": result["eval_return_std"],
            "eval_episodes": result["eval_episodes"],
            "eval_returns": " ".join(f"{x:.6g}" for x in result["eval_returns"]),
            "timesteps": result["timesteps"],
            "timesteps_budget": result["timesteps_budget"],
            "train_seconds": result["train_seconds"],
            "torch_threads": used_threads,
        }
    )
    return row


def _progress_callback(channel: Any, run_id: str, total: int) -> Any:
    from stable_baselines3.common.callbacks import BaseCallback

    class Report(BaseCallback):
        def _on_step(self) -> bool:
            if self.n_calls % 50 == 0:
                channel.put((run_id, self.num_timesteps, total))
            return True

        def _on_training_end(self) -> None:
            channel.put((run_id, self.num_timesteps, total))

    return Report()


def _append(path: Path, row: dict[str, Any], fields: list[str]) -> None:
    """Append one row. A CSV whose header lacks some of ``fields`` (another sweep of the same config, or an
    older version) is rewritten with the union of both headers, its own columns first: a rewrite never
    drops a column, so the rows already there keep every value (a key a row does not set stays empty,
    which the summary reads as the config's own value)."""
    header: list[str] = []
    if path.exists():
        with path.open() as f:
            header = next(csv.reader(f), [])
    columns = header + [k for k in fields if k not in header] if header else list(fields)
    if header and columns != header:
        rows = read_results(path)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)  # a kill mid-rewrite leaves the old file whole
    new = not header
    with path.open("a" if header else "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


class _Bars:
    """A bar for the sweep and one per running run (tqdm), fed by progress messages."""

    def __init__(self, total: int, done: int, enabled: bool) -> None:
        self.enabled = enabled
        self.runs: dict[str, Any] = {}
        if enabled:
            from tqdm.auto import tqdm

            self._tqdm = tqdm
            self.sweep = tqdm(total=total, initial=done, desc="sweep", unit="run", position=0)

    def update(self, run_id: str, steps: int, total: int, label: str) -> None:
        if not self.enabled:
            return
        bar = self.runs.get(run_id)
        if bar is None:
            bar = self.runs[run_id] = self._tqdm(
                total=total, desc=label[:40], unit="step", leave=False, position=len(self.runs) + 1
            )
        bar.update(steps - bar.n)

    def finish(self, run_id: str) -> None:
        if not self.enabled:
            return
        bar = self.runs.pop(run_id, None)
        if bar is not None:
            bar.close()
        self.sweep.update(1)

    def close(self) -> None:
        if self.enabled:
            for bar in self.runs.values():
                bar.close()
            self.runs.clear()
            self.sweep.close()


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
    runs = plan_runs(cfg)
    # before anything is written: no cluster there is a one-line mistake, not a half-written study
    ray_started = _connect_ray(ray_address) if ray_address else False
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
    fields = ["run_id", "critic", "seed", *cell_keys, *RESULT_FIELDS[3:]]
    wanted = {r.run_id for r in runs}
    _collect_finished(out, csv_path, fields)  # rows a killed sweep's workers finished
    done = {row["run_id"] for row in read_results(csv_path)}
    todo = [r for r in runs if r.run_id not in done]
    workers = max(1, workers)
    if threads is None:
        threads = 1 if ray_address else default_threads(min(workers, max(1, len(todo))))
    log(_plan_line(cfg, len(runs), len(todo), csv_path, cell_keys, workers, threads, ray_address))
    labels = {r.run_id: f"{r.critic} s{r.seed} {_label(r.cell)}" for r in runs}
    bars = _Bars(len(runs), len(runs) - len(todo), progress)
    finished = [len(runs) - len(todo)]

    def on_row(row: dict[str, Any]) -> None:
        _append(csv_path, row, fields)
        bars.finish(row["run_id"])
        finished[0] += 1
        if not progress:  # a log, not a terminal: one plain line per finished run instead of bars
            log(
                f"[{finished[0]}/{len(runs)}] {labels.get(row['run_id'], row['run_id'])}: score "
                f"{float(row['eval_return_mean']):.1f} (sd {float(row['eval_return_std']):.1f} over "
                f"{row['eval_episodes']} episodes), {float(row['train_seconds']):.0f} s of training"
            )

    try:
        if not todo:
            pass
        elif ray_address:
            _run_ray(cfg, todo, ray_address, on_row, bars, labels, threads)
        elif workers > 1 and len(todo) > 1:
            _run_processes(
                cfg, todo, min(workers, len(todo)), out, csv_path, fields, on_row, bars, labels, threads
            )
        else:
            channel = _LocalChannel(bars, labels) if progress else None
            for run in todo:
                on_row(run_one(cfg.raw, run, channel, threads))
    except KeyboardInterrupt:
        with stop_deferred():
            bars.close()
            _collect_finished(out, csv_path, fields)
            finished = sum(r["run_id"] in wanted for r in read_results(csv_path))
        raise SweepInterrupted(finished, len(runs), csv_path) from None
    finally:
        bars.close()
    rows = [r for r in read_results(csv_path) if r["run_id"] in wanted]
    (out / "summary.md").write_text(summary_markdown(rows, cell_keys, cfg))
    plot_results(rows, cell_keys, out / "return_vs_level.png", cfg)
    return rows


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


class _LocalChannel:
    def __init__(self, bars: _Bars, labels: dict[str, str]) -> None:
        self.bars, self.labels = bars, labels

    def put(self, message: tuple[str, int, int]) -> None:
        run_id, steps, total = message
        self.bars.update(run_id, steps, total, self.labels[run_id])


def _drain(channel: Any, bars: _Bars, labels: dict[str, str]) -> None:
    if channel is None:
        return
    while True:
        try:
            run_id, steps, total = channel.get_nowait()
        except (queue_mod.Empty, Exception):
            return
        bars.update(run_id, steps, total, labels[run_id])


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _collect_finished(out: Path, csv_path: Path, fields: list[str], on_row: Callable | None = None) -> list:
    """Move the rows workers dropped in ``out/.finished`` into the CSV (once each); return them."""
    folder = out / _FINISHED
    if not folder.is_dir():
        return []
    known = {r["run_id"] for r in read_results(csv_path)}
    rows = []
    for path in sorted(folder.glob("*.json")):
        row = json.loads(path.read_text())
        if row["run_id"] not in known:
            (on_row or (lambda r: _append(csv_path, r, fields)))(row)
            known.add(row["run_id"])
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
            row = run_one(cfg_raw, run, progress, threads)
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
    bars: _Bars,
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
            _drain(channel, bars, labels)
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


def _connect_ray(address: str) -> bool:
    """Connect to (or, for ``"local"``, start) Ray; returns whether this call started it. No cluster at
    ``address`` is a :class:`~sensorgym.app.config.UserError` naming the fix (Ray's own error is a
    ``ConnectionError`` with a 30-line traceback)."""
    from ..config import UserError

    try:
        import ray
    except ImportError:
        raise UserError(
            '--ray needs Ray, which is not installed. Fix: pip install "sensorgym[ray]".'
        ) from None
    if ray.is_initialized():
        return False
    try:
        ray.init(
            address=None if address == "local" else address,
            ignore_reinit_error=True,
            log_to_driver=False,
            include_dashboard=False,
        )
    except ConnectionError as e:
        first = " ".join(str(e).split(". ")[0].split())
        raise UserError(
            f"--ray {address}: no Ray cluster to connect to ({first}). Fix: start one (ray start --head) "
            "or pass its address (ray://host:10001), or run here: --ray local, or --workers N without --ray."
        ) from None
    return True


def _run_ray(
    cfg: Config,
    todo: list[Run],
    address: str,
    on_row: Callable,
    bars: _Bars,
    labels: dict[str, str],
    threads: int,
) -> None:
    """Run ``todo`` as Ray tasks on the cluster :func:`_connect_ray` connected to (``address``)."""
    import ray
    from ray.util.queue import Queue

    pending: list[Any] = []
    try:
        channel = Queue() if bars.enabled else None
        task = ray.remote(num_cpus=threads)(run_one)
        pending = [task.remote(cfg.raw, run, channel, threads) for run in todo]
        while pending:
            finished, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            _drain(channel, bars, labels)
            for ref in finished:
                on_row(ray.get(ref))
    except KeyboardInterrupt:
        with stop_deferred():
            if pending:  # keep the runs that finished, cancel the rest
                finished, rest = ray.wait(pending, num_returns=len(pending), timeout=0)
                for ref in finished:
                    with contextlib.suppress(Exception):
                        on_row(ray.get(ref, timeout=5))
                for ref in rest:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
        raise
