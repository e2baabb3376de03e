"""A trained run's policy, driven outside SB3's ``VecEnv`` (``sensorgym inspect --model``).

The actor must see observations exactly as in training and evaluation: normalized with the run's
``VecNormalize`` statistics (``vecnormalize.pkl``), in the shape it was trained on. The critic input is
never read by the actor, so it is blanked to the trained shape (a config may change what the critic sees).

Example:
    >>> from sensorgym.app.saved_policy import SavedPolicy
    >>> SavedPolicy  # doctest: +ELLIPSIS
    <class '...SavedPolicy'>
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .config import UserError

__all__ = ["SavedPolicy", "check_run_dir", "policy_input_differences", "read_run_file"]


def read_run_file(run_dir: Path, name: str, load: Callable[[Path], Any]) -> Any:
    """``load(run_dir / name)``, or one :class:`~sensorgym.app.config.UserError` naming the file, what is
    wrong with it and the fix, where the file is empty, truncated or damaged (a copy cut short, a full
    disk while it was written). Which exception a damaged file raises depends on the loader and where the
    file was cut (SB3's ValueError or AssertionError, pickle's EOFError or UnpicklingError, json's
    ValueError, zipfile's BadZipFile), so any failure to load an existing file is reported so, with the
    loader's own words kept in the message.

    Example:
        >>> import json, tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> _ = (run / "result.json").write_text('{"eval_')
        >>> try:
        ...     read_run_file(run, "result.json", lambda p: json.loads(p.read_text()))
        ... except UserError as e:
        ...     str(e).split(" (")[0].endswith("result.json cannot be read"), "Fix: restore" in str(e)
        (True, True)
    """
    path = run_dir / name
    try:
        return load(path)
    except UserError:
        raise
    except PermissionError:
        raise UserError(
            f"{path} cannot be read: permission denied. Fix: make it readable (chmod u+r)."
        ) from None
    except Exception as e:
        try:
            empty = path.stat().st_size == 0
        except OSError:
            empty = False
        what = (
            "is empty (0 bytes)"
            if empty
            else f"cannot be read ({type(e).__name__}: {e}): it is truncated or damaged"
        )
        if name == "config.json":
            again = f"sensorgym train --config YOUR_CONFIG --out {run_dir} --force"
        else:
            again = f"sensorgym train --config {run_dir / 'config.json'} --out {run_dir} --force"
        raise UserError(
            f"{path} {what}. Fix: restore it from a copy, or train the run again: {again} (what the folder "
            "holds is moved aside, not deleted)."
        ) from None


def check_run_dir(run_dir: Path, flag: str) -> Path:
    """The ``config.json`` of the run directory ``run_dir`` that holds a trained model, or a
    :class:`~sensorgym.app.config.UserError` naming the fix: a file instead of a folder, no such folder, a
    folder without a run, or a run whose training was interrupted (its checkpoint names ``--resume``).

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> run = Path(tempfile.mkdtemp())
        >>> (run / "checkpoint").mkdir(); _ = (run / "config.json").write_text("{}")
        >>> _ = (run / "checkpoint" / "progress.json").write_text('{"timesteps": 69632}')
        >>> try:
        ...     check_run_dir(run, "--model")
        ... except UserError as e:
        ...     "interrupted at 69,632 steps" in str(e), f"sensorgym train --out {run} --resume" in str(e)
        (True, True)
    """
    from .outdir import checkpoint_steps

    fix = "Fix: pass the run directory `sensorgym train --out` wrote (default: sensorgym_outputs/train)."
    if run_dir.is_file():
        raise UserError(f"{flag} {run_dir} is a file; it needs a run directory. {fix}")
    if not run_dir.exists():
        raise UserError(f"{flag} {run_dir}: no such run directory. {fix}")
    if (run_dir / "model.zip").exists() and (run_dir / "config.json").exists():
        return run_dir / "config.json"
    steps = checkpoint_steps(run_dir / "checkpoint")
    if steps is not None:  # trained, but interrupted before the end: the final model is not written yet
        at = f" at {steps:,} steps" if steps >= 0 else ""
        raise UserError(
            f"{flag} {run_dir}: its training was interrupted{at}, so it holds a checkpoint, not a trained "
            f"model. Fix: finish its training with `sensorgym train --out {run_dir} --resume`, then run this "
            "again."
        )
    raise UserError(f"{flag} {run_dir}: no trained model there (model.zip, config.json). {fix}")


def policy_input_differences(trained: Any, other: Any) -> list[str]:
    """What ``other`` (a config) changes in what the policy trained under ``trained`` reads, besides the
    imperfection levels: the env, its kwargs (``frame_skip``, dynamics) and its control step (``[env] dt``,
    or the env's own), the number of envs (the evaluation's episodes), the policy's sensors, their class,
    and every option that says what is measured (key, index, shape, body, joints, ..., ``history_length``).
    Levels (noise, bias, delay, jitter, resolution, random walk, sampler options, padding, NaN policy, a
    replayed recording, ``[latency]``, and what an options class declares in ``level_options``: an IMU's
    per-field terms, an attitude estimator and its gains) may change. Empty: a paired comparison is
    meaningful.

    Example:
        >>> from sensorgym.app.config import parse_config
        >>> base = {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs", "index": [0, 1]}}}
        >>> swapped = {"sensors": {"a": {"type": "StateSensorOptions", "key": "obs", "index": [1, 0],
        ...                              "noise": 0.1}}}
        >>> policy_input_differences(parse_config(base), parse_config(swapped))
        ['sensors.a.index: [0, 1] -> [1, 0]']
    """
    import dataclasses

    from ..core.options import SimpleSensorOptions

    levels = {f.name for f in dataclasses.fields(SimpleSensorOptions)} - {"history_length"}
    out = []
    for what, a, b in (
        ("env.id", trained.env.id, other.env.id),
        ("env.n_envs", trained.env.n_envs, other.env.n_envs),
    ):
        if a != b:
            out.append(f"{what}: {a!r} -> {b!r}")
    # the env itself: its kwargs (frame_skip, gravity, ...) and control step; the same policy at another
    # control rate or in other dynamics is not a like-for-like score
    for key in sorted(set(trained.env.kwargs) | set(other.env.kwargs)):
        a, b = trained.env.kwargs.get(key, _UNSET), other.env.kwargs.get(key, _UNSET)
        if a != b:
            out.append(f"env.kwargs.{key}: {_plain(a)} -> {_plain(b)}")
    if trained.env.id == other.env.id and (
        trained.env.dt != other.env.dt or trained.env.kwargs != other.env.kwargs
    ):
        from .control_step import own_control_step

        steps = []
        for cfg in (trained, other):  # the step the run actually used: the env's own unless [env] dt gives it
            steps.append(
                float(cfg.env.dt) if cfg.env.dt is not None else own_control_step(cfg.env.id, cfg.env.kwargs)
            )
        if steps[0] != steps[1]:
            a, b = (f"{x:g} s" if x is not None else "unknown" for x in steps)
            out.append(f"control step (env.dt): {a} -> {b}")
    names_a = trained.policy if trained.policy is not None else list(trained.sensors)
    names_b = other.policy if other.policy is not None else list(other.sensors)
    if names_a != names_b:
        return [*out, f"policy sensors: {names_a} -> {names_b}"]
    for name in names_a:
        a, b = trained.sensors[name], other.sensors[name]
        if type(a) is not type(b):
            out.append(f"sensors.{name}: {type(a).__name__} -> {type(b).__name__}")
            continue
        own = levels | set(getattr(type(a), "level_options", ()))
        for f in dataclasses.fields(a):
            if f.name not in own and getattr(a, f.name) != getattr(b, f.name):
                out.append(
                    f"sensors.{name}.{f.name}: {_plain(getattr(a, f.name))} -> {_plain(getattr(b, f.name))}"
                )
    if trained.policy_age != other.policy_age:
        out.append(f"policy.age: {trained.policy_age} -> {other.policy_age}")
    return out


class _Unset:
    def __repr__(self) -> str:
        return "(unset)"


_UNSET = _Unset()  # a key one config sets and the other does not


def _plain(value: Any) -> str:
    return repr(list(value) if isinstance(value, tuple) else value)


class SavedPolicy:
    """``predict(obs)`` of the model in ``run_dir`` on raw sensor observations (a ``{"policy", "critic"}``
    batch), as the run's own evaluation feeds it."""

    def __init__(self, run_dir: str | Path, config_name: str = "the config") -> None:
        from stable_baselines3 import PPO

        run_dir = Path(run_dir)
        self.run_dir, self.config_name = run_dir, config_name
        self.model = read_run_file(run_dir, "model.zip", lambda p: PPO.load(p, device="cpu"))
        self.vecnormalize: Any = None
        if (run_dir / "vecnormalize.pkl").exists():
            # its statistics only: normalize_obs needs no env
            self.vecnormalize = read_run_file(
                run_dir, "vecnormalize.pkl", lambda p: pickle.loads(p.read_bytes())
            )

    def predict(self, obs: dict, deterministic: bool = True) -> tuple[np.ndarray, Any]:
        spaces = self.model.observation_space
        policy = np.asarray(obs["policy"], dtype=np.float32)
        want, got = spaces["policy"].shape, policy.shape[1:]
        if want != got:
            raise UserError(
                f"{self.config_name}: its policy sensors give observations of shape {got}, the model in "
                f"{self.run_dir} was trained on {want}. Fix: inspect with the run's own config "
                f"(--config {self.run_dir / 'config.json'}) or one that changes only imperfection levels."
            )
        batch = {"policy": policy, "critic": np.zeros((len(policy), *spaces["critic"].shape), np.float32)}
        if self.vecnormalize is not None:
            batch = self.vecnormalize.normalize_obs(batch)
        return self.model.predict(batch, deterministic=deterministic)
