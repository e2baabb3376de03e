"""What a config is made of: the errors it raises (:class:`UserError`, :class:`ConfigError`), its tables
as dataclasses (:class:`Config` and one per table), and the checks of one entry (a table's keys, a typed
key, a list of sensor names, a value or a distribution, a sensor's options) that
:func:`sensorgym.app.config.parse_config` builds a config from. The config's names here are re-exported
by :mod:`sensorgym.app.config`.

Example:
    >>> parse_value({"dist": "Uniform", "low": 0.0, "high": 0.1}, "sensors.a.noise")
    Uniform(low=0.0, high=0.1)
    >>> print(config_error("env.n_envs", 0, "must be >= 1", "write n_envs = 4"))
    config env.n_envs = 0: must be >= 1. Fix: write n_envs = 4.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.options import SensorOptions
from ..core.randomization import Choice, Distribution, LogUniform, Normal, Uniform
from ..core.sensor import SENSOR_REGISTRY

__all__ = [
    "ARM",
    "DISTRIBUTIONS",
    "AlgorithmConfig",
    "Config",
    "ConfigError",
    "CriticConfig",
    "EnvConfig",
    "LatencyConfig",
    "SweepConfig",
    "UserError",
    "check_arm_names",
    "clean_message",
    "config_error",
    "options_class",
    "parse_sensor",
    "parse_value",
    "read_table",
    "sensor_names",
    "typed_key",
    "unknown_key",
]

DISTRIBUTIONS: dict[str, type[Distribution]] = {
    "Uniform": Uniform,
    "LogUniform": LogUniform,
    "Normal": Normal,
    "Choice": Choice,
}


class UserError(Exception):
    """A mistake the user can fix (a config, a flag, a path, a missing package): the command line prints
    its one-line message, without a traceback, and exits with code 2."""


class ConfigError(UserError, ValueError):
    """An invalid config: the message names the key path, the value and the fix."""


def clean_message(message: str) -> str:
    """One line, no doubled full stops (option messages end their fix with a full stop already)."""
    message = " ".join(str(message).split())
    return re.sub(r"\.\.(?=\s|$)", ".", message)


def config_error(path: str, value: Any, why: str, fix: str) -> ConfigError:
    return ConfigError(f"config {path} = {value!r}: {why}. Fix: {fix}.")


def unknown_key(path: str, key: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ConfigError(f"config {path}.{key}: unknown key. Fix: {hint}known keys: {sorted(known)}.")


def read_table(raw: Any, path: str, known: list[str]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise config_error(path, raw, "expected a table (mapping)", f"write [{path}] with key = value lines")
    for key in raw:
        if key not in known:
            raise unknown_key(path, key, known)
    return dict(raw)


@dataclass
class EnvConfig:
    id: str = "Pendulum-v1"
    n_envs: int = 4
    vectorization: str = "sync"
    #: the control step in seconds, for an env that does not give one (no ``dt``, no ``metadata["dt"]``)
    dt: float | None = None
    kwargs: dict = field(default_factory=dict)


@dataclass
class CriticConfig:
    type: str = "asymmetric"
    sensors: list[str] | None = None
    env_obs: bool = True
    randomization: bool = False


@dataclass
class LatencyConfig:
    """Action latency (:class:`~sensorgym.wrappers.ActionLatency`) between the policy and the env."""

    delay: Any = 0.0
    jitter: Any = 0.0
    initial_action: Any = "zero"
    critic_in_flight: bool = True
    critic_latency: bool = False


@dataclass
class AlgorithmConfig:
    name: str = "PPO"
    timesteps: int = 100_000
    seed: int = 0
    eval_episodes: int = 10
    eval_every: int = 0
    normalize: bool = True
    kwargs: dict = field(default_factory=dict)


#: the key of an explicit sweep cell that names it (``{arm = "fitted", ...}``): a label, not a setting
ARM = "arm"


@dataclass
class SweepConfig:
    seeds: list[int] = field(default_factory=lambda: [0])
    critic: list[str] = field(default_factory=lambda: ["symmetric", "asymmetric"])
    grid: dict[str, list] = field(default_factory=dict)
    list: list[dict[str, Any]] = field(default_factory=list)

    def cells(self) -> list[dict[str, Any]]:
        """The imperfection settings to run: the explicit list, or every combination of the grid."""
        if self.list:
            return [dict(c) for c in self.list]
        if not self.grid:
            return [{}]
        keys = list(self.grid)
        return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*self.grid.values())]


def check_arm_names(cells: list[Any]) -> None:
    """``arm`` in an explicit cell names it (a cell of several overrides reads better as "fitted" than as
    its values): a plain word, given for every cell or none, each name once."""
    named = [c for c in cells if isinstance(c, Mapping) and ARM in c]
    if not named:
        return
    if len(named) != len(cells):
        raise config_error("sweep.list", cells, f"names some cells ({ARM} = ...) but not all",
                           f'give every entry an {ARM}, e.g. {ARM} = "baseline"')  # fmt: skip
    names = [c[ARM] for c in named]
    for name in names:
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
            raise config_error(f"sweep.list.{ARM}", name, "expected a plain word (letters, digits, _ and -)",
                               f'write {ARM} = "fitted"')  # fmt: skip
    if len(set(names)) != len(names):
        raise config_error(f"sweep.list.{ARM}", names, "has repeated names", "name each cell once")


@dataclass
class Config:
    """A parsed, validated experiment config (see the module docstring for the format)."""

    sensors: dict[str, SensorOptions]
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: list[str] | None = None
    critic: CriticConfig = field(default_factory=CriticConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    raw: dict = field(default_factory=dict, repr=False)
    latency: LatencyConfig | None = None
    policy_age: list[str] = field(default_factory=list)
    critic_age: list[str] = field(default_factory=list)
    #: deployment conditions: name -> dotted-path overrides (:mod:`sensorgym.app.config_deploy`)
    deploy: dict[str, dict[str, Any]] = field(default_factory=dict)


def options_class(name: Any, path: str) -> type[SensorOptions]:
    by_name = {cls.__name__: cls for cls in SENSOR_REGISTRY}
    by_name.update({sensor.__name__: opts for opts, sensor in SENSOR_REGISTRY.items()})
    if not isinstance(name, str) or name not in by_name:
        known = sorted(cls.__name__ for cls in SENSOR_REGISTRY)
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise config_error(path, name, "unknown sensor options type", f"{hint}use one of {known}")
    return by_name[name]


def parse_value(raw: Any, path: str) -> Any:
    """A plain value, or a distribution written as {dist = ..., ...}; recursively for lists."""
    if isinstance(raw, Mapping):
        if "dist" not in raw:
            raise config_error(
                path,
                raw,
                "a table here must describe a distribution",
                'write {dist = "Uniform", low = 0.0, high = 0.1}',
            )
        kind = raw["dist"]
        if kind not in DISTRIBUTIONS:
            raise config_error(
                f"{path}.dist", kind, "unknown distribution", f"use one of {sorted(DISTRIBUTIONS)}"
            )
        params = {k: v for k, v in raw.items() if k != "dist"}
        try:
            return DISTRIBUTIONS[kind](**params)
        except TypeError as e:
            raise config_error(
                path,
                raw,
                f"bad parameters for {kind} ({e})",
                "Uniform/LogUniform take low, high; Normal mean, std[, low, high]; Choice values",
            ) from None
        except ValueError as e:
            raise ConfigError(clean_message(f"config {path}: {e}")) from None
    if isinstance(raw, list):
        return [parse_value(v, f"{path}[{i}]") for i, v in enumerate(raw)]
    return raw


def parse_sensor(name: str, raw: Any, path: str) -> SensorOptions:
    if not isinstance(raw, Mapping):
        raise config_error(
            path, raw, "expected a table", f'write [sensors.{name}] with type = "StateSensorOptions"'
        )
    if "type" not in raw:
        raise config_error(
            path, dict(raw), "missing the sensor type", 'add type = "StateSensorOptions" (or another)'
        )
    cls = options_class(raw["type"], f"{path}.type")
    fields = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in raw.items():
        if key == "type":
            continue
        if key not in fields:
            owners = sorted(
                c.__name__
                for c in SENSOR_REGISTRY
                if issubclass(c, cls) and key in {f.name for f in dataclasses.fields(c)}
            )
            if owners:  # an option of a subclass (e.g. an IMU's estimator: AttitudeOptions)
                raise ConfigError(
                    f"config {path}.{key}: {key!r} is an option of {owners[0]}, not of {cls.__name__}. "
                    f'Fix: write type = "{owners[0]}" in [{path}].'
                )
            raise unknown_key(path, key, ["type", *fields])
        kwargs[key] = parse_value(value, f"{path}.{key}")
    try:
        return cls(**kwargs)
    except TypeError as e:
        missing = re.search(r"missing \d+ required .*?arguments?: (.*)$", str(e))
        if missing:
            names = re.findall(r"'(\w+)'", missing.group(1))
            keys = " and ".join(f"{n} = <value>" for n in names)
            raise ConfigError(
                f"config {path}: missing {', '.join(names)} (required by {cls.__name__}). "
                f"Fix: add {keys} to [{path}]."
            ) from None
        if "Fix:" in str(e):  # the options' own message already names the option, the value and the fix
            raise ConfigError(clean_message(f"config {path}: {e}")) from None
        raise ConfigError(
            clean_message(f"config {path}: {str(e).rstrip('.')}. Fix: check the options of {cls.__name__}.")
        ) from None
    except ValueError as e:
        raise ConfigError(clean_message(f"config {path}: {e}")) from None


def typed_key(table: dict, path: str, key: str, kind: type | tuple, default: Any) -> Any:
    value = table.get(key, default)
    if kind is int and isinstance(value, bool):
        raise config_error(f"{path}.{key}", value, "expected an integer", f"write {key} = 1")
    if not isinstance(value, kind):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise config_error(f"{path}.{key}", value, f"expected {name}", f"write {key} = <{name}>")
    return value


def sensor_names(value: Any, path: str, sensors: Mapping) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise config_error(
            path, value, "expected a list of sensor names", f'write {path.split(".")[-1]} = ["a", "b"]'
        )
    unknown = [v for v in value if v not in sensors]
    if unknown:
        raise config_error(
            path, value, f"unknown sensors {unknown}", f"use names from [sensors.*]: {sorted(sensors)}"
        )
    return list(value)
