"""One run of a sweep, wherever it runs (this process, a worker process, a Ray task): train PPO with the
run's cell, critic and seed, keep it as a run directory ``runs/<run_id>/`` (``model.zip``,
``vecnormalize.pkl``, ``config.json``: the run's own config, ``result.json``: its score and episodes), as
``sensorgym train`` writes one, so that ``sensorgym eval`` reads it, and score it under each ``[deploy]``
condition with :func:`~sensorgym.app.scoring.evaluate_saved`: the run's config with the condition's
overrides, on the run's own evaluation episodes (the same seed and count, so the same initial states).

A run whose directory already holds its trained model and ``result.json`` is not trained again: it is
only scored under the conditions it lacks (a condition added to a finished study, or changed, costs its
evaluations, not the training). ``result.json`` is rewritten (atomically) after each score, so a stop
keeps every score already made.

Example:
    >>> from sensorgym.app.ablation.task import missing_conditions
    >>> import tempfile
    >>> missing_conditions(Path(tempfile.mkdtemp()), {"real": {"latency.delay": 0.04}})
    ['real']
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..config import Config, ConfigError, apply_overrides, parse_config
from ..config_deploy import deploy_column, in_cell
from .plan import Run

__all__ = [
    "RUNS",
    "check_deployable",
    "is_trained",
    "missing_conditions",
    "pack_run",
    "run_config",
    "run_one",
    "unpack_run",
]

#: the folder of a study that holds one run directory per run
RUNS = "runs"
#: what a run directory holds (``vecnormalize.pkl`` only with ``normalize = true``)
_RUN_FILES = ("model.zip", "vecnormalize.pkl", "config.json", "result.json")
#: the score fields of one evaluation, as result.json keeps them per condition
_SCORE = ("eval_return_mean", "eval_return_std", "eval_returns", "eval_episodes", "eval_seed")


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` torch intra-op threads, restoring the previous number afterwards."""
    import torch

    if threads is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(int(threads))
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def run_config(cfg: Config, run: Run) -> Config:
    """The config one run trains with: the sweep's config with the run's cell, critic type and seed."""
    return apply_overrides(cfg, {**run.cell, "critic.type": run.critic, "algorithm.seed": run.seed})


def check_deployable(cfg: Config, source: str | None = None) -> None:
    """Refuse, in one line (starting with ``source``, the config file, when given), a ``[deploy]``
    condition that changes more than imperfection levels in any sweep cell: what the trained policy reads
    (its sensors, their index or history, its age inputs: the shapes it was trained on), the env, its
    kwargs or control step, or ``n_envs`` (the evaluation episodes). :func:`evaluate_saved` refuses those
    too, after the training; this says so before it."""
    from ..saved_policy import policy_input_differences

    for cell in [{}, *(c for c in cfg.sweep.cells() if c)]:
        trained = apply_overrides(cfg, cell) if cell else cfg
        for name, overrides in cfg.deploy.items():
            changed = policy_input_differences(trained, apply_overrides(trained, overrides))
            if changed:
                raise ConfigError(
                    f"{source + ': ' if source else ''}config deploy.{name}{in_cell(cell)}: changes what the "
                    f"trained policy reads or the env it runs in, not only imperfection levels: "
                    f"{'; '.join(changed)}. Fix: keep the env, its kwargs and control step, n_envs, and the "
                    "policy's sensors, their index and history_length; override only levels (noise, bias, "
                    "delay, jitter, resolution, update_period, dropout, [latency], ...)."
                )


def _plain(value: Any) -> Any:
    """JSON data (a condition's overrides, as result.json stores and compares them)."""
    return json.loads(json.dumps(value, default=str))


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)  # a kill mid-write leaves the previous file whole


def _finished(run_dir: Path, run: Run) -> dict[str, Any] | None:
    """The result of the run trained in ``run_dir``, or ``None`` when it holds none (or a damaged one)."""
    try:
        result = json.loads((run_dir / "result.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict) or result.get("run_id") != run.run_id:
        return None
    return result if (run_dir / "model.zip").is_file() else None


def is_trained(run_dir: Path, run: Run) -> bool:
    """Whether ``run_dir`` holds the trained ``run`` (its model and its ``result.json``)."""
    return _finished(Path(run_dir), run) is not None


def _missing(result: Mapping[str, Any] | None, conditions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    stored = (result or {}).get("deploy") or {}
    return [
        name
        for name, overrides in conditions.items()
        if name not in stored or stored[name].get("overrides") != _plain(dict(overrides))
    ]


def missing_conditions(run_dir: Path, conditions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The conditions the run in ``run_dir`` has no score under (or a score under other overrides of the
    same name); all of them when it holds no finished run."""
    try:
        result = json.loads((Path(run_dir) / "result.json").read_text())
    except (OSError, ValueError):
        result = None
    return _missing(result if isinstance(result, dict) else None, conditions)


def pack_run(run_dir: Path) -> dict[str, bytes]:
    """The files of a run directory as bytes (a Ray task's run directory travels to and from the driver)."""
    return {name: (run_dir / name).read_bytes() for name in _RUN_FILES if (run_dir / name).is_file()}


def unpack_run(files: Mapping[str, bytes], run_dir: Path) -> None:
    """Write :func:`pack_run`'s files into ``run_dir`` (``result.json`` last: the run counts as finished
    only once every other file is whole)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in sorted(files, key=lambda n: n == "result.json"):
        tmp = run_dir / (name + ".tmp")
        tmp.write_bytes(files[name])
        os.replace(tmp, run_dir / name)


def _progress_callback(channel: Any, run_id: str, total: int) -> Any:
    from stable_baselines3.common.callbacks import BaseCallback

    class Report(BaseCallback):
        def _on_step(self) -> bool:
            if self.n_calls % 50 == 0:
                channel.put((run_id, self.num_timesteps, total))
            return True

        def _on_training_end(self) -> None:
            channel.put((run_id, self.num_timesteps, total))

    return Report()


def _train(cfg: Config, run: Run, run_dir: Path, progress: Any, threads: int) -> dict[str, Any]:
    """Train the run, save it in ``run_dir`` and return its result (as saved in ``result.json``)."""
    from ..training import planned_timesteps, rollout_steps, train_ppo

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "result.json").unlink(missing_ok=True)  # a stale one must not vouch for the new model
    planned = planned_timesteps(cfg.algorithm.timesteps, rollout_steps(cfg.algorithm.kwargs, cfg.env.n_envs))
    callback = _progress_callback(progress, run.run_id, planned) if progress is not None else None

    def save(model: Any, env: Any) -> None:
        model.save(run_dir / "model.zip")
        if hasattr(env, "obs_rms"):
            env.save(str(run_dir / "vecnormalize.pkl"))

    # the run's critic and seed; no learning curve (a sweep scores each run once, at its end)
    result = train_ppo(cfg, critic=run.critic, seed=run.seed, eval_every=0, callback=callback, on_model=save)
    own = {k: v for k, v in cfg.raw.items() if k not in ("sweep", "deploy")}
    _write_json(run_dir / "config.json", own)
    result.update(run_id=run.run_id, cell=dict(run.cell), torch_threads=threads, deploy={})
    _write_json(run_dir / "result.json", result)
    return result


def _score(cfg: Config, run_dir: Path, result: dict[str, Any], names: list[str]) -> None:
    """Score the run under each condition of ``names`` on its own evaluation episodes, saving each score
    in ``result.json`` as soon as it is made."""
    from ..scoring import evaluate_saved

    stored = result.setdefault("deploy", {})
    for name in names:
        overrides = cfg.deploy[name]
        scored = evaluate_saved(run_dir, apply_overrides(cfg, overrides), config_name=f"[deploy.{name}]")
        stored[name] = {"overrides": _plain(dict(overrides)), **{k: scored[k] for k in _SCORE}}
        _write_json(run_dir / "result.json", result)


def _row(run: Run, result: Mapping[str, Any], conditions: Mapping[str, Any]) -> dict[str, Any]:
    """The run's ``results.csv`` row: its setting, its own score, one column per deployment condition."""
    row: dict[str, Any] = {"run_id": run.run_id, "critic": run.critic, "seed": run.seed, **run.cell}
    row.update(
        {
            "eval_return_mean": result["eval_return_mean"],
            "eval_return_std": result["eval_return_std"],
            "eval_episodes": result["eval_episodes"],
            "eval_returns": " ".join(f"{x:.6g}" for x in result["eval_returns"]),
            "timesteps": result["timesteps"],
            "timesteps_budget": result["timesteps_budget"],
            "train_seconds": result["train_seconds"],
            "torch_threads": result["torch_threads"],
        }
    )
    for name in conditions:
        row[deploy_column(name)] = result["deploy"][name]["eval_return_mean"]
    return row


def run_one(
    cfg_raw: dict,
    run: Run,
    progress: Any = None,
    threads: int | None = None,
    run_dir: str | Path | None = None,
    files: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """Train (unless ``run_dir`` holds it already), save and score one run with ``threads`` torch
    intra-op threads (``None``: leave the process's setting); returns its ``results.csv`` row.

    ``run_dir``: the run's directory (``<out>/runs/<run_id>``). Without one (a Ray task, whose node may
    not share the driver's disk) the run is kept in a temporary folder, seeded with ``files``
    (:func:`pack_run` of the run's directory, when it has one), and the row carries its files back under
    ``"_files"`` for the driver to :func:`unpack_run`."""
    import torch

    cfg = run_config(parse_config(cfg_raw), run)
    temporary = run_dir is None
    with contextlib.ExitStack() as stack:
        if temporary:
            run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sensorgym-run-")))
            unpack_run(files or {}, run_dir)
        run_dir = Path(run_dir)
        with _torch_threads(threads):
            result = _finished(run_dir, run)
            if result is None:
                result = _train(cfg, run, run_dir, progress, torch.get_num_threads())
            _score(cfg, run_dir, result, _missing(result, cfg.deploy))
        row = _row(run, result, cfg.deploy)
        if temporary:  # the driver keeps the run directory
            row["_files"] = pack_run(run_dir)
    return row
