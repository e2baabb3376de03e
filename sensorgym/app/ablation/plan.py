"""The sweep's plan: every (cell, critic type, seed) of a config's ``[sweep]``, each with a stable run id
(a hash of the whole run setting, so a finished run is recognized and skipped), the columns of
``results.csv``, and how many runs and torch threads fit on this machine.

Example:
    >>> from sensorgym.app.ablation.plan import plan_runs
    >>> from sensorgym.app.config import parse_config
    >>> cfg = parse_config({"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}},
    ...                     "sweep": {"seeds": [0], "critic": ["symmetric"]}})
    >>> [(r.critic, r.seed, len(r.run_id)) for r in plan_runs(cfg)]
    [('symmetric', 0, 12)]
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..config_values import ARM

__all__ = ["RESULT_FIELDS", "Run", "available_cores", "default_threads", "plan_runs"]


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


@dataclass(frozen=True)
class Run:
    """One run of the sweep: a cell (dotted-path overrides), a critic type and a seed."""

    run_id: str
    cell: dict[str, Any]
    critic: str
    seed: int


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
    if ARM in cell:
        return str(cell[ARM])
    return ", ".join(f"{k.split('.')[-2]}.{k.split('.')[-1]}={v}" for k, v in cell.items()) or "base"


def plan_runs(cfg: Config) -> list[Run]:
    """Every (cell, critic, seed) of the sweep, with a stable id derived from the whole run setting (the
    ``[deploy]`` conditions are not part of it: they score a run, and adding one keeps the run)."""
    base = {k: v for k, v in cfg.raw.items() if k not in ("sweep", "deploy")}
    runs = []
    for cell in cfg.sweep.cells():
        for critic in cfg.sweep.critic:
            for seed in cfg.sweep.seeds:
                key = json.dumps(
                    {"base": base, "cell": cell, "critic": critic, "seed": seed}, sort_keys=True, default=str
                )
                runs.append(Run(hashlib.sha1(key.encode()).hexdigest()[:12], dict(cell), critic, seed))
    return runs
