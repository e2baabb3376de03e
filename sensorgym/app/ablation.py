"""``sensorgym ablate``: sweep sensor imperfection levels x critic type x seeds, resumably.

Every run trains PPO with one cell of the sweep (dotted-path overrides of the config, e.g.
``{"sensors.angle.noise": 0.05}``), one critic type and one seed, then evaluates it. Each finished run is
appended to ``results.csv`` at once; runs already in the CSV are skipped, so an interrupted sweep resumes
where it stopped. Runs go sequentially, to local worker processes (``workers``, each with ``threads``
torch threads, by default ``max(1, cores // workers)``), or to a Ray cluster (``ray_address``, each task
reserving ``threads`` CPUs, by default 1), with a progress bar for the sweep and one per running run.

Ctrl-C (SIGINT) stops a sweep within seconds: queued runs are cancelled, running workers terminated,
every finished run is kept in ``results.csv``, and :class:`SweepInterrupted` says how many are done.

The outputs answer the sweep's question: ``summary.md`` gives per level the mean and sample standard
deviation (ddof=1) over seeds for each critic, the asymmetric-minus-symmetric difference on paired seeds
with a 95% t-interval and p-value, the spread of single evaluation episodes, and one sentence saying what
the data support and how strongly; ``return_vs_level.png`` plots the same.

Example:
    >>> from sensorgym.app.ablation import plan_runs
    >>> from sensorgym.app.config import parse_config
    >>> cfg = parse_config({"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}},
    ...                     "sweep": {"seeds": [0, 1], "grid": {"sensors.a.noise": [0.0, 0.1]}}})
    >>> len(plan_runs(cfg))   # 2 levels x 2 critics x 2 seeds
    8
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import math
import os
import queue as queue_mod
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config, apply_overrides
from .signals import stop_requested

__all__ = [
    "Run",
    "SweepInterrupted",
    "available_cores",
    "default_threads",
    "paired_difference",
    "plan_runs",
    "plot_results",
    "read_results",
    "results_figure",
    "run_one",
    "run_sweep",
    "summary_markdown",
    "t_quantile",
]

RESULT_FIELDS = [
    "run_id",
    "critic",
    "seed",
    "eval_return_mean",
    "eval_return_std",
    "eval_episodes",
    "eval_returns",
    "timesteps",
    "timesteps_budget",
    "train_seconds",
    "torch_threads",
]

#: folder (inside the output directory) where worker processes drop finished rows before the CSV
_FINISHED = ".finished"


@dataclass(frozen=True)
class Run:
    """One run of the sweep: a cell (dotted-path overrides), a critic type and a seed."""

    run_id: str
    cell: dict[str, Any]
    critic: str
    seed: int


class SweepInterrupted(KeyboardInterrupt):
    """The sweep stopped on Ctrl-C: ``done`` of ``total`` runs are in ``csv_path``; rerun to resume."""

    def __init__(self, done: int, total: int, csv_path: Path) -> None:
        super().__init__(f"sweep interrupted: {done} of {total} runs in {csv_path}")
        self.done, self.total, self.csv_path = done, total, csv_path


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one).

    Example:
        >>> available_cores() >= 1
        True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_threads(workers: int, cores: int | None = None) -> int:
    """Torch intra-op threads per run when ``workers`` runs share the machine: ``max(1, cores // workers)``
    (each worker would otherwise start one thread per core, and they would fight over the cores).

    Example:
        >>> default_threads(2, cores=8), default_threads(4, cores=2), default_threads(1, cores=6)
        (4, 1, 6)
    """
    cores = available_cores() if cores is None else cores
    return max(1, cores // max(1, workers))


def _label(cell: dict[str, Any]) -> str:
    return ", ".join(f"{k.split('.')[-2]}.{k.split('.')[-1]}={v}" for k, v in cell.items()) or "base"


def plan_runs(cfg: Config) -> list[Run]:
    """Every (cell, critic, seed) of the sweep, with a stable id derived from the whole run setting."""
    base = {k: v for k, v in cfg.raw.items() if k != "sweep"}
    runs = []
    for cell in cfg.sweep.cells():
        for critic in cfg.sweep.critic:
            for seed in cfg.sweep.seeds:
                key = json.dumps(
                    {"base": base, "cell": cell, "critic": critic, "seed": seed}, sort_keys=True, default=str
                )
                runs.append(Run(hashlib.sha1(key.encode()).hexdigest()[:12], dict(cell), critic, seed))
    return runs


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

    from .config import parse_config
    from .training import config_train_kwargs, planned_timesteps, rollout_steps, train_ppo

    cfg = apply_overrides(parse_config(cfg_raw), run.cell)
    planned = planned_timesteps(cfg.algorithm.timesteps, rollout_steps(cfg.algorithm.kwargs, cfg.env.n_envs))
    callback = _progress_callback(progress, run.run_id, planned) if progress is not None else None
    with _torch_threads(threads):
        used_threads = torch.get_num_threads()
        result = train_ppo(
            cfg.env.id,
            cfg.sensors,
            critic=run.critic,
            timesteps=cfg.algorithm.timesteps,
            seed=run.seed,
            eval_episodes=cfg.algorithm.eval_episodes,
            callback=callback,
            **config_train_kwargs(cfg),
        )
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


def read_results(path: Path) -> list[dict[str, Any]]:
    """The rows of a ``results.csv`` (an empty list when it does not exist)."""
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


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
def _sigint_ignored() -> Iterator[None]:
    """Ignore further Ctrl-C while cleaning up after the first one (cleanup is bounded to seconds)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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

            with _sigint_ignored():
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
    where = (
        f"on Ray at {ray_address} ({threads} CPU(s) and torch thread(s) per run)"
        if ray_address
        else f"with {workers} worker(s) x {threads} torch thread(s)"
    )
    from .training import planned_timesteps, rollout_steps

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
    log(
        f"sweep: {len(runs)} runs of {steps}; {len(runs) - len(todo)} already in {csv_path}, "
        f"{len(todo)} to run {where}"
    )
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
        with _sigint_ignored():
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
        with _sigint_ignored():
            _stop_processes(procs)
            for q in (tasks, channel):
                if q is not None:
                    q.cancel_join_thread()
                    q.close()


def _connect_ray(address: str) -> bool:
    """Connect to (or, for ``"local"``, start) Ray; returns whether this call started it. No cluster at
    ``address`` is a :class:`~sensorgym.app.config.UserError` naming the fix (Ray's own error is a
    ``ConnectionError`` with a 30-line traceback)."""
    from .config import UserError

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
        with _sigint_ignored():
            if pending:  # keep the runs that finished, cancel the rest
                finished, rest = ray.wait(pending, num_returns=len(pending), timeout=0)
                for ref in finished:
                    with contextlib.suppress(Exception):
                        on_row(ray.get(ref, timeout=5))
                for ref in rest:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
        raise


# -- statistics --------------------------------------------------------------------------------
def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (continued fraction, Lentz's method)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _betainc(b, a, 1.0 - x)
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return math.exp(log_front) * h / a


def _t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (bisection on the CDF).

    Example:
        >>> round(t_quantile(0.975, 2), 3), round(t_quantile(0.975, 9), 3), round(t_quantile(0.025, 1), 2)
        (4.303, 2.262, -12.71)
    """
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < q:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def paired_difference(
    treatment: Sequence[float], control: Sequence[float], level: float = 0.95
) -> dict[str, float]:
    """Mean of ``treatment[i] - control[i]`` (pairs: the same seed) with a ``level`` t-interval and the
    two-sided paired t-test p-value; ``sd`` is the sample sd (ddof=1) of the differences. With one pair
    the interval and p-value are NaN.

    Example:
        >>> d = paired_difference([3.0, 5.0, 7.0], [1.0, 2.0, 3.0])   # differences 2, 3, 4
        >>> d["mean"], d["sd"], round(d["lo"], 2), round(d["hi"], 2), round(d["p"], 4), d["n"]
        (3.0, 1.0, 0.52, 5.48, 0.0351, 3)
    """
    diffs = np.asarray(treatment, float) - np.asarray(control, float)
    n = int(diffs.size)
    nan = float("nan")
    if n == 0:
        return {"n": 0, "mean": nan, "sd": nan, "lo": nan, "hi": nan, "p": nan}
    mean = float(diffs.mean())
    if n < 2:
        return {"n": 1, "mean": mean, "sd": nan, "lo": nan, "hi": nan, "p": nan}
    sd = float(diffs.std(ddof=1))
    se = sd / math.sqrt(n)
    half = t_quantile(0.5 + level / 2.0, n - 1) * se
    p = (1.0 if mean == 0.0 else 0.0) if se == 0.0 else 2.0 * (1.0 - _t_cdf(abs(mean) / se, n - 1))
    return {"n": n, "mean": mean, "sd": sd, "lo": mean - half, "hi": mean + half, "p": min(1.0, max(0.0, p))}


# -- summary -----------------------------------------------------------------------------------
@dataclass
class _Level:
    """The runs of one cell: per critic, seed -> score and seed -> episode returns."""

    cell: tuple
    scores: dict[str, dict[int, float]]
    episodes: dict[str, dict[int, list[float]]]
    episode_sd: dict[str, dict[int, float]]


def _levels(rows: list[dict[str, Any]], cell_keys: list[str]) -> list[_Level]:
    levels: dict[tuple, _Level] = {}
    for r in rows:
        cell = tuple(r.get(k, "") for k in cell_keys)
        lv = levels.setdefault(cell, _Level(cell, {}, {}, {}))
        seed = int(r["seed"])
        lv.scores.setdefault(r["critic"], {})[seed] = float(r["eval_return_mean"])
        text = str(r.get("eval_returns") or "").split()
        lv.episodes.setdefault(r["critic"], {})[seed] = [float(x) for x in text]
        with contextlib.suppress(TypeError, ValueError):
            lv.episode_sd.setdefault(r["critic"], {})[seed] = float(r["eval_return_std"])
    return list(levels.values())


def _episode_sd(level: _Level) -> tuple[float, int]:
    """The pooled within-run sd (ddof=1) of single evaluation episodes, and the episodes per run."""
    variances, sizes = [], []
    for critic, by_seed in level.episodes.items():
        for seed, xs in by_seed.items():
            if len(xs) > 1:
                variances.append(float(np.var(xs, ddof=1)))
                sizes.append(len(xs))
            elif not xs and seed in level.episode_sd.get(critic, {}):  # an older CSV: only the std column
                variances.append(level.episode_sd[critic][seed] ** 2)
    if not variances:
        return float("nan"), 0
    return math.sqrt(float(np.mean(variances))), int(np.median(sizes)) if sizes else 0


def _level_name(cell_keys: list[str], cell: tuple) -> str:
    if not cell_keys:
        return "the base setting"
    return ", ".join(f"{_readable(k)} = {_value_text(v)}" for k, v in zip(cell_keys, cell, strict=True))


def _value_text(value: Any) -> str:
    """A level's value for tables and ticks: a distribution as ``Uniform(0.05, 0.2)``, a key the cell does
    not set as ``config`` (the config's own value).

    Example:
        >>> _value_text("{'dist': 'Uniform', 'low': 0.05, 'high': 0.2}"), _value_text(""), _value_text(0.1)
        ('Uniform(0.05, 0.2)', 'config', '0.1')
    """
    import ast

    if value == "" or value is None:
        return "config"
    if isinstance(value, str) and value.startswith("{"):
        with contextlib.suppress(ValueError, SyntaxError):
            value = ast.literal_eval(value)
    if isinstance(value, dict) and "dist" in value:
        params = [value[k] for k in value if k != "dist"]
        return f"{value['dist']}({', '.join(str(p) for p in params)})"
    return str(value)


#: level labels longer than this are numbered in the figure ("cell 2"), with the number in summary.md
_LONG_LABEL = 28


def _level_labels(levels: list[Any], cell_keys: list[str]) -> tuple[list[str], bool]:
    """Each level's values as text, and whether they are too long for the figure's ticks."""
    texts = [", ".join(_value_text(v) for v in lv.cell) if cell_keys else "base" for lv in levels]
    return texts, any(len(t) > _LONG_LABEL for t in texts)


def _readable(key: str) -> str:
    """``sensors.angle.noise`` -> ``angle noise``; other dotted keys lose their first part."""
    parts = key.split(".")
    if parts[0] == "latency" and len(parts) > 1:  # latency.delay -> action delay (not a sensor's delay)
        return "action " + " ".join(p.replace("_", " ") for p in parts[1:])
    return " ".join(p.replace("_", " ") for p in parts[1:]) if len(parts) > 1 else key


def _fmt(x: float, digits: int = 1, sign: bool = False) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:+,.{digits}f}" if sign else f"{x:,.{digits}f}"


def _verdict(name: str, d: dict[str, float], episode_sd: float) -> str:
    """One plain sentence: what the paired difference supports at this level, and how strongly."""
    n = d["n"]
    if n == 0:
        return f"At {name}, no seed has both critics yet, so there is nothing to compare."
    scale = (
        f" (for scale: single evaluation episodes vary with sd {_fmt(episode_sd, 0)})"
        if (math.isfinite(episode_sd))
        else ""
    )
    if n == 1:
        return (
            f"At {name}, one seed only: asymmetric - symmetric = {_fmt(d['mean'], sign=True)}{scale}; one "
            "seed cannot tell a difference from seed-to-seed luck, so this is anecdotal: run more seeds."
        )
    ci = (
        f"95% CI {_fmt(d['lo'], sign=True)} to {_fmt(d['hi'], sign=True)}, p = {d['p']:.2g}, {n} paired seeds"
    )
    if d["lo"] > 0 or d["hi"] < 0:
        better = "higher" if d["mean"] > 0 else "lower"
        effect = "helps" if d["mean"] > 0 else "hurts"
        strength = (
            "strong evidence"
            if d["p"] < 0.01 and n >= 5
            else (
                "clear evidence, though from few seeds"
                if d["p"] < 0.01
                else "moderate evidence (from few seeds)"
            )
        )
        return (
            f"At {name}, the asymmetric critic scores {better} by {_fmt(abs(d['mean']))} ({ci}): "
            f"{strength} that it {effect} here{scale}."
        )
    if d["p"] < 0.1:
        better = "higher" if d["mean"] > 0 else "lower"
        return (
            f"At {name}, only a weak hint that the asymmetric critic scores {better} "
            f"(asymmetric - symmetric = {_fmt(d['mean'], sign=True)}, {ci}): the interval still includes 0, "
            f"so the data do not show a difference at the 5% level; more seeds would tell{scale}."
        )
    return (
        f"At {name}, no clear difference: asymmetric - symmetric = {_fmt(d['mean'], sign=True)} ({ci}); "
        f"the data are consistent with anything from {_fmt(d['lo'], sign=True)} to "
        f"{_fmt(d['hi'], sign=True)}, so they neither show that it helps nor that it does not{scale}."
    )


def _steps_sentence(rows: list[dict[str, Any]], cfg: Config) -> str:
    from .training import planned_timesteps, rollout_steps

    budget = cfg.algorithm.timesteps
    trained = sorted({int(float(r["timesteps"])) for r in rows if r.get("timesteps")})
    rollout = rollout_steps(cfg.algorithm.kwargs, cfg.env.n_envs)
    n_steps = rollout // cfg.env.n_envs
    if not trained:
        trained = [planned_timesteps(budget, rollout)]
    got = f"{trained[0]:,}" if len(trained) == 1 else f"{trained[0]:,} to {trained[-1]:,}"
    if trained == [budget]:
        return f"each run trained {got} steps"
    return (
        f"each run trained {got} steps: the budget of {budget:,} rounded up to whole PPO rollouts of "
        f"{cfg.env.n_envs} envs x {n_steps:,} steps = {rollout:,} steps"
    )


def summary_markdown(rows: list[dict[str, Any]], cell_keys: list[str], cfg: Config) -> str:
    """The study's answer, per level: each critic's mean ± sample sd over seeds, the asymmetric-minus-
    symmetric difference on paired seeds with a 95% t-interval and p-value, the episode-level spread,
    and one sentence saying what the data support and how strongly."""
    levels = _levels(rows, cell_keys)
    critics = list(cfg.sweep.critic)
    both = "symmetric" in critics and "asymmetric" in critics
    varied = ", ".join(cell_keys) or "nothing (one setting)"
    seeds = sorted({int(r["seed"]) for r in rows})
    episodes = sorted({int(float(r["eval_episodes"])) for r in rows if r.get("eval_episodes")})
    ep = f"{episodes[0]}" if len(episodes) == 1 else "/".join(map(str, episodes)) if episodes else "?"
    title = (
        f"# Does an asymmetric critic help? {cfg.env.id}, varying {varied}"
        if both
        else f"# Ablation: {cfg.env.id}, varying {varied}"
    )
    lines = [
        title,
        "",
        f"{len(levels)} level(s) x {len(critics)} critic type(s) x {len(seeds)} seed(s) ({seeds}) = "
        f"{len(rows)} "
        f"runs; {_steps_sentence(rows, cfg)}. A run's score is the mean return of its {ep} evaluation "
        "episodes (deterministic policy, evaluation envs seeded apart from training).",
        "",
    ]
    diffs = []
    for lv in levels:
        sym, asym = lv.scores.get("symmetric", {}), lv.scores.get("asymmetric", {})
        common = sorted(set(sym) & set(asym))
        diffs.append(paired_difference([asym[s] for s in common], [sym[s] for s in common]))
    if both:
        lines += ["## Answer", ""]
        for lv, d in zip(levels, diffs, strict=True):
            lines.append(f"- {_verdict(_level_name(cell_keys, lv.cell), d, _episode_sd(lv)[0])}")
        lines.append("")
    head = [
        ", ".join(_readable(k) for k in cell_keys) or "setting",
        *(f"{c}: mean ± sd (seeds)" for c in critics),
    ]
    if both:
        head += ["asymmetric - symmetric, paired [95% CI]", "p"]
    head += ["episode sd"]
    lines += ["## Scores per level", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    texts, numbered = _level_labels(levels, cell_keys)
    for n, (lv, d) in enumerate(zip(levels, diffs, strict=True)):
        cells = [f"cell {n + 1}: {texts[n]}" if numbered else texts[n]]
        for c in critics:
            xs = list(lv.scores.get(c, {}).values())
            cells.append(
                f"{_fmt(float(np.mean(xs)))} ± "
                f"{_fmt(float(np.std(xs, ddof=1)) if len(xs) > 1 else math.nan)} "
                f"({len(xs)})"
                if xs
                else "-"
            )
        if both:
            ci = f" [{_fmt(d['lo'], sign=True)}, {_fmt(d['hi'], sign=True)}]" if d["n"] > 1 else ""
            cells += [f"{_fmt(d['mean'], sign=True)}{ci}", f"{d['p']:.2g}" if d["n"] > 1 else "n/a"]
        cells.append(_fmt(_episode_sd(lv)[0]))
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "How to read it: "
        + (", ".join(f"*{_readable(k)}* is `{k}`" for k in cell_keys) or "one setting")
        + "; *sd* is the sample standard deviation over seeds (ddof=1); the paired difference compares "
        "the two "
        "critics on the same seeds (same initial weights' seed, same training and evaluation envs), with a "
        "Student-t 95% confidence interval over seeds and the two-sided paired t-test p-value; "
        "*episode sd* is "
        "the pooled standard deviation of single evaluation episodes within a run (how much one episode's "
        "return varies; a run's score averages its episodes). Few seeds give wide intervals: add seeds "
        "(`--seeds 0 1 2 3 4 5`) to narrow them; finished runs are reused.",
    ]
    return "\n".join(lines) + "\n"


def _as_number(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _ci_half(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return 0.0
    return t_quantile(0.975, len(xs) - 1) * float(np.std(xs, ddof=1)) / math.sqrt(len(xs))


def _sane_ylim(ax: Any, values: list[float], min_span: float, include: float | None = None) -> None:
    """Limits around ``values`` (and ``include``), at least ``min_span`` tall, so that a difference that is
    small next to the returns is not blown up to fill the panel."""
    vals = [v for v in values if math.isfinite(v)] + ([include] if include is not None else [])
    if not vals:
        return
    lo, hi = min(vals), max(vals)
    span = max(hi - lo, min_span, 1e-9)
    mid = 0.5 * (lo + hi)
    ax.set_ylim(mid - 0.55 * span, mid + 0.55 * span)


def plot_results(
    rows: list[dict[str, Any]], cell_keys: list[str], path: str | Path, cfg: Config | None = None
) -> Path:
    """Save :func:`results_figure` as a PNG at ``path``."""
    import matplotlib.pyplot as plt

    fig = results_figure(rows, cell_keys, cfg)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def results_figure(rows: list[dict[str, Any]], cell_keys: list[str], cfg: Config | None = None) -> Any:
    """Score vs the swept level per critic type (mean over seeds, 95% t-interval bars, single seeds as
    dots) and, with both critics, the asymmetric-minus-symmetric difference on paired seeds; with a title,
    a caption saying what the bars are, readable axis labels, and y ranges that keep small differences
    small. Returns the matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = _levels(rows, cell_keys)
    numeric = len(cell_keys) == 1 and all(_as_number(lv.cell[0]) is not None for lv in levels)
    if numeric:
        levels.sort(key=lambda lv: _as_number(lv.cell[0]))
    xs = np.arange(len(levels), dtype=float)
    ticks, numbered = _level_labels(levels, cell_keys)
    xlabel = ", ".join(f"{_readable(k)} ({k})" for k in cell_keys) or "setting"
    if numbered:  # long settings (several keys, distributions): numbered, spelled out in summary.md
        ticks = [f"cell {n + 1}" for n in range(len(levels))]
        xlabel = "sweep cell (summary.md lists each cell's settings)"
    critics = [c for c in ("symmetric", "asymmetric") if any(c in lv.scores for lv in levels)]
    critics += sorted({c for lv in levels for c in lv.scores} - set(critics))
    both = {"symmetric", "asymmetric"} <= set(critics)
    n_seeds = sorted({len(lv.scores.get(c, {})) for lv in levels for c in critics})
    seeds_text = f"{n_seeds[0]}" if len(n_seeds) == 1 else f"{n_seeds[0]}-{n_seeds[-1]}"
    fig, axes = plt.subplots(1, 2 if both else 1, figsize=(11 if both else 7, 4.6), squeeze=False)
    ax = axes[0, 0]
    all_values: list[float] = []
    for i, critic in enumerate(critics):
        offset = (i - (len(critics) - 1) / 2) * 0.12
        mx, my, me = [], [], []
        for x, lv in zip(xs, levels, strict=True):
            scores = list(lv.scores.get(critic, {}).values())
            if not scores:
                continue
            mx.append(x + offset)
            my.append(float(np.mean(scores)))
            me.append(_ci_half(scores))
            ax.scatter([x + offset] * len(scores), scores, s=12, alpha=0.35, color=f"C{i}", zorder=2)
            all_values += [*scores, my[-1] - me[-1], my[-1] + me[-1]]
        ax.errorbar(mx, my, yerr=me, marker="o", capsize=4, color=f"C{i}", label=f"{critic} critic", zorder=3)
    scale = max((abs(v) for v in all_values), default=1.0)
    _sane_ylim(ax, all_values, min_span=0.25 * scale)
    ax.set_xticks(xs)
    ax.set_xticklabels(ticks, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("score: mean evaluation return")
    ax.set_title("score per critic type", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, title=f"mean of {seeds_text} seeds,\nbars: 95% CI", title_fontsize=8)
    if both:
        ax2 = axes[0, 1]
        vals: list[float] = []
        for x, lv in zip(xs, levels, strict=True):
            sym, asym = lv.scores.get("symmetric", {}), lv.scores.get("asymmetric", {})
            common = sorted(set(sym) & set(asym))
            d = paired_difference([asym[s] for s in common], [sym[s] for s in common])
            if d["n"] == 0:
                continue
            single = [asym[s] - sym[s] for s in common]
            ax2.scatter([x] * len(single), single, s=12, alpha=0.35, color="C2", zorder=2)
            err = [[d["mean"] - d["lo"]], [d["hi"] - d["mean"]]] if d["n"] > 1 else None
            ax2.errorbar([x], [d["mean"]], yerr=err, marker="s", capsize=4, color="C2", zorder=3)
            vals += single + [d["mean"]] + ([d["lo"], d["hi"]] if d["n"] > 1 else [])
        ax2.axhline(0.0, color="black", lw=1, ls="--", label="no difference")
        _sane_ylim(ax2, vals, min_span=0.25 * scale, include=0.0)
        ax2.set_xticks(xs)
        ax2.set_xticklabels(ticks, fontsize=9)
        ax2.set_xlabel(xlabel)
        ax2.set_ylabel("asymmetric - symmetric (same seed)")
        ax2.set_title("difference on paired seeds (> 0: asymmetric better)", fontsize=10)
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=8, loc="best")
    env_id = cfg.env.id if cfg is not None else ""
    steps = ""
    if cfg is not None and rows:
        trained = sorted({int(float(r["timesteps"])) for r in rows if r.get("timesteps")})
        steps = f", {trained[0]:,} training steps per run" if len(trained) == 1 else ""
    fig.suptitle(
        ("Does an asymmetric critic help? " if both else "Ablation: ") + f"{env_id}{steps}", fontsize=12
    )
    note = (
        f"Points: mean over {seeds_text} seeds of each run's score (mean return of its evaluation episodes); "
        "bars: 95% t-interval of that mean; faint dots: single seeds."
    )
    if not both:  # one panel: the note on two lines, so that it fits the narrower figure
        note = note.replace("); ", ");\n", 1)
    fig.text(0.5, 0.01, note, ha="center", fontsize=8)
    fig.tight_layout(rect=(0, 0.04 if both else 0.07, 1, 0.95))
    return fig
