"""The ``[deploy]`` table of a config: named deployment conditions, each a set of overrides of the run's
config that says what the trained policy meets where it will run (the replayed sensor's levels, the
estimator's, a measured delay), written as the sweep's grid keys are::

    [deploy.real]
    "sensors.angle.noise" = 0.12
    "latency.delay" = 0.04

or nested, which reads the same (``[deploy.real.latency]`` with ``delay = 0.04``). ``sensorgym ablate``
scores every trained run under each condition too, on its own evaluation episodes
(:mod:`sensorgym.app.ablation.task`). The training settings (``algorithm``, ``critic``) are not part of a
deployment and are refused here, with every value a condition sets (on the config and on each sweep
cell). A condition changes imperfection levels only, as ``sensorgym eval --config`` may: one that changes
the env, its kwargs and control step, the number of envs or what the policy reads (its sensors, their
index, history or age, so the shapes it was trained on) is refused before any run by
:func:`sensorgym.app.ablation.task.check_deployable` (which reads the trained policy's inputs, a layer
above the config).

Example:
    >>> parse_deploy({"real": {"sensors.angle.noise": 0.1, "latency": {"delay": 0.04}}})
    {'real': {'sensors.angle.noise': 0.1, 'latency.delay': 0.04}}
    >>> deploy_column("real")
    'deploy_real_return_mean'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .config_values import ConfigError, config_error

__all__ = ["DEPLOYABLE", "check_deploy", "deploy_column", "in_cell", "parse_deploy"]

#: the tables a deployment condition may override (the rest are how the policy was trained)
DEPLOYABLE = ("sensors", "latency", "env", "policy")
_TRAINING = {
    "algorithm": "how the policy is trained and scored (budget, seed, evaluation episodes)",
    "critic": "the critic, which is not deployed (only the actor runs on the robot)",
}
#: a condition's name becomes a results.csv column (deploy_<name>_return_mean): a plain word
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def deploy_column(name: str) -> str:
    """The ``results.csv`` column of a run's score under the deployment condition ``name``."""
    return f"deploy_{name}_return_mean"


def _flatten(table: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Nested tables as dotted paths; a distribution (a table with ``dist``) is a value, not a table."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value and "dist" not in value:
            out.update(_flatten(value, path))
        else:
            out[path] = value
    return out


def parse_deploy(raw: Any, sensors: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """The conditions of a ``[deploy]`` table: name -> dotted-path overrides. Checks the form only (names,
    paths, sensors named); :func:`check_deploy` checks the values against every run of the sweep."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise config_error(
            "deploy", raw, "expected a table of named conditions",
            'write [deploy.real] with "latency.delay" = 0.04',
        )  # fmt: skip
    conditions = {}
    for name, table in raw.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise config_error(
                "deploy", name, "a condition's name must be a plain word (letters, digits, _ and -)",
                "rename it, e.g. [deploy.real]",
            )  # fmt: skip
        if not isinstance(table, Mapping) or not table:
            raise config_error(
                f"deploy.{name}", table, "expected a non-empty table of overrides",
                'write [deploy.NAME] with lines such as "sensors.angle.noise" = 0.1',
            )  # fmt: skip
        overrides = _flatten(table, "")
        for path in overrides:
            _check_path(name, path, overrides[path], sensors)
        conditions[name] = overrides
    return conditions


def _check_path(name: str, path: str, value: Any, sensors: Mapping[str, Any] | None) -> None:
    parts = path.split(".")
    where = f"deploy.{name}.{path}"
    if parts[0] in _TRAINING:
        raise config_error(
            where, value, f"a deployment condition cannot change {_TRAINING[parts[0]]}",
            f"override only {', '.join(DEPLOYABLE)} keys here; [{parts[0]}] applies to training",
        )  # fmt: skip
    if parts[0] not in DEPLOYABLE or len(parts) < 2 or not all(parts):
        raise config_error(
            where, value, f"an override path must start with one of {', '.join(DEPLOYABLE)}",
            'write e.g. "sensors.angle.noise" = 0.1 or "latency.delay" = 0.04',
        )  # fmt: skip
    if parts[0] == "sensors" and sensors is not None and parts[1] not in sensors:
        raise config_error(
            where, value, f"no sensor {parts[1]!r} in [sensors]", f"use one of {sorted(sensors)}"
        )


def check_deploy(cfg: Any, cells: list[dict[str, Any]], apply: Any) -> None:
    """Every condition of ``cfg.deploy`` applied to every sweep cell gives a valid config, or a
    :class:`ConfigError` in one line naming the condition (and the cell, where it matters), the key, the
    value and the fix. ``apply`` is :func:`~sensorgym.app.config.apply_overrides`. Whether a condition
    changes only imperfection levels is checked where runs are scored
    (:func:`sensorgym.app.ablation.task.check_deployable`, before any run)."""
    # the config itself first: a mistake in a condition is named without a sweep cell that plays no part
    for cell in [{}, *(c for c in cells if c)]:
        run_cfg = apply(cfg, cell) if cell else cfg
        for name, overrides in cfg.deploy.items():
            try:
                apply(run_cfg, overrides)
            except ConfigError as e:
                inner = str(e).removeprefix("config ")
                raise ConfigError(f"config deploy.{name}{in_cell(cell)}: {inner}") from None


def in_cell(cell: dict[str, Any]) -> str:
    """`` (in sweep cell {key = value, ...})`` for a message about a cell (empty for the config itself)."""
    return f" (in sweep cell {{{', '.join(f'{k} = {v!r}' for k, v in cell.items())}}})" if cell else ""
