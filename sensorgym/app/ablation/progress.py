"""The sweep's progress on a terminal: a tqdm bar for the sweep and one per running run, fed by the
``(run_id, steps, total)`` messages a run's callback sends (directly in this process, through a queue
from worker processes or Ray tasks)."""

from __future__ import annotations

import queue as queue_mod
from typing import Any

__all__ = ["Bars", "LocalChannel", "drain"]


class Bars:
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


class LocalChannel:
    def __init__(self, bars: Bars, labels: dict[str, str]) -> None:
        self.bars, self.labels = bars, labels

    def put(self, message: tuple[str, int, int]) -> None:
        run_id, steps, total = message
        self.bars.update(run_id, steps, total, self.labels[run_id])


def drain(channel: Any, bars: Bars, labels: dict[str, str]) -> None:
    if channel is None:
        return
    while True:
        try:
            run_id, steps, total = channel.get_nowait()
        except (queue_mod.Empty, Exception):
            return
        bars.update(run_id, steps, total, labels[run_id])
