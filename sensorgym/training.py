"""Training helpers: PPO (Stable-Baselines3) on a sensor-observed env, symmetric or asymmetric critic.

``make_training_env`` builds a SAME_STEP vector env observed through sensors and adapted to SB3;
``train_ppo`` trains and evaluates one run and returns its numbers. The CLI (``sensorgym train`` and
``sensorgym ablate``) and the benchmark scripts are built on these.

Example:
    >>> import sensorgym as sg
    >>> from sensorgym.training import train_ppo
    >>> result = train_ppo("Pendulum-v1", {"angle": sg.StateSensorOptions(key="obs", index=[0, 1])},
    ...                    critic="asymmetric", timesteps=256, seed=0, n_envs=2, eval_episodes=1,
    ...                    ppo_kwargs={"n_steps": 64, "batch_size": 64, "n_epochs": 1})
    >>> sorted(result)[:3], result["timesteps"] >= 256
    (['critic', 'eval_return_mean', 'eval_return_std'], True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .options import SensorOptions

__all__ = ["CRITIC_TYPES", "DEFAULT_PPO", "evaluate", "make_training_env", "train_ppo"]

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


def make_training_env(
    env_id: str,
    sensors: Mapping[str, SensorOptions],
    *,
    n_envs: int = 4,
    seed: int = 0,
    vectorization_mode: str = "sync",
    env_kwargs: dict | None = None,
    **sensor_kwargs: Any,
):
    """A SAME_STEP vector env with sensors, as an SB3 ``VecEnv``."""
    from .wrappers import make_sensor_vec
    from .wrappers.sb3 import SB3VecEnv

    venv = make_sensor_vec(
        env_id,
        n_envs,
        sensors,
        autoreset_mode="SameStep",
        seed=seed,
        vectorization_mode=vectorization_mode,
        env_kwargs=env_kwargs,
        **sensor_kwargs,
    )
    env = SB3VecEnv(venv)
    env.seed(seed)
    return env


def evaluate(model: Any, env: Any, episodes: int, deterministic: bool = True) -> list[float]:
    """Episode returns of ``model`` on an SB3 ``VecEnv`` (its first ``episodes`` finished episodes)."""
    returns: list[float] = []
    running = np.zeros(env.num_envs)
    obs = env.reset()
    while len(returns) < episodes:
        actions, _ = model.predict(obs, deterministic=deterministic)
        obs, rewards, dones, _ = env.step(actions)
        running += np.asarray(rewards, dtype=float)
        for i in np.flatnonzero(dones):
            returns.append(float(running[i]))
            running[i] = 0.0
    return returns[:episodes]


def train_ppo(
    env_id: str,
    sensors: Mapping[str, SensorOptions],
    *,
    critic: str = "asymmetric",
    timesteps: int = 100_000,
    seed: int = 0,
    n_envs: int = 4,
    eval_episodes: int = 10,
    eval_sensors: Mapping[str, SensorOptions] | None = None,
    policy_sensors: list[str] | None = None,
    ppo_kwargs: Mapping[str, Any] | None = None,
    normalize: bool = True,
    tensorboard_log: str | None = None,
    callback: Any = None,
    progress_bar: bool = False,
    on_model: Callable[[Any, Any], None] | None = None,
    env_kwargs: dict | None = None,
) -> dict[str, Any]:
    """Train PPO with a symmetric (critic reads ``"policy"``) or asymmetric (``"policy"`` + ``"critic"``)
    critic and evaluate it, optionally under a different sensor configuration (``eval_sensors``).

    Returns a dict with the evaluation mean/std return, timings and the settings of the run.
    """
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from .wrappers.sb3 import AsymmetricActorCriticPolicy

    if critic not in CRITIC_TYPES:
        raise ValueError(f"critic={critic!r}: expected one of {CRITIC_TYPES}.")
    env = make_training_env(
        env_id, sensors, n_envs=n_envs, seed=seed, policy=policy_sensors, env_kwargs=env_kwargs
    )
    if normalize:
        env = VecNormalize(
            env,
            norm_obs_keys=["policy", "critic"],
            gamma=dict(ppo_kwargs or {}).get("gamma", DEFAULT_PPO["gamma"]),
        )
    critic_keys = ("policy", "critic") if critic == "asymmetric" else ("policy",)
    kwargs = {**DEFAULT_PPO, **dict(ppo_kwargs or {})}
    model = PPO(
        AsymmetricActorCriticPolicy,
        env,
        seed=seed,
        device="cpu",
        verbose=0,
        tensorboard_log=tensorboard_log,
        policy_kwargs=dict(critic_keys=critic_keys, net_arch=dict(pi=[64, 64], vf=[64, 64])),
        **kwargs,
    )
    start = time.perf_counter()
    model.learn(timesteps, callback=callback, progress_bar=progress_bar)
    train_seconds = time.perf_counter() - start
    if on_model is not None:
        on_model(model, env)
    eval_env = make_training_env(
        env_id,
        eval_sensors or sensors,
        n_envs=n_envs,
        seed=seed + 10_000,
        policy=policy_sensors,
        env_kwargs=env_kwargs,
    )
    if normalize:
        eval_env = VecNormalize(
            eval_env, norm_obs_keys=["policy", "critic"], training=False, norm_reward=False
        )
        eval_env.obs_rms = env.obs_rms
    returns = evaluate(model, eval_env, eval_episodes)
    env.close()
    eval_env.close()
    return {
        "critic": critic,
        "seed": seed,
        "timesteps": int(model.num_timesteps),
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "eval_returns": returns,
        "train_seconds": train_seconds,
    }
