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
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
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

__all__ = [
    "CHECKPOINT_PICKLE_FILES",
    "CHECKPOINT_SAFE_FILES",
    "CRITIC_TYPES",
    "DEFAULT_PPO",
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

#: critic types: what the value function reads
CRITIC_TYPES = ("symmetric", "asymmetric")

#: PPO settings for Pendulum-like continuous control (after rl-zoo's tuned Pendulum-v1 entry)
DEFAULT_PPO: dict[str, Any] = dict(
    n_steps=1024,
    batch_size=64,
    gae_lambda=0.95,
    gamma=0.9,
    n_epochs=10,
    ent_coef=0.0,
    learning_rate=1e-3,
    clip_range=0.2,
    use_sde=True,
    sde_sample_freq=4,
)


#: the final evaluation's envs are seeded with ``seed + EVAL_SEED_OFFSET`` (never the training seeds)
EVAL_SEED_OFFSET = 10_000


def eval_seed(seed: int) -> int:
    """The seed of the evaluation envs of a run trained with ``seed``.

    Example:
        >>> eval_seed(3)
        10003
    """
    return int(seed) + EVAL_SEED_OFFSET


def rollout_steps(ppo_kwargs: Mapping[str, Any] | None, n_envs: int) -> int:
    """Steps per PPO rollout: ``n_steps`` (per env) x ``n_envs``; PPO trains whole rollouts only.

    Example:
        >>> rollout_steps(None, 4)   # DEFAULT_PPO's n_steps = 1024
        4096
    """
    return int({**DEFAULT_PPO, **dict(ppo_kwargs or {})}["n_steps"]) * int(n_envs)


def planned_timesteps(budget: int, rollout: int, start: int = 0) -> int:
    """The steps PPO actually trains for a ``budget``: from ``start``, whole rollouts until >= budget.

    Example:
        >>> planned_timesteps(50_000, 4096)   # 13 rollouts
        53248
        >>> planned_timesteps(50_000, 4096, start=8)   # resumed mid-rollout at step 8
        53256
    """
    if start >= budget:
        return int(start)
    return int(start + math.ceil((budget - start) / rollout) * rollout)


def sample_sd(values: Any) -> float:
    """The sample standard deviation (ddof=1), 0.0 for fewer than two values.

    Example:
        >>> sample_sd([1.0, 2.0, 3.0])
        1.0
    """
    xs = np.asarray(values, dtype=float)
    return float(np.std(xs, ddof=1)) if xs.size > 1 else 0.0


#: PPO arguments sensorgym sets itself (``algorithm.kwargs`` may not)
_RESERVED_PPO = {
    "policy",
    "env",
    "seed",
    "device",
    "verbose",
    "tensorboard_log",
    "policy_kwargs",
    "_init_setup_model",
}
#: PPO arguments that must be whole numbers >= 1 (batch_size >= 2: advantages are normalized per batch)
_POSITIVE_INT_PPO = {"n_steps": 1, "batch_size": 2, "n_epochs": 1}
#: PPO arguments a config can only give as numbers (SB3 also takes callables, which a config cannot hold)
_NUMBER_PPO = {"learning_rate", "gamma", "gae_lambda", "clip_range", "ent_coef", "vf_coef", "max_grad_norm"}


def check_ppo_kwargs(kwargs: Mapping[str, Any], n_envs: int, source: str) -> None:
    """Raise a :class:`~sensorgym.app.config.ConfigError` naming ``source`` (the config file), the key, the
    value and the fix for an ``algorithm.kwargs`` entry that PPO would reject or that sensorgym sets.

    Example:
        >>> from sensorgym.app.config import ConfigError
        >>> try:
        ...     check_ppo_kwargs({"n_stepz": 64}, 4, "my.toml")
        ... except ConfigError as e:
        ...     print(e)  # doctest: +ELLIPSIS
        my.toml: config algorithm.kwargs.n_stepz = 64: PPO has no such argument. Fix: did you mean ...
    """
    import difflib
    import inspect

    from stable_baselines3 import PPO

    from .config import ConfigError

    accepted = [
        name
        for name, p in inspect.signature(PPO.__init__).parameters.items()
        if name != "self" and p.kind is not p.VAR_KEYWORD and name not in _RESERVED_PPO
    ]
    for key, value in kwargs.items():
        where = f"{source}: config algorithm.kwargs.{key} = {value!r}"
        if key in _RESERVED_PPO:
            raise ConfigError(
                f"{where}: sensorgym sets {key} itself. Fix: remove it (the seed is algorithm.seed)."
            )
        if key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(
                f"{where}: PPO has no such argument. Fix: {hint}see the arguments of "
                "stable_baselines3.PPO (e.g. n_steps, batch_size, learning_rate, gamma)."
            )
        low = _POSITIVE_INT_PPO.get(key)
        if low is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise ConfigError(f"{where}: must be a whole number >= {low}. Fix: write e.g. {key} = 64.")
        if key in _NUMBER_PPO and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{where}: must be a number. Fix: write e.g. {key} = 0.0003.")
    n_steps = kwargs.get("n_steps", 2048)
    if isinstance(n_steps, int) and n_steps * n_envs <= 1:  # SB3 asserts: advantages need 2 samples
        raise ConfigError(
            f"{source}: config algorithm.kwargs.n_steps = {n_steps!r} with env.n_envs = {n_envs}: a PPO "
            "rollout (n_steps x n_envs) must hold more than 1 step. Fix: write e.g. n_steps = 64."
        )


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


@contextlib.contextmanager
def _first_sigint_sets(event: threading.Event) -> Iterator[None]:
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


def _recover_checkpoint(ckpt: Path) -> None:
    """Finish a checkpoint swap that a kill cut short (see :func:`_save_checkpoint_atomically`)."""
    old, tmp = ckpt.with_name(ckpt.name + ".old"), ckpt.with_name(ckpt.name + ".tmp")
    if not ckpt.exists() and old.exists():
        os.replace(old, ckpt)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)


def _save_checkpoint_atomically(ckpt: Path, model: Any, env: Any, progress: dict[str, Any]) -> None:
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


def _stop_callback(event: threading.Event) -> Any:
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


def _progress_callback(
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


def make_sensor_env(
    env_id: str,
    sensors: Mapping[str, SensorOptions],
    *,
    n_envs: int = 4,
    seed: int | None = 0,
    vectorization_mode: str = "sync",
    autoreset_mode: str = "SameStep",
    env_kwargs: dict | None = None,
    latency: Any = None,
    **sensor_kwargs: Any,
) -> Any:
    """``make_sensor_vec``, with the config's action latency (a :class:`~sensorgym.app.config.LatencyConfig`,
    or ``None`` for none) between the agent and the env: ``SensorObservation(ActionLatency(envs))``.

    With ``latency.critic_in_flight`` (and a delay > 0) the actions in flight, and with
    ``latency.critic_latency`` the episode's ``[delay, jitter]``, are added as sensors
    (:meth:`~sensorgym.wrappers.ActionLatency.critic_sensors`) whose ground truth only the critic reads:
    they join ``critic`` (when it lists sensors) and never ``policy`` (default: the config's sensors).

    Example:
        >>> import sensorgym as sg
        >>> from sensorgym.app.config import LatencyConfig
        >>> env = make_sensor_env("Pendulum-v1", {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])},
        ...                       n_envs=2, latency=LatencyConfig(delay=0.1, jitter=0.05))
        >>> obs, _ = env.reset(seed=0)
        >>> obs["policy"].shape, obs["critic"].shape   # critic: angle GT (2) + in flight (3) + env obs (3)
        ((2, 2), (2, 8))
    """
    from ..wrappers import make_sensor_vec

    if latency is None:
        return make_sensor_vec(
            env_id,
            n_envs,
            sensors,
            autoreset_mode=autoreset_mode,
            seed=seed,
            vectorization_mode=vectorization_mode,
            env_kwargs=env_kwargs,
            **sensor_kwargs,
        )
    import functools

    import gymnasium as gym

    from ..wrappers import ActionLatency, SensorObservation, SimStateExtractor
    from ..wrappers.common import needs_extraction

    wrappers = (
        [functools.partial(SimStateExtractor, sensors=dict(sensors))] if needs_extraction(sensors) else []
    )
    envs = gym.make_vec(
        env_id,
        num_envs=n_envs,
        vectorization_mode=vectorization_mode,
        vector_kwargs={"autoreset_mode": autoreset_mode},
        wrappers=wrappers or None,
        **(env_kwargs or {}),
    )
    try:
        initial = latency.initial_action
        lat = ActionLatency(
            envs,
            latency.delay,
            latency.jitter,
            dt=sensor_kwargs.get("dt"),
            initial_action=np.asarray(initial) if isinstance(initial, list) else initial,
            seed=seed,
        )
        extra = lat.critic_sensors(
            in_flight=bool(latency.critic_in_flight) and lat.config.max_shift > 0,
            latency=bool(latency.critic_latency),
        )
        kwargs = dict(sensor_kwargs)
        if kwargs.get("policy") is None:
            kwargs["policy"] = list(sensors)
        if kwargs.get("critic") is not None:
            kwargs["critic"] = [*kwargs["critic"], *extra]
        return SensorObservation(lat, {**sensors, **extra}, seed=seed, **kwargs)
    except BaseException:
        envs.close()
        raise


def config_env_kwargs(cfg: Any) -> dict[str, Any]:
    """The keyword arguments of :func:`make_sensor_env` a config sets, besides the env id, the sensors and
    the number of envs: env kwargs, action latency and what the policy and the critic read.

    Example:
        >>> from sensorgym.app.config import parse_config
        >>> cfg = parse_config({"env": {"id": "Pendulum-v1"},
        ...                     "sensors": {"angle": {"type": "StateSensorOptions", "key": "obs"}}})
        >>> sorted(config_env_kwargs(cfg))[:3]
        ['critic', 'critic_age', 'critic_env_obs']
    """
    return dict(
        env_kwargs=cfg.env.kwargs,
        **({"dt": cfg.env.dt} if cfg.env.dt is not None else {}),
        latency=cfg.latency,
        policy=cfg.policy,
        critic=cfg.critic.sensors,
        critic_env_obs=cfg.critic.env_obs,
        critic_randomization=cfg.critic.randomization,
        policy_age=cfg.policy_age,
        critic_age=cfg.critic_age,
    )


def make_training_env(
    env_id: str,
    sensors: Mapping[str, SensorOptions],
    *,
    n_envs: int = 4,
    seed: int = 0,
    vectorization_mode: str = "sync",
    env_kwargs: dict | None = None,
    latency: Any = None,
    **sensor_kwargs: Any,
) -> Any:
    """A SAME_STEP vector env with sensors (and the action ``latency`` of :func:`make_sensor_env`), as an
    SB3 ``VecEnv``."""
    from ..integrations.sb3 import SB3VecEnv

    venv = make_sensor_env(
        env_id,
        sensors,
        n_envs=n_envs,
        seed=seed,
        vectorization_mode=vectorization_mode,
        env_kwargs=env_kwargs,
        latency=latency,
        **sensor_kwargs,
    )
    env = SB3VecEnv(venv)
    env.seed(seed)
    return env


def evaluate(model: Any, env: Any, episodes: int, deterministic: bool = True) -> list[float]:
    """Episode returns of ``model`` on an SB3 ``VecEnv``: the first episodes of each env, ``episodes`` in
    all, spread evenly over the envs (env ``i`` contributes ``(episodes + i) // n_envs``, as SB3's
    ``evaluate_policy`` does). Taking the first ``episodes`` to finish across envs instead would favour
    short episodes whenever their lengths vary."""
    n = env.num_envs
    quota = np.array([(episodes + i) // n for i in range(n)])
    counted = np.zeros(n, dtype=int)
    returns: list[float] = []
    running = np.zeros(n)
    obs = env.reset()
    while (counted < quota).any():
        actions, _ = model.predict(obs, deterministic=deterministic)
        obs, rewards, dones, _ = env.step(actions)
        running += np.asarray(rewards, dtype=float)
        for i in np.flatnonzero(dones):
            if counted[i] < quota[i]:
                returns.append(float(running[i]))
                counted[i] += 1
            running[i] = 0.0
    return returns


def _normalized(env: Any, gamma: float, training: bool = True) -> Any:
    from stable_baselines3.common.vec_env import VecNormalize

    return VecNormalize(
        env, norm_obs_keys=["policy", "critic"], gamma=gamma, training=training, norm_reward=training
    )


def _eval_callback(
    make_eval_env: Callable[[], Any], every: int, episodes: int, train_env: Any, until: int
) -> Any:
    """Evaluate every ``every`` timesteps before step ``until`` (where the final score takes over) on the
    final evaluation's envs, and log ``eval/mean_return`` (TensorBoard). A point is taken at the first
    rollout boundary at or after each multiple of ``every``, after that rollout's update: the point at
    ``n`` steps scores the policy trained on those ``n`` steps."""
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
                mean = float(np.mean(evaluate(self.model, env, episodes)))
                env.close()
                self.history.append((self.num_timesteps, mean))
                self.logger.record("eval/mean_return", mean)

    return PeriodicEval()


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
    import gymnasium as gym
    from stable_baselines3.common.callbacks import CallbackList

    from ..integrations.sb3 import AsymmetricActorCriticPolicy

    env_id, sensors, n_envs = cfg.env.id, cfg.sensors, cfg.env.n_envs
    critic = critic if critic is not None else cfg.critic.type
    timesteps = int(timesteps if timesteps is not None else cfg.algorithm.timesteps)
    seed = int(seed if seed is not None else cfg.algorithm.seed)
    eval_every = int(eval_every if eval_every is not None else cfg.algorithm.eval_every)
    eval_episodes, normalize, ppo_kwargs = (
        cfg.algorithm.eval_episodes,
        cfg.algorithm.normalize,
        cfg.algorithm.kwargs,
    )
    env_kwargs, vectorization_mode, latency = cfg.env.kwargs, cfg.env.vectorization, cfg.latency
    policy_sensors, critic_sensors = cfg.policy, cfg.critic.sensors
    critic_env_obs, critic_randomization = cfg.critic.env_obs, cfg.critic.randomization
    policy_age, critic_age, dt = cfg.policy_age, cfg.critic_age, cfg.env.dt
    if critic not in CRITIC_TYPES:
        raise ValueError(f"critic={critic!r}: expected one of {CRITIC_TYPES}.")
    kwargs = {**DEFAULT_PPO, **dict(ppo_kwargs or {})}
    sensor_kwargs = dict(
        policy=policy_sensors,
        critic=critic_sensors,
        critic_env_obs=critic_env_obs,
        critic_randomization=critic_randomization,
        policy_age=list(policy_age or []),
        critic_age=list(critic_age or []),
        **({"dt": dt} if dt is not None else {}),  # the control step, for an env that does not give it
    )

    def make_env(sensor_set: Mapping[str, SensorOptions], env_seed: int, training: bool) -> Any:
        env = make_training_env(
            env_id,
            sensor_set,
            n_envs=n_envs,
            seed=env_seed,
            env_kwargs=env_kwargs,
            vectorization_mode=vectorization_mode,
            latency=latency if training or eval_latency == "same" else eval_latency,
            **sensor_kwargs,
        )
        return _normalized(env, kwargs["gamma"], training) if normalize else env

    env = make_env(sensors, seed, True)
    if not isinstance(env.action_space, gym.spaces.Box) and "use_sde" not in (ppo_kwargs or {}):
        # the default's gSDE needs continuous actions: a discrete-action env (CartPole) trains without it
        kwargs.pop("use_sde", None)
        kwargs.pop("sde_sample_freq", None)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    ppo_class = _ppo_class()
    progress: dict[str, Any] = {}
    if ckpt is not None:
        _recover_checkpoint(ckpt)
    if resume and ckpt is not None and (ckpt / "model.zip").exists():
        model, env = load_checkpoint(ckpt, env, tensorboard_log, algorithm=ppo_class)
        with contextlib.suppress(OSError, ValueError):
            progress = json.loads((ckpt / "progress.json").read_text())
    else:
        critic_keys = ("policy", "critic") if critic == "asymmetric" else ("policy",)
        model = ppo_class(
            AsymmetricActorCriticPolicy,
            env,
            seed=seed,
            device="cpu",
            verbose=0,
            tensorboard_log=tensorboard_log,
            policy_kwargs=dict(critic_keys=critic_keys, net_arch=dict(pi=[64, 64], vf=[64, 64])),
            **kwargs,
        )
    rollout = rollout_steps(kwargs, n_envs)
    planned = planned_timesteps(timesteps, rollout, model.num_timesteps)
    stop = threading.Event()
    callbacks = [callback] if callback is not None else []
    callbacks.append(_stop_callback(stop))
    if progress_bar or progress_log is not None:
        callbacks.append(_progress_callback(planned, progress_log, int(kwargs["n_epochs"]), eval_episodes))
    periodic = None
    if eval_every:
        periodic = _eval_callback(
            lambda: make_env(eval_sensors or sensors, eval_seed(seed), False),
            eval_every,
            eval_episodes,
            env,
            until=planned,
        )
        # the learning curve so far (a resumed run continues it: its points before the interrupt stay)
        periodic.history = [tuple(point) for point in progress.get("eval_history", [])]
        periodic.next_at = int(progress.get("next_eval_at", eval_every))
        callbacks.append(periodic)
    seconds_before = float(progress.get("train_seconds", 0.0))
    start = time.perf_counter()
    saved = {"timesteps": int(progress.get("timesteps", 0)) if ckpt is not None and resume else 0}
    if ckpt is not None:
        every = checkpoint_every
        next_save = [(model.num_timesteps // every + 1) * every if every else 0]

        def after_update() -> None:
            # after each update: every rollout by default (an interrupt then loses at most the rollout
            # it cut short), or at the first update at or after each multiple of checkpoint_every; always
            # at the end
            if model.num_timesteps < next_save[0] and model.num_timesteps < planned:
                return
            if checkpoint_every:
                next_save[0] = (model.num_timesteps // checkpoint_every + 1) * checkpoint_every
            state = {
                "timesteps": int(model.num_timesteps),
                "eval_history": periodic.history if periodic is not None else [],
                "next_eval_at": periodic.next_at if periodic is not None else 0,
                "train_seconds": seconds_before + time.perf_counter() - start,
            }
            model.__dict__.pop("_after_update", None)  # never pickled into model.zip
            try:
                _save_checkpoint_atomically(ckpt, model, env, state)
            finally:
                model._after_update = after_update
            saved["timesteps"] = int(model.num_timesteps)

        model._after_update = after_update
    try:
        with _first_sigint_sets(stop) if interruptible else contextlib.nullcontext():
            model.learn(
                max(timesteps - model.num_timesteps, 0),
                callback=CallbackList(callbacks),
                reset_num_timesteps=model.num_timesteps == 0,
            )
    finally:
        model.__dict__.pop("_after_update", None)
    train_seconds = seconds_before + time.perf_counter() - start
    if stop.is_set():
        env.close()
        # the checkpoint of the last update resumes exactly; the rollout that was cut short is not in it
        has = ckpt is not None and (ckpt / "model.zip").exists()
        raise TrainingInterrupted(model.num_timesteps, ckpt if has else None, saved["timesteps"])
    if on_model is not None:
        on_model(model, env)
    eval_env = make_env(eval_sensors or sensors, eval_seed(seed), False)
    if normalize:
        eval_env.obs_rms = env.obs_rms
    returns = evaluate(model, eval_env, eval_episodes)
    env.close()
    eval_env.close()
    return {
        "critic": critic,
        "seed": seed,
        "timesteps": int(model.num_timesteps),
        "timesteps_budget": int(timesteps),
        "rollout_steps": rollout,
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": sample_sd(returns),
        "eval_returns": returns,
        "eval_episodes": len(returns),
        "eval_seed": eval_seed(seed),
        "train_seconds": train_seconds,
        "eval_history": periodic.history if periodic is not None else [],
    }


def _BlankCritic(env: Any, space: Any) -> Any:
    """Replace the ``"critic"`` observation by zeros of the trained shape: evaluation runs the actor
    only, so a test config may change what the critic would have seen (e.g. no randomized parameters)."""
    import gymnasium as gym
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class BlankCritic(VecEnvWrapper):
        def __init__(self) -> None:
            obs_space = gym.spaces.Dict({**env.observation_space.spaces, "critic": space})
            super().__init__(env, observation_space=obs_space)

        def _blank(self, obs: dict) -> dict:
            return {**obs, "critic": np.zeros((self.num_envs, *space.shape), dtype=np.float32)}

        def reset(self) -> Any:
            return self._blank(self.venv.reset())

        def step_wait(self) -> Any:
            obs, rewards, dones, infos = self.venv.step_wait()
            for info in infos:
                if "terminal_observation" in info:
                    info["terminal_observation"] = {
                        **info["terminal_observation"],
                        "critic": np.zeros(space.shape, np.float32),
                    }
            return self._blank(obs), rewards, dones, infos

    return BlankCritic()


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

        _recover_checkpoint(out / "checkpoint")
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


def evaluate_saved(
    run_dir: str | Path,
    cfg: Any = None,
    episodes: int | None = None,
    seed: int | None = None,
    config_name: str | None = None,
) -> dict[str, Any]:
    """``sensorgym eval``: replay a saved run, under its own sensor config or another one (``cfg``, read
    from ``config_name``), e.g. trained clean and tested noisy. The observation layout must match the one
    trained on.

    By default it uses the final score's evaluation seed and episode count (from ``result.json``), so with
    the run's own config it reproduces that score exactly, and under another config the episodes start
    from the same initial states (a paired comparison).

    Returns ``eval_return_mean``, ``eval_return_std`` (ddof=1), ``eval_returns``, ``eval_episodes``,
    ``eval_seed`` and ``trained_score`` (the final score saved at training, or ``None``).
    """
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from .config import UserError, parse_config
    from .saved_policy import check_run_dir, read_run_file

    run_dir = Path(run_dir)
    check_run_dir(run_dir, "run directory")  # a file, nothing there, or an interrupted run: the fix
    # a damaged run file (empty, cut short) is one line naming it, not the loader's traceback
    trained = read_run_file(run_dir, "config.json", lambda p: parse_config(json.loads(p.read_text())))
    saved = {}
    if (run_dir / "result.json").exists():
        saved = read_run_file(run_dir, "result.json", lambda p: json.loads(p.read_text()))
    if cfg is not None:
        from .saved_policy import policy_input_differences

        changed = policy_input_differences(trained, cfg)
        if changed:
            raise UserError(
                f"{config_name or 'the eval config'} changes what the policy in {run_dir} reads, not only "
                f"imperfection levels: {'; '.join(changed)}. The score would not compare with the trained "
                "one. Fix: keep the env, its kwargs and control step, and the policy's sensors; change only "
                "levels (noise, bias, delay, jitter, resolution, random_walk, update_period, dropout, "
                "[latency], ...)."
            )
    cfg = cfg or trained
    seed = seed if seed is not None else saved.get("eval_seed", eval_seed(trained.algorithm.seed))
    episodes = episodes or saved.get("eval_episodes") or cfg.algorithm.eval_episodes
    env = make_training_env(
        cfg.env.id,
        cfg.sensors,
        n_envs=cfg.env.n_envs,
        seed=seed,
        vectorization_mode=cfg.env.vectorization,
        **config_env_kwargs(cfg),
    )
    try:
        model = read_run_file(run_dir, "model.zip", lambda p: PPO.load(p, device="cpu"))
    except UserError:
        env.close()
        raise
    want, got = model.observation_space["policy"].shape, env.observation_space["policy"].shape
    if want != got:
        env.close()
        raise UserError(
            f"{config_name or 'the eval config'}: its policy sensors give observations of shape {got}, "
            f"the model in {run_dir} was trained on {want}. Fix: change only imperfection levels "
            "(noise, delay, bias, update_period, dropout, [latency], ...), not the policy sensors, their "
            "index or history_length, nor [policy] age."
        )
    if model.observation_space["critic"].shape != env.observation_space["critic"].shape:
        env = _BlankCritic(env, model.observation_space["critic"])  # the actor never reads it
    if (run_dir / "vecnormalize.pkl").exists():
        try:
            env = read_run_file(run_dir, "vecnormalize.pkl", lambda p: VecNormalize.load(str(p), env))
        except UserError:
            env.close()
            raise
        env.training, env.norm_reward = False, False
    returns = evaluate(model, env, episodes)
    env.close()
    return {
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": sample_sd(returns),
        "eval_returns": returns,
        "eval_episodes": len(returns),
        "eval_seed": int(seed),
        "trained_score": saved.get("eval_return_mean"),
    }
