"""Training helpers: PPO (Stable-Baselines3) on a sensor-observed env, symmetric or asymmetric critic.

``make_training_env`` builds a SAME_STEP vector env observed through sensors and adapted to SB3;
``train_ppo`` trains and evaluates one run and returns its numbers; ``train_from_config`` /
``evaluate_saved`` are what ``sensorgym train`` and ``sensorgym eval`` run: a run directory holds the
model, the observation-normalization statistics, the config and TensorBoard logs.

PPO trains in whole rollouts of ``n_steps`` x ``n_envs`` steps, so a run trains
:func:`planned_timesteps` steps: the budget rounded up to whole rollouts. The final score is the mean
return of ``eval_episodes`` episodes of the deterministic policy on envs seeded with ``seed + 10_000``
(:func:`eval_seed`), each env's first episodes spread evenly over the envs (:func:`evaluate`);
``evaluate_saved`` uses the same seed and episode count by default, so
``sensorgym eval <run>`` reproduces the score ``sensorgym train`` printed.

Example:
    >>> from sensorgym.app.config import parse_config
    >>> from sensorgym.app.training import train_ppo
    >>> angle = {"type": "StateSensorOptions", "key": "obs", "index": [0, 1]}
    >>> cfg = parse_config({"env": {"id": "Pendulum-v1", "n_envs": 2}, "sensors": {"angle": angle},
    ...                     "algorithm": {"timesteps": 256, "eval_episodes": 1,
    ...                                   "kwargs": {"n_steps": 64, "batch_size": 64, "n_epochs": 1}}})
    >>> result = train_ppo(cfg, critic="asymmetric")
    >>> result["critic"], result["timesteps"] >= 256, {"eval_return_mean", "eval_return_std"} <= set(result)
    ('asymmetric', True, True)
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.options import SensorOptions
from ..integrations.sb3_checkpoint import (  # re-exported: the checkpoint functions were documented here
    CHECKPOINT_PICKLE_FILES,
    CHECKPOINT_SAFE_FILES,
    load_checkpoint,
    save_checkpoint,
)
from .config import Config
from .ppo_settings import (
    CRITIC_TYPES,
    DEFAULT_PPO,
    check_ppo_kwargs,
    planned_timesteps,
    rollout_steps,
)
from .scoring import EVAL_SEED_OFFSET, eval_seed, evaluate, evaluate_saved, sample_sd
from .sensor_env import config_env_kwargs, make_sensor_env, make_training_env
from .training_hooks import (
    CheckpointAfterUpdate,
    TrainingClock,
    eval_callback,
    first_sigint_sets,
    normalized,
    progress_callback,
    recover_checkpoint,
    stop_callback,
)

__all__ = [
    "CHECKPOINT_PICKLE_FILES",
    "CHECKPOINT_SAFE_FILES",
    "CRITIC_TYPES",
    "DEFAULT_PPO",
    "EVAL_SEED_OFFSET",
    "TrainingInterrupted",
    "check_ppo_kwargs",
    "config_env_kwargs",
    "eval_seed",
    "evaluate",
    "evaluate_saved",
    "load_checkpoint",
    "make_sensor_env",
    "make_training_env",
    "planned_timesteps",
    "rollout_steps",
    "sample_sd",
    "save_checkpoint",
    "train_from_config",
    "train_ppo",
]


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on Ctrl-C (SIGINT) or SIGTERM.

    ``timesteps``: steps trained when it stopped; ``checkpoint``: the checkpoint folder that resumes the
    run, or ``None`` when none was written yet (the first is written after the first update);
    ``checkpoint_timesteps``: the steps that checkpoint holds (the last whole rollout before the stop:
    the steps of the rollout that was cut short are trained again on resume, so that the resumed run is
    the uninterrupted one).
    """

    def __init__(self, timesteps: int, checkpoint: Path | None, checkpoint_timesteps: int = 0) -> None:
        super().__init__(f"training interrupted at {timesteps} steps")
        self.timesteps, self.checkpoint = int(timesteps), checkpoint
        self.checkpoint_timesteps = int(checkpoint_timesteps)


def train_ppo(
    cfg: Config,
    *,
    critic: str | None = None,
    timesteps: int | None = None,
    seed: int | None = None,
    eval_every: int | None = None,
    eval_sensors: Mapping[str, SensorOptions] | None = None,
    eval_latency: Any = "same",
    tensorboard_log: str | None = None,
    callback: Any = None,
    progress_bar: bool = False,
    progress_log: Callable[[str], None] | None = None,
    on_model: Callable[[Any, Any], None] | None = None,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    interruptible: bool = False,
) -> dict[str, Any]:
    """Train PPO on the config ``cfg`` (:class:`~sensorgym.app.config.Config`: its env, sensors, what
    the policy and the critic read, action latency, PPO settings, budget, seed, evaluation episodes and
    learning-curve period) with a symmetric (critic reads ``"policy"``) or asymmetric (``"policy"`` +
    ``"critic"``) critic, and evaluate it, optionally under other sensors (``eval_sensors``).

    The keywords are what a config does not hold, or what one run of it changes: ``critic``,
    ``timesteps``, ``seed`` and ``eval_every`` override the config's (a sweep runs each critic type and
    seed of one config); the final evaluation uses the config's latency, or ``eval_latency`` when given
    (``None``: none).
    With ``checkpoint_dir``, a checkpoint (model, normalization statistics, sensor state with a snapshot
    of the envs, random states, and ``progress.json``: the steps, the learning curve so far and the
    training seconds) is written right after an update: after every update by default, or after the first
    update at or after each multiple of ``checkpoint_every`` steps, and always at the end. ``resume``
    continues from it in a fresh process exactly as the uninterrupted run would have gone on: the same
    steps, the same observations and actions, the same learning curve and final score.

    PPO trains whole rollouts, so ``timesteps`` is a budget: the run trains
    ``planned_timesteps(timesteps, rollout_steps(ppo_kwargs, n_envs))`` steps (``progress_bar`` counts
    to that). The final score is the mean return of ``eval_episodes`` episodes of the deterministic policy
    on envs seeded ``eval_seed(seed)``; the periodic evaluations (``eval_every``) use the same envs.

    With ``interruptible`` (main thread only), the first Ctrl-C (or SIGTERM, under
    :func:`~sensorgym.app.signals.sigterm_as_sigint`) stops training at the next env step and raises
    :class:`TrainingInterrupted`; the checkpoint of the last update is what resumes (a checkpoint written
    mid-rollout could not resume exactly: the rollout's first half and the exploration noise it drew
    would be lost). ``progress_log`` (a function taking a line) reports progress as plain lines instead
    of ``progress_bar``'s bar.

    Returns a dict with the final score (``eval_return_mean``, ``eval_return_std`` (ddof=1),
    ``eval_returns``, ``eval_episodes``, ``eval_seed``), ``timesteps`` (trained),
    ``timesteps_budget``, ``rollout_steps``, timings and the settings of the run.
    """
    run = _Run.of(cfg, critic, timesteps, seed, eval_every, eval_sensors, eval_latency)
    env = _build_envs(run)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    model, env, progress = _build_or_resume_model(run, env, tensorboard_log, ckpt, resume)
    planned = planned_timesteps(run.timesteps, run.rollout, model.num_timesteps)
    stop = threading.Event()
    callbacks, periodic = _callbacks(run, env, planned, progress, stop, callback, progress_bar, progress_log)
    clock = TrainingClock(float(progress.get("train_seconds", 0.0)), time.perf_counter())
    saved = int(progress.get("timesteps", 0)) if ckpt is not None and resume else 0
    hook = (
        CheckpointAfterUpdate(ckpt, model, env, planned, checkpoint_every, periodic, clock, saved)
        if ckpt is not None
        else None
    )
    _learn(model, run.timesteps, callbacks, stop, interruptible)
    train_seconds = clock.seconds()
    if stop.is_set():
        env.close()
        # the checkpoint of the last update resumes exactly; the rollout that was cut short is not in it
        has = ckpt is not None and (ckpt / "model.zip").exists()
        raise TrainingInterrupted(model.num_timesteps, ckpt if has else None, hook.saved if hook else 0)
    if on_model is not None:
        on_model(model, env)
    returns = _final_evaluation(run, model, env)
    return _results(run, model, returns, train_seconds, periodic)


# the class's qualified name, training:_ppo_class.<locals>.RolloutCheckpointPPO, is written into every
# checkpoint (state.pt) and checked when one resumes: it keeps this module and this name
@functools.cache
def _ppo_class() -> type:
    """PPO that calls ``self._after_update()`` (when set) right after each update.

    That moment, after ``train()`` and before the next rollout draws its exploration noise, is the one
    point where a checkpoint resumes bit-identically: the state there is the state ``learn()`` ends with.
    A callback cannot reach it (``on_rollout_start`` comes after the new rollout's ``reset_noise``, which
    draws from the random state the checkpoint would save), so the hook lives in the algorithm. The hook
    is never saved (``_excluded_save_params``); ``model.zip`` loads with plain ``PPO.load``.
    """
    from stable_baselines3 import PPO

    class RolloutCheckpointPPO(PPO):
        _after_update: Callable[[], None] | None = None

        def _excluded_save_params(self) -> list[str]:
            return [*super()._excluded_save_params(), "_after_update"]

        def train(self) -> None:
            super().train()
            hook = self.__dict__.get("_after_update")
            if hook is not None:
                hook()

    return RolloutCheckpointPPO


@dataclass
class _Run:
    """One run of :func:`train_ppo`: the config with the call's overrides (critic, budget, seed,
    learning-curve period, evaluation sensors and latency) and PPO's arguments (``ppo``: DEFAULT_PPO with
    the config's)."""

    cfg: Config
    critic: str
    timesteps: int
    seed: int
    eval_every: int
    eval_sensors: Mapping[str, SensorOptions] | None
    eval_latency: Any
    ppo: dict[str, Any]
    sensor_kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        cfg: Config,
        critic: str | None,
        timesteps: int | None,
        seed: int | None,
        eval_every: int | None,
        eval_sensors: Mapping[str, SensorOptions] | None,
        eval_latency: Any,
    ) -> _Run:
        critic = critic if critic is not None else cfg.critic.type
        if critic not in CRITIC_TYPES:
            raise ValueError(f"critic={critic!r}: expected one of {CRITIC_TYPES}.")
        sensor_kwargs = dict(
            policy=cfg.policy,
            critic=cfg.critic.sensors,
            critic_env_obs=cfg.critic.env_obs,
            critic_randomization=cfg.critic.randomization,
            policy_age=list(cfg.policy_age or []),
            critic_age=list(cfg.critic_age or []),
            # the control step, for an env that does not give it
            **({"dt": cfg.env.dt} if cfg.env.dt is not None else {}),
        )
        return cls(
            cfg,
            critic,
            int(timesteps if timesteps is not None else cfg.algorithm.timesteps),
            int(seed if seed is not None else cfg.algorithm.seed),
            int(eval_every if eval_every is not None else cfg.algorithm.eval_every),
            eval_sensors,
            eval_latency,
            {**DEFAULT_PPO, **dict(cfg.algorithm.kwargs or {})},
            sensor_kwargs,
        )

    @property
    def rollout(self) -> int:
        return rollout_steps(self.ppo, self.cfg.env.n_envs)

    def make_env(self, sensor_set: Mapping[str, SensorOptions], env_seed: int, training: bool) -> Any:
        """The run's envs observed through ``sensor_set``: training envs (the config's latency, statistics
        updated) or evaluation envs (``eval_latency``, statistics frozen)."""
        cfg = self.cfg
        env = make_training_env(
            cfg.env.id,
            sensor_set,
            n_envs=cfg.env.n_envs,
            seed=env_seed,
            env_kwargs=cfg.env.kwargs,
            vectorization_mode=cfg.env.vectorization,
            latency=cfg.latency if training or self.eval_latency == "same" else self.eval_latency,
            **self.sensor_kwargs,
        )
        return normalized(env, self.ppo["gamma"], training) if cfg.algorithm.normalize else env

    def make_eval_env(self) -> Any:
        """The evaluation envs (seeded ``eval_seed(seed)``) of the final score and the learning curve."""
        return self.make_env(self.eval_sensors or self.cfg.sensors, eval_seed(self.seed), False)


def _build_envs(run: _Run) -> Any:
    """The training envs; a discrete-action env drops the default's gSDE (continuous actions only)."""
    import gymnasium as gym

    env = run.make_env(run.cfg.sensors, run.seed, True)
    if not isinstance(env.action_space, gym.spaces.Box) and "use_sde" not in (run.cfg.algorithm.kwargs or {}):
        # the default's gSDE needs continuous actions: a discrete-action env (CartPole) trains without it
        run.ppo.pop("use_sde", None)
        run.ppo.pop("sde_sample_freq", None)
    return env


def _build_or_resume_model(
    run: _Run, env: Any, tensorboard_log: str | None, ckpt: Path | None, resume: bool
) -> tuple[Any, Any, dict[str, Any]]:
    """The model, its envs and the progress so far (``progress.json``: steps, learning curve, seconds):
    from the checkpoint in ``ckpt`` with ``resume`` (a swap that a kill cut short finished first), else a
    new PPO with the run's critic and seed."""
    from ..integrations.sb3 import AsymmetricActorCriticPolicy

    algorithm = _ppo_class()
    progress: dict[str, Any] = {}
    if ckpt is not None:
        recover_checkpoint(ckpt)
    if resume and ckpt is not None and (ckpt / "model.zip").exists():
        model, env = load_checkpoint(ckpt, env, tensorboard_log, algorithm=algorithm)
        with contextlib.suppress(OSError, ValueError):
            progress = json.loads((ckpt / "progress.json").read_text())
        return model, env, progress
    critic_keys = ("policy", "critic") if run.critic == "asymmetric" else ("policy",)
    model = algorithm(
        AsymmetricActorCriticPolicy,
        env,
        seed=run.seed,
        device="cpu",
        verbose=0,
        tensorboard_log=tensorboard_log,
        policy_kwargs=dict(critic_keys=critic_keys, net_arch=dict(pi=[64, 64], vf=[64, 64])),
        **run.ppo,
    )
    return model, env, progress


def _callbacks(
    run: _Run,
    env: Any,
    planned: int,
    progress: dict[str, Any],
    stop: threading.Event,
    callback: Any,
    progress_bar: bool,
    progress_log: Callable[[str], None] | None,
) -> tuple[list[Any], Any]:
    """The callbacks of ``learn``: the caller's, the stop on ``stop``, progress (a bar or lines) and the
    learning curve (continued from ``progress`` on a resume); returns them and the learning curve's."""
    callbacks = [callback] if callback is not None else []
    callbacks.append(stop_callback(stop))
    episodes = run.cfg.algorithm.eval_episodes
    if progress_bar or progress_log is not None:
        callbacks.append(progress_callback(planned, progress_log, int(run.ppo["n_epochs"]), episodes))
    if not run.eval_every:
        return callbacks, None
    periodic = eval_callback(run.make_eval_env, run.eval_every, episodes, env, until=planned, score=evaluate)
    # the learning curve so far (a resumed run continues it: its points before the interrupt stay)
    periodic.history = [tuple(point) for point in progress.get("eval_history", [])]
    periodic.next_at = int(progress.get("next_eval_at", run.eval_every))
    callbacks.append(periodic)
    return callbacks, periodic


def _learn(
    model: Any, timesteps: int, callbacks: list[Any], stop: threading.Event, interruptible: bool
) -> None:
    """PPO's ``learn`` up to the budget (a resumed model continues its count); with ``interruptible`` the
    first Ctrl-C sets ``stop``. The checkpoint hook is removed afterwards, whatever happened."""
    from stable_baselines3.common.callbacks import CallbackList

    try:
        with first_sigint_sets(stop) if interruptible else contextlib.nullcontext():
            model.learn(
                max(timesteps - model.num_timesteps, 0),
                callback=CallbackList(callbacks),
                reset_num_timesteps=model.num_timesteps == 0,
            )
    finally:
        model.__dict__.pop("_after_update", None)


def _final_evaluation(run: _Run, model: Any, env: Any) -> list[float]:
    """The final score's returns: ``eval_episodes`` episodes on the evaluation envs (normalized with the
    training statistics); both envs are closed."""
    eval_env = run.make_eval_env()
    if run.cfg.algorithm.normalize:
        eval_env.obs_rms = env.obs_rms
    returns = evaluate(model, eval_env, run.cfg.algorithm.eval_episodes)
    env.close()
    eval_env.close()
    return returns


def _results(
    run: _Run, model: Any, returns: list[float], train_seconds: float, periodic: Any
) -> dict[str, Any]:
    """What :func:`train_ppo` returns."""
    return {
        "critic": run.critic,
        "seed": run.seed,
        "timesteps": int(model.num_timesteps),
        "timesteps_budget": int(run.timesteps),
        "rollout_steps": run.rollout,
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": sample_sd(returns),
        "eval_returns": returns,
        "eval_episodes": len(returns),
        "eval_seed": eval_seed(run.seed),
        "train_seconds": train_seconds,
        "eval_history": periodic.history if periodic is not None else [],
    }


def train_from_config(
    cfg: Any,
    out: str | Path,
    *,
    progress_bar: bool = True,
    callback: Any = None,
    timesteps: int | None = None,
    seed: int | None = None,
    checkpoint_every: int = 0,
    resume: bool = False,
    interruptible: bool = False,
    progress_log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """``sensorgym train``: train, evaluate, and save the run to ``out``: ``model.zip``,
    ``vecnormalize.pkl`` (if normalizing), ``config.json`` (the full config, with the ``timesteps`` and
    ``seed`` actually used), ``result.json`` (the final score, its episodes and seed, the steps trained),
    TensorBoard logs under ``tb/`` and a resumable ``checkpoint/`` (written every ``checkpoint_every``
    steps, at the end, and on Ctrl-C with ``interruptible``; ``resume`` continues from it with the config
    saved beside it, and ``timesteps`` may then raise the budget)."""
    from .config import UserError, parse_config

    out = Path(out)
    if resume:
        from .outdir import resume_conflict

        recover_checkpoint(out / "checkpoint")
        conflict = resume_conflict(out)
        if conflict:
            raise UserError(conflict)
        if (out / "config.json").exists() and not (out / "checkpoint" / "model.zip").exists():
            raise UserError(
                f"--out {out}: the run there was stopped before its first update, so it has no checkpoint "
                "to resume (nothing was lost: it had trained less than one rollout). Fix: start it again "
                f"without --resume (sensorgym train --out {out} ...)."
            )
        if not (out / "checkpoint" / "model.zip").exists() or not (out / "config.json").exists():
            raise UserError(
                f"--out {out}: no checkpoint to resume there. Fix: pass the --out of a run that "
                "`sensorgym train` wrote (it holds config.json and checkpoint/), or drop --resume."
            )
        cfg = parse_config(json.loads((out / "config.json").read_text()))
        if seed is not None and int(seed) != cfg.algorithm.seed:
            raise UserError(
                f"--seed {seed}: the run in {out} trains with seed {cfg.algorithm.seed}, and resuming "
                "continues it. Fix: drop --seed, or start a new run in another --out."
            )
    else:
        # a fresh run in a folder that holds an older one (``sensorgym train`` refuses such a folder
        # unless --force moved the old run aside): its checkpoint belongs to the old config, and a resume
        # after an early interrupt would pair the two
        for name in ("checkpoint", "checkpoint.old", "checkpoint.tmp"):
            shutil.rmtree(out / name, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    algorithm = cfg.raw.setdefault("algorithm", {})
    if timesteps is not None:
        cfg.algorithm.timesteps = algorithm["timesteps"] = int(timesteps)
    if seed is not None:
        cfg.algorithm.seed = algorithm["seed"] = int(seed)
    (out / "config.json").write_text(json.dumps(cfg.raw, indent=2, default=str))

    def save(model: Any, env: Any) -> None:
        model.save(out / "model.zip")
        if hasattr(env, "obs_rms"):
            env.save(str(out / "vecnormalize.pkl"))

    result = train_ppo(
        cfg,
        tensorboard_log=str(out / "tb"),
        callback=callback,
        progress_bar=progress_bar,
        progress_log=progress_log,
        on_model=save,
        checkpoint_dir=out / "checkpoint",
        checkpoint_every=checkpoint_every,
        resume=resume,
        interruptible=interruptible,
    )
    (out / "result.json").write_text(json.dumps(result, indent=2))
    return result
