"""Scoring a policy: the returns of its first episodes on evaluation envs (:func:`evaluate`), the seed
those envs get (:func:`eval_seed`), and ``sensorgym eval``'s replay of a saved run, under its own
sensors or another config's (:func:`evaluate_saved`).

Example:
    >>> eval_seed(3), sample_sd([1.0, 2.0, 3.0])
    (10003, 1.0)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .sensor_env import config_env_kwargs, make_training_env

__all__ = ["EVAL_SEED_OFFSET", "eval_seed", "evaluate", "evaluate_saved", "sample_sd"]

#: the final evaluation's envs are seeded with ``seed + EVAL_SEED_OFFSET`` (never the training seeds)
EVAL_SEED_OFFSET = 10_000


def eval_seed(seed: int) -> int:
    """The seed of the evaluation envs of a run trained with ``seed``.

    Example:
        >>> eval_seed(3)
        10003
    """
    return int(seed) + EVAL_SEED_OFFSET


def sample_sd(values: Any) -> float:
    """The sample standard deviation (ddof=1), 0.0 for fewer than two values.

    Example:
        >>> sample_sd([1.0, 2.0, 3.0])
        1.0
    """
    xs = np.asarray(values, dtype=float)
    return float(np.std(xs, ddof=1)) if xs.size > 1 else 0.0


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
    model, env = _saved_policy_and_env(run_dir, cfg, seed, config_name)
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


def _saved_policy_and_env(run_dir: Path, cfg: Any, seed: int, config_name: str | None) -> tuple[Any, Any]:
    """The run's model and the evaluation envs of ``cfg`` (seeded ``seed``) as it reads them: the
    critic's input blanked where ``cfg`` changes it, normalized with the run's statistics; a policy input
    of another shape is refused (the envs closed again on any refusal)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    from .config import UserError
    from .saved_policy import read_run_file

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
    return model, env
