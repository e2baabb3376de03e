"""``sensorgym ablate``: sweep sensor imperfection levels x critic type x seeds, resumably.

Every run trains PPO with one cell of the sweep (dotted-path overrides of the config, e.g.
``{"sensors.angle.noise": 0.05}``), one critic type and one seed, then evaluates it. Each finished run is
appended to ``results.csv`` at once; runs already in the CSV are skipped, so an interrupted sweep resumes
where it stopped. Runs go sequentially, to local worker processes (``workers``), or to a Ray cluster
(``ray_address``), with a progress bar for the sweep and one per running run. The summary is
``summary.md`` (mean ± std over seeds per cell and critic) and ``return_vs_level.png``.

Example:
    >>> from sensorgym.ablation import plan_runs
    >>> from sensorgym.config import parse_config
    >>> cfg = parse_config({"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}},
    ...                     "sweep": {"seeds": [0, 1], "grid": {"sensors.a.noise": [0.0, 0.1]}}})
    >>> len(plan_runs(cfg))   # 2 levels x 2 critics x 2 seeds
    8
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import queue as queue_mod
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import Config, apply_overrides

__all__ = ["Run", "plan_runs", "plot_results", "read_results", "run_one", "run_sweep", "summary_markdown"]

RESULT_FIELDS = [
    "run_id",
    "critic",
    "seed",
    "eval_return_mean",
    "eval_return_std",
    "timesteps",
    "train_seconds",
]


@dataclass(frozen=True)
class Run:
    run_id: str
    cell: dict[str, Any]
    critic: str
    seed: int


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


def run_one(cfg_raw: dict, run: Run, progress: Any = None) -> dict[str, Any]:
    """Train and evaluate one run (in this process, a worker process or a Ray task)."""
    import torch

    from .config import parse_config
    from .training import _config_kwargs, train_ppo

    torch.set_num_threads(1)  # one core per run: the sweep parallelises across runs
    cfg = apply_overrides(parse_config(cfg_raw), run.cell)
    callback = _progress_callback(progress, run.run_id, cfg.algorithm.timesteps) if progress else None
    result = train_ppo(
        cfg.env.id,
        cfg.sensors,
        critic=run.critic,
        timesteps=cfg.algorithm.timesteps,
        seed=run.seed,
        eval_episodes=cfg.algorithm.eval_episodes,
        callback=callback,
        **_config_kwargs(cfg),
    )
    row = {"run_id": run.run_id, "critic": run.critic, "seed": run.seed, **run.cell}
    row.update({k: result[k] for k in ("eval_return_mean", "eval_return_std", "timesteps", "train_seconds")})
    return row


def _progress_callback(channel: Any, run_id: str, total: int) -> Any:
    from stable_baselines3.common.callbacks import BaseCallback

    class Report(BaseCallback):
        def _on_step(self) -> bool:
            if self.n_calls % 50 == 0:
                channel.put((run_id, self.num_timesteps, total))
            return True

    return Report()


def read_results(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open() as f:
        return list(csv.DictReader(f))


def _append(path: Path, row: dict[str, Any], fields: list[str]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
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
            self.sweep.close()


def run_sweep(
    cfg: Config,
    out: str | Path,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run every missing run of the sweep, then write ``summary.md`` and ``return_vs_level.png``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(cfg.raw, indent=2, default=str))
    csv_path = out / "results.csv"
    runs = plan_runs(cfg)
    cell_keys = sorted({k for r in runs for k in r.cell})
    fields = ["run_id", "critic", "seed", *cell_keys, *RESULT_FIELDS[3:]]
    done = {row["run_id"] for row in read_results(csv_path)}
    todo = [r for r in runs if r.run_id not in done]
    log(
        f"sweep: {len(runs)} runs ({len(runs) - len(todo)} already in {csv_path}), {len(todo)} to run"
        + (f" on Ray at {ray_address}" if ray_address else f" with {max(1, workers)} worker(s)")
    )
    labels = {r.run_id: f"{r.critic} s{r.seed} {_label(r.cell)}" for r in runs}
    bars = _Bars(len(runs), len(runs) - len(todo), progress)
    try:
        if ray_address:
            _run_ray(
                cfg,
                todo,
                ray_address,
                lambda row: (_append(csv_path, row, fields), bars.finish(row["run_id"])),
                bars,
                labels,
            )
        elif workers > 1:
            _run_processes(
                cfg,
                todo,
                workers,
                lambda row: (_append(csv_path, row, fields), bars.finish(row["run_id"])),
                bars,
                labels,
            )
        else:
            channel = _LocalChannel(bars, labels) if progress else None
            for run in todo:
                row = run_one(cfg.raw, run, channel)
                _append(csv_path, row, fields)
                bars.finish(run.run_id)
    finally:
        bars.close()
    rows = [r for r in read_results(csv_path) if r["run_id"] in {x.run_id for x in runs}]
    (out / "summary.md").write_text(summary_markdown(rows, cell_keys, cfg))
    plot_results(rows, cell_keys, out / "return_vs_level.png")
    return rows


class _LocalChannel:
    def __init__(self, bars: _Bars, labels: dict[str, str]) -> None:
        self.bars, self.labels = bars, labels

    def put(self, message: tuple[str, int, int]) -> None:
        run_id, steps, total = message
        self.bars.update(run_id, steps, total, self.labels[run_id])


def _drain(channel: Any, bars: _Bars, labels: dict[str, str]) -> None:
    while True:
        try:
            run_id, steps, total = channel.get_nowait()
        except (queue_mod.Empty, Exception):
            return
        bars.update(run_id, steps, total, labels[run_id])


def _run_processes(
    cfg: Config, todo: list[Run], workers: int, on_row: Callable, bars: _Bars, labels: dict[str, str]
) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no forked torch/MuJoCo state in the workers
    with ctx.Manager() as manager:
        channel = manager.Queue()
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            pending = {pool.submit(run_one, cfg.raw, run, channel) for run in todo}
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                _drain(channel, bars, labels)
                for f in finished:
                    on_row(f.result())


def _run_ray(
    cfg: Config, todo: list[Run], address: str, on_row: Callable, bars: _Bars, labels: dict[str, str]
) -> None:
    try:
        import ray
        from ray.util.queue import Queue
    except ImportError as e:
        raise RuntimeError("--ray needs Ray. Fix: pip install 'sensorgym[ray]'.") from e
    ray.init(
        address=None if address == "local" else address,
        ignore_reinit_error=True,
        log_to_driver=False,
        include_dashboard=False,
    )
    channel = Queue()
    task = ray.remote(num_cpus=1)(run_one)
    pending = [task.remote(cfg.raw, run, channel) for run in todo]
    while pending:
        finished, pending = ray.wait(pending, num_returns=1, timeout=0.5)
        _drain(channel, bars, labels)
        for ref in finished:
            on_row(ray.get(ref))


def _grouped(rows: list[dict[str, Any]], cell_keys: list[str]) -> dict[tuple, dict[str, list[float]]]:
    groups: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        cell = tuple(r.get(k, "") for k in cell_keys)
        groups.setdefault(cell, {}).setdefault(r["critic"], []).append(float(r["eval_return_mean"]))
    return groups


def summary_markdown(rows: list[dict[str, Any]], cell_keys: list[str], cfg: Config) -> str:
    """Mean ± std of the evaluation return over seeds, per cell and critic type."""
    groups = _grouped(rows, cell_keys)
    critics = list(cfg.sweep.critic)
    head = [*(k for k in cell_keys), *critics] if cell_keys else ["setting", *critics]
    lines = [
        f"# Ablation: {cfg.env.id}, {cfg.algorithm.timesteps} steps per run, seeds {cfg.sweep.seeds}",
        "",
        "Mean final evaluation return ± standard deviation over seeds (number of seeds).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for cell, by_critic in groups.items():
        vals = []
        for c in critics:
            xs = by_critic.get(c, [])
            vals.append(f"{np.mean(xs):.1f} ± {np.std(xs):.1f} ({len(xs)})" if xs else "-")
        lead = list(cell) if cell_keys else ["base"]
        lines.append("| " + " | ".join(str(x) for x in [*lead, *vals]) + " |")
    return "\n".join(lines) + "\n"


def _as_number(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def plot_results(rows: list[dict[str, Any]], cell_keys: list[str], path: str | Path) -> Path:
    """Return vs the swept level, one line per critic type, error bars = std over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _grouped(rows, cell_keys)
    cells = list(groups)
    numeric = len(cell_keys) == 1 and all(_as_number(c[0]) is not None for c in cells)
    xs = [_as_number(c[0]) for c in cells] if numeric else list(range(len(cells)))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    critics = sorted({c for g in groups.values() for c in g})
    for critic in critics:
        pts = [(x, groups[c][critic]) for x, c in zip(xs, cells, strict=True) if critic in groups[c]]
        pts.sort(key=lambda p: p[0])
        ax.errorbar(
            [p[0] for p in pts],
            [np.mean(p[1]) for p in pts],
            yerr=[np.std(p[1]) for p in pts],
            marker="o",
            capsize=4,
            label=f"{critic} critic",
        )
    if numeric:
        ax.set_xlabel(cell_keys[0])
    else:
        ax.set_xticks(xs)
        ax.set_xticklabels([", ".join(str(v) for v in c) or "base" for c in cells], rotation=20, fontsize=8)
        ax.set_xlabel(", ".join(cell_keys) or "setting")
    ax.set_ylabel("evaluation return")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
