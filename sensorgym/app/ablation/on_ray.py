"""The sweep's runs on a Ray cluster: connecting (a missing cluster is one line naming the fix, not Ray's
30-line traceback) and running the runs as tasks, each reserving ``threads`` CPUs, with Ctrl-C keeping the
runs that finished and cancelling the rest (:func:`~sensorgym.app.ablation.run.run_sweep` calls them)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import Config
from ..signals import stop_deferred
from .plan import Run
from .progress import Bars, drain
from .task import pack_run, run_one

__all__ = ["connect_ray", "run_ray"]


def connect_ray(address: str) -> bool:
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


def run_ray(
    cfg: Config,
    todo: list[Run],
    address: str,
    on_row: Callable,
    bars: Bars,
    labels: dict[str, str],
    threads: int,
    runs_dir: Path,
) -> None:
    """Run ``todo`` as Ray tasks on the cluster :func:`connect_ray` connected to (``address``). A task
    keeps its run directory in a temporary folder of its node, which gets the run's files from
    ``runs_dir`` (a finished run to score) and sends them back with its row."""
    import ray
    from ray.util.queue import Queue

    pending: list[Any] = []
    try:
        channel = Queue() if bars.enabled else None
        task = ray.remote(num_cpus=threads)(run_one)
        pending = [
            task.remote(cfg.raw, run, channel, threads, None, pack_run(runs_dir / run.run_id)) for run in todo
        ]
        while pending:
            finished, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            drain(channel, bars, labels)
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
