"""What :func:`~sensorgym.app.training.train_ppo` hooks into Stable-Baselines3 (besides its PPO subclass,
which calls a hook right after each update): the checkpoint written atomically there
(:class:`CheckpointAfterUpdate`), the callbacks that stop training, show progress and take the learning
curve, and the Ctrl-C handler that turns the first SIGINT into a stop at the next env step.

Example:
    >>> import threading
    >>> stop = threading.Event()
    >>> with first_sigint_sets(stop):
    ...     pass
    >>> stop.is_set()
    False
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..integrations.sb3_checkpoint import save_checkpoint

__all__ = [
    "CheckpointAfterUpdate",
    "TrainingClock",
    "eval_callback",
    "first_sigint_sets",
    "normalized",
    "progress_callback",
    "recover_checkpoint",
    "save_checkpoint_atomically",
    "stop_callback",
]


@contextlib.contextmanager
def first_sigint_sets(event: threading.Event) -> Iterator[None]:
    """While active (main thread only): the first SIGINT sets ``event`` (training stops at its next env
    step), a second one raises ``KeyboardInterrupt`` at once. (SIGTERM does the same under
    :func:`sensorgym.app.signals.sigterm_as_sigint`.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if event.is_set():
            raise KeyboardInterrupt
        event.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def recover_checkpoint(ckpt: Path) -> None:
    """Finish a checkpoint swap that a kill cut short (see :func:`save_checkpoint_atomically`)."""
    old, tmp = ckpt.with_name(ckpt.name + ".old"), ckpt.with_name(ckpt.name + ".tmp")
    if not ckpt.exists() and old.exists():
        os.replace(old, ckpt)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)


def save_checkpoint_atomically(ckpt: Path, model: Any, env: Any, progress: dict[str, Any]) -> None:
    """Write the checkpoint into ``<ckpt>.tmp`` and swap it in, so that a kill (SIGKILL, a power cut)
    while writing leaves the previous checkpoint whole, never a mix of two."""
    tmp, old = ckpt.with_name(ckpt.name + ".tmp"), ckpt.with_name(ckpt.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    save_checkpoint(tmp, model, env)
    (tmp / "progress.json").write_text(json.dumps(progress))
    if ckpt.exists():
        os.replace(ckpt, old)
    os.replace(tmp, ckpt)
    shutil.rmtree(old, ignore_errors=True)


def stop_callback(event: threading.Event) -> Any:
    """An SB3 callback that ends training at the next env step once ``event`` is set, leaving the model's
    last observation consistent with the envs (so the checkpoint written at training end resumes)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class StopOnEvent(BaseCallback):
        def _on_step(self) -> bool:
            if not event.is_set():
                return True
            # SB3 returns before storing this step's observation; store it so model and envs agree
            if "new_obs" in self.locals and "dones" in self.locals:
                self.model._last_obs = self.locals["new_obs"]
                self.model._last_episode_starts = self.locals["dones"]
            return False

    return StopOnEvent()


def progress_callback(
    total: int, log: Callable[[str], None] | None = None, epochs: int = 10, episodes: int = 0
) -> Any:
    """A tqdm bar over the steps PPO will actually train (``total``: the budget rounded up to rollouts);
    with ``log`` (output that is not a terminal, where a bar's redraws would fill a log with control
    codes) one plain line per tenth of the run instead. Once every step is collected it says what still
    runs: the last update (``epochs`` passes over the rollout) and the checkpoint, then the final
    evaluation of ``episodes`` episodes (the default run sat at "100%" for about 110 s on a busy machine
    without a word)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Progress(BaseCallback):
        def _on_training_start(self) -> None:
            self.start = time.perf_counter()
            self.collected: float | None = None
            if log is None:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, initial=self.num_timesteps, unit="step", desc="training")
            else:
                self.next_tenth = self.num_timesteps * 10 // max(total, 1) + 1

        def _say(self, line: str) -> None:
            if log is None:
                self.bar.update(self.num_timesteps - self.bar.n)
                self.bar.close()  # the line goes below the finished bar, not into its redraws
                print(line, flush=True)
            else:
                log(line)

        def _on_step(self) -> bool:
            if log is None:
                self.bar.update(self.num_timesteps - self.bar.n)
            elif self.num_timesteps * 10 >= self.next_tenth * total:
                self.next_tenth = self.num_timesteps * 10 // max(total, 1) + 1
                seconds = time.perf_counter() - self.start
                log(
                    f"  trained {self.num_timesteps:,} of {total:,} steps "
                    f"({100 * self.num_timesteps // max(total, 1)}%), {seconds:.0f} s"
                )
            return True

        def _on_rollout_end(self) -> None:
            if self.num_timesteps >= total and self.collected is None:
                self.collected = time.perf_counter()
                self._say(
                    f"  all {self.num_timesteps:,} steps collected; now the last update ({epochs} "
                    f"pass{'es' * (epochs != 1)} over the last rollout) and the checkpoint, then the final "
                    "evaluation"
                    + (f" ({episodes} episodes)" if episodes else "")
                    + ": no progress is shown for these"
                )

        def _on_training_end(self) -> None:
            if self.collected is not None:
                seconds = time.perf_counter() - self.collected
                self._say(
                    f"  last update and checkpoint done ({seconds:.0f} s); the final evaluation"
                    + (f" of {episodes} episodes" if episodes else "")
                    + " runs now"
                )
            elif log is None:
                self.bar.update(self.num_timesteps - self.bar.n)
                self.bar.close()

    return Progress()


def normalized(env: Any, gamma: float, training: bool = True) -> Any:
    from stable_baselines3.common.vec_env import VecNormalize

    return VecNormalize(
        env, norm_obs_keys=["policy", "critic"], gamma=gamma, training=training, norm_reward=training
    )


def eval_callback(
    make_eval_env: Callable[[], Any],
    every: int,
    episodes: int,
    train_env: Any,
    until: int,
    score: Callable[[Any, Any, int], list[float]],
) -> Any:
    """Evaluate every ``every`` timesteps before step ``until`` (where the final score takes over) on the
    final evaluation's envs, and log ``eval/mean_return`` (TensorBoard). A point is taken at the first
    rollout boundary at or after each multiple of ``every``, after that rollout's update: the point at
    ``n`` steps scores the policy trained on those ``n`` steps. ``score(model, env, episodes)`` gives the
    returns (:func:`~sensorgym.app.scoring.evaluate`)."""
    from stable_baselines3.common.callbacks import BaseCallback

    class PeriodicEval(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next_at = every
            self.history: list[tuple[int, float]] = []

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:
            # here the previous rollout's update is done: the policy has learned from num_timesteps steps
            # (evaluating in _on_step, mid-collection, scored the policy of one rollout earlier)
            if self.next_at <= self.num_timesteps < until:
                while self.next_at <= self.num_timesteps:
                    self.next_at += every
                env = make_eval_env()
                if hasattr(train_env, "obs_rms"):
                    env.obs_rms = train_env.obs_rms
                mean = float(np.mean(score(self.model, env, episodes)))
                env.close()
                self.history.append((self.num_timesteps, mean))
                self.logger.record("eval/mean_return", mean)

    return PeriodicEval()


@dataclass
class TrainingClock:
    """Training seconds: those of the run before a resume, plus the time since ``start``."""

    before: float
    start: float

    def seconds(self) -> float:
        return self.before + time.perf_counter() - self.start


class CheckpointAfterUpdate:
    """PPO's hook right after each update (``model._after_update``): writes the checkpoint there, after
    every update by default (an interrupt then loses at most the rollout it cut short), or at the first
    update at or after each multiple of ``every`` steps; always at the end. ``saved``: the steps the last
    checkpoint holds."""

    def __init__(
        self,
        ckpt: Path,
        model: Any,
        env: Any,
        planned: int,
        every: int,
        periodic: Any,
        clock: TrainingClock,
        saved: int,
    ) -> None:
        self.ckpt, self.model, self.env, self.planned = ckpt, model, env, planned
        self.every, self.periodic, self.clock, self.saved = every, periodic, clock, saved
        self.next_save = (model.num_timesteps // every + 1) * every if every else 0
        model._after_update = self

    def __call__(self) -> None:
        model, periodic = self.model, self.periodic
        if model.num_timesteps < self.next_save and model.num_timesteps < self.planned:
            return
        if self.every:
            self.next_save = (model.num_timesteps // self.every + 1) * self.every
        state = {
            "timesteps": int(model.num_timesteps),
            "eval_history": periodic.history if periodic is not None else [],
            "next_eval_at": periodic.next_at if periodic is not None else 0,
            "train_seconds": self.clock.seconds(),
        }
        model.__dict__.pop("_after_update", None)  # never pickled into model.zip
        try:
            save_checkpoint_atomically(self.ckpt, model, self.env, state)
        finally:
            model._after_update = self
        self.saved = int(model.num_timesteps)
