"""Experiment configs: env, sensors, critic, algorithm and sweep, from TOML or YAML, validated.

A config is a mapping with these tables (all but ``sensors`` optional)::

    [env]        id = "Pendulum-v1", n_envs = 4, vectorization = "sync", kwargs = {...},
                 dt = 0.02 (only for an env that does not give its control step)
    [sensors.<name>]
                 type = "StateSensorOptions" (an options class name), then any option of that class;
                 a distribution is written {dist = "LogUniform", low = 0.01, high = 0.1}
    [policy]     sensors = [...]                 # what the actor sees (default: every sensor)
                 age = [...]                     # sensors whose reading's age (s) the actor also sees
    [critic]     type = "asymmetric" | "symmetric", sensors = [...], env_obs = true, randomization = false,
                 age = [...]                     # sensors whose reading's age the critic also reads
    [latency]    delay = 0.02, jitter = 0.01     # action latency (s; values or distributions)
                 initial_action = "zero" | "first" | [a0, a1, ...], critic_in_flight = true,
                 critic_latency = false          # the critic reads the actions in flight / [delay, jitter]
    [algorithm]  name = "PPO", timesteps = 100000, seed = 0, eval_episodes = 10, normalize = true,
                 eval_every = 0, kwargs = {...}  # PPO keyword arguments
    [sweep]      seeds = [0, 1, 2], critic = ["symmetric", "asymmetric"],
                 grid = {"sensors.angle.noise" = [0.0, 0.05, 0.2]}   # every combination
                        (any key: "sensors.imu.update_period", "sensors.imu.dropout", "latency.delay", ...)
                 or list = [{"sensors.angle.noise" = 0.0}, ...]    # explicit cells

Every key is checked; an error names the key path, the value and the fix (and, from
:func:`load_config`, the file).

Example:
    >>> from sensorgym.app.config import parse_config
    >>> cfg = parse_config({"sensors": {"angle": {"type": "StateSensorOptions", "key": "obs",
    ...                     "noise": {"dist": "LogUniform", "low": 0.01, "high": 0.1}}}})
    >>> type(cfg.sensors["angle"].noise).__name__, cfg.env.id, cfg.critic.type
    ('LogUniform', 'Pendulum-v1', 'asymmetric')
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.options import SensorOptions
from ..core.randomization import Choice, Distribution, LogUniform, Normal, Uniform
from ..core.sensor import SENSOR_REGISTRY

__all__ = [
    "AlgorithmConfig",
    "Config",
    "ConfigError",
    "CriticConfig",
    "EnvConfig",
    "LatencyConfig",
    "UserError",
    "apply_overrides",
    "check_env_ids",
    "load_config",
    "parse_config",
    "to_plain",
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


def _clean(message: str) -> str:
    """One line, no doubled full stops (option messages end their fix with a full stop already)."""
    message = " ".join(str(message).split())
    return re.sub(r"\.\.(?=\s|$)", ".", message)


def _err(path: str, value: Any, why: str, fix: str) -> ConfigError:
    return ConfigError(f"config {path} = {value!r}: {why}. Fix: {fix}.")


def _unknown(path: str, key: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return ConfigError(f"config {path}.{key}: unknown key. Fix: {hint}known keys: {sorted(known)}.")


def _table(raw: Any, path: str, known: list[str]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise _err(path, raw, "expected a table (mapping)", f"write [{path}] with key = value lines")
    for key in raw:
        if key not in known:
            raise _unknown(path, key, known)
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


def _options_class(name: Any, path: str) -> type[SensorOptions]:
    by_name = {cls.__name__: cls for cls in SENSOR_REGISTRY}
    by_name.update({sensor.__name__: opts for opts, sensor in SENSOR_REGISTRY.items()})
    if not isinstance(name, str) or name not in by_name:
        known = sorted(cls.__name__ for cls in SENSOR_REGISTRY)
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise _err(path, name, "unknown sensor options type", f"{hint}use one of {known}")
    return by_name[name]


def _value(raw: Any, path: str) -> Any:
    """A plain value, or a distribution written as {dist = ..., ...}; recursively for lists."""
    if isinstance(raw, Mapping):
        if "dist" not in raw:
            raise _err(
                path,
                raw,
                "a table here must describe a distribution",
                'write {dist = "Uniform", low = 0.0, high = 0.1}',
            )
        kind = raw["dist"]
        if kind not in DISTRIBUTIONS:
            raise _err(f"{path}.dist", kind, "unknown distribution", f"use one of {sorted(DISTRIBUTIONS)}")
        params = {k: v for k, v in raw.items() if k != "dist"}
        try:
            return DISTRIBUTIONS[kind](**params)
        except TypeError as e:
            raise _err(
                path,
                raw,
                f"bad parameters for {kind} ({e})",
                "Uniform/LogUniform take low, high; Normal mean, std[, low, high]; Choice values",
            ) from None
        except ValueError as e:
            raise ConfigError(_clean(f"config {path}: {e}")) from None
    if isinstance(raw, list):
        return [_value(v, f"{path}[{i}]") for i, v in enumerate(raw)]
    return raw


def _sensor(name: str, raw: Any, path: str) -> SensorOptions:
    if not isinstance(raw, Mapping):
        raise _err(path, raw, "expected a table", f'write [sensors.{name}] with type = "StateSensorOptions"')
    if "type" not in raw:
        raise _err(path, dict(raw), "missing the sensor type", 'add type = "StateSensorOptions" (or another)')
    cls = _options_class(raw["type"], f"{path}.type")
    fields = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in raw.items():
        if key == "type":
            continue
        if key not in fields:
            raise _unknown(path, key, ["type", *fields])
        kwargs[key] = _value(value, f"{path}.{key}")
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
            raise ConfigError(_clean(f"config {path}: {e}")) from None
        raise ConfigError(
            _clean(f"config {path}: {str(e).rstrip('.')}. Fix: check the options of {cls.__name__}.")
        ) from None
    except ValueError as e:
        raise ConfigError(_clean(f"config {path}: {e}")) from None


def _typed(table: dict, path: str, key: str, kind: type | tuple, default: Any) -> Any:
    value = table.get(key, default)
    if kind is int and isinstance(value, bool):
        raise _err(f"{path}.{key}", value, "expected an integer", f"write {key} = 1")
    if not isinstance(value, kind):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _err(f"{path}.{key}", value, f"expected {name}", f"write {key} = <{name}>")
    return value


def _names(value: Any, path: str, sensors: Mapping) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _err(
            path, value, "expected a list of sensor names", f'write {path.split(".")[-1]} = ["a", "b"]'
        )
    unknown = [v for v in value if v not in sensors]
    if unknown:
        raise _err(
            path, value, f"unknown sensors {unknown}", f"use names from [sensors.*]: {sorted(sensors)}"
        )
    return list(value)


def parse_config(raw: Mapping[str, Any]) -> Config:
    """Validate a config mapping (e.g. parsed TOML/YAML) into a :class:`Config`."""
    cfg = _parse(raw)
    for cell in cfg.sweep.cells():  # every sweep cell must give a valid config
        if not isinstance(cell, Mapping):
            raise _err(
                "sweep.list",
                cell,
                "each entry must be a table of overrides",
                'write {"sensors.a.noise" = 0.1}',
            )
        if cell:
            try:
                apply_overrides(cfg, cell)
            except ConfigError as e:
                if str(e).startswith("config sweep override"):
                    raise
                where = ", ".join(f"{k} = {v!r}" for k, v in cell.items())
                raise ConfigError(f"sweep cell {{{where}}}: {e}") from None
    return cfg


def _parse(raw: Mapping[str, Any]) -> Config:
    """The config's tables, each validated in this order (the first mistake is the one reported)."""
    top = _table(raw, "<root>", ["env", "sensors", "policy", "critic", "algorithm", "latency", "sweep"])
    sensors_raw = top.get("sensors")
    if not isinstance(sensors_raw, Mapping) or not sensors_raw:
        raise _err(
            "sensors",
            sensors_raw,
            "at least one sensor is needed",
            'add [sensors.angle] with type = "StateSensorOptions" and key = "obs"',
        )
    sensors = {name: _sensor(name, value, f"sensors.{name}") for name, value in sensors_raw.items()}
    env = _env(top.get("env"))
    p = _table(top.get("policy"), "policy", ["sensors", "age"])
    policy = _names(p.get("sensors"), "policy.sensors", sensors)
    policy_age = _names(p.get("age"), "policy.age", sensors) or []
    critic, critic_age = _critic(top.get("critic"), sensors)
    algorithm = _algorithm(top.get("algorithm"))
    latency = _latency(top.get("latency"), sensors)
    sweep = _sweep(top.get("sweep"), algorithm.seed)
    return Config(
        sensors=sensors,
        env=env,
        policy=policy,
        critic=critic,
        algorithm=algorithm,
        sweep=sweep,
        raw=copy.deepcopy(dict(raw)),
        latency=latency,
        policy_age=policy_age,
        critic_age=critic_age,
    )


def _env(raw: Any) -> EnvConfig:
    """The ``[env]`` table."""
    e = _table(raw, "env", ["id", "n_envs", "vectorization", "kwargs", "dt"])
    env = EnvConfig(
        id=_typed(e, "env", "id", str, "Pendulum-v1"),
        n_envs=_typed(e, "env", "n_envs", int, 4),
        vectorization=_typed(e, "env", "vectorization", str, "sync"),
        kwargs=dict(_typed(e, "env", "kwargs", dict, {})),
        dt=e.get("dt"),
    )
    if env.dt is not None and (
        isinstance(env.dt, bool) or not isinstance(env.dt, (int, float)) or env.dt <= 0
    ):
        raise _err("env.dt", env.dt, "must be a number of seconds > 0", "write e.g. dt = 0.02")
    if env.n_envs < 1:
        raise _err("env.n_envs", env.n_envs, "must be >= 1", "write n_envs = 4")
    if env.vectorization not in ("sync", "async"):
        raise _err("env.vectorization", env.vectorization, "must be sync or async", 'write "sync"')
    return env


def _critic(raw: Any, sensors: Mapping) -> tuple[CriticConfig, list[str]]:
    """The ``[critic]`` table: the critic and the sensors whose age it reads."""
    c = _table(raw, "critic", ["type", "sensors", "env_obs", "randomization", "age"])
    critic_age = _names(c.get("age"), "critic.age", sensors) or []
    critic = CriticConfig(
        type=_typed(c, "critic", "type", str, "asymmetric"),
        sensors=_names(c.get("sensors"), "critic.sensors", sensors),
        env_obs=_typed(c, "critic", "env_obs", bool, True),
        randomization=_typed(c, "critic", "randomization", bool, False),
    )
    if critic.type not in ("symmetric", "asymmetric"):
        raise _err("critic.type", critic.type, "must be symmetric or asymmetric", 'write type = "asymmetric"')
    if critic.sensors == [] and not critic.env_obs:
        raise _err(
            "critic.sensors", [], "with env_obs = false the critic would read nothing",
            "list at least one sensor, or set env_obs = true",
        )  # fmt: skip
    return critic, critic_age


def _algorithm(raw: Any) -> AlgorithmConfig:
    """The ``[algorithm]`` table."""
    a = _table(
        raw,
        "algorithm",
        ["name", "timesteps", "seed", "eval_episodes", "eval_every", "normalize", "kwargs"],
    )
    algorithm = AlgorithmConfig(
        name=_typed(a, "algorithm", "name", str, "PPO"),
        timesteps=_typed(a, "algorithm", "timesteps", int, 100_000),
        seed=_typed(a, "algorithm", "seed", int, 0),
        eval_episodes=_typed(a, "algorithm", "eval_episodes", int, 10),
        eval_every=_typed(a, "algorithm", "eval_every", int, 0),
        normalize=_typed(a, "algorithm", "normalize", bool, True),
        kwargs=dict(_typed(a, "algorithm", "kwargs", dict, {})),
    )
    if algorithm.name != "PPO":
        raise _err(
            "algorithm.name", algorithm.name, "only PPO (Stable-Baselines3) is supported", 'write "PPO"'
        )
    if algorithm.timesteps < 1:
        raise _err(
            "algorithm.timesteps", algorithm.timesteps, "must be >= 1 (env steps to train)", "write 100000"
        )
    if algorithm.eval_episodes < 1:
        raise _err(
            "algorithm.eval_episodes", algorithm.eval_episodes, "must be >= 1 (episodes to score)", "write 20"
        )
    if algorithm.eval_every < 0:
        raise _err(
            "algorithm.eval_every",
            algorithm.eval_every,
            "must be >= 0 (0: no learning curve)",
            "write 0 or e.g. 20000",
        )
    return algorithm


def _sweep(raw: Any, seed: int) -> SweepConfig:
    """The ``[sweep]`` table (its seeds default to the algorithm's ``seed``)."""
    s = _table(raw, "sweep", ["seeds", "critic", "grid", "list"])
    sweep = SweepConfig(
        seeds=list(_typed(s, "sweep", "seeds", list, [seed])),
        critic=list(_typed(s, "sweep", "critic", list, ["symmetric", "asymmetric"])),
        grid=dict(_typed(s, "sweep", "grid", dict, {})),
        list=list(_typed(s, "sweep", "list", list, [])),
    )
    for k in sweep.critic:
        if k not in ("symmetric", "asymmetric"):
            raise _err(
                "sweep.critic",
                sweep.critic,
                f"unknown critic type {k!r}",
                'use "symmetric" and/or "asymmetric"',
            )
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in sweep.seeds) or not sweep.seeds:
        raise _err(
            "sweep.seeds", sweep.seeds, "expected a non-empty list of integers", "write seeds = [0, 1, 2]"
        )
    if sweep.grid and sweep.list:
        raise _err("sweep", s, "give either grid or list, not both", "remove one of them")
    for name, values in (("seeds", sweep.seeds), ("critic", sweep.critic)):
        if len(set(values)) != len(values):  # each run would be trained and counted twice
            raise _err(f"sweep.{name}", values, "has repeated values", "list each value once")
    for key, values in sweep.grid.items():
        if not isinstance(values, list) or not values:
            raise _err(
                f"sweep.grid.{key}", values, "expected a non-empty list of values", f'write "{key}" = [..]'
            )
        if len({repr(v) for v in values}) != len(values):
            raise _err(f"sweep.grid.{key}", values, "has repeated values", "list each level once")
    own_axes = {"critic.type": "sweep.critic", "algorithm.seed": "sweep.seeds"}
    for key in [*sweep.grid, *(k for cell in sweep.list if isinstance(cell, Mapping) for k in cell)]:
        if key in own_axes:  # every run takes these from the sweep's own axes: a level would change nothing
            where = f"sweep.grid.{key}" if key in sweep.grid else "sweep.list"
            raise _err(where, key, "is set by the sweep itself for every run", f"use {own_axes[key]} = [...]")
    return sweep


def _latency(raw: Any, sensors: Mapping) -> LatencyConfig | None:
    """The ``[latency]`` table (``None`` when absent): delay and jitter checked like ActionLatency does."""
    if raw is None:
        return None
    keys = ["delay", "jitter", "initial_action", "critic_in_flight", "critic_latency"]
    t = _table(raw, "latency", keys)
    from ..core.options import bounds_of
    from ..wrappers.latency import IN_FLIGHT_KEY, LATENCY_KEY, _check_time

    times = {}
    for key in ("delay", "jitter"):
        value = _value(t.get(key, 0.0), f"latency.{key}")
        if isinstance(value, (bool, list)):
            raise _err(f"latency.{key}", value, "expected seconds or a distribution", f"write {key} = 0.02")
        try:
            times[key] = _check_time(key, value)
        except (TypeError, ValueError) as e:
            raise ConfigError(_clean(f"config latency.{key}: {e}")) from None
    d_hi, j_hi = bounds_of(times["delay"])[1], bounds_of(times["jitter"])[1]
    if j_hi > d_hi + 1e-12:
        raise _err(
            "latency.jitter",
            t.get("jitter"),
            "jitter is extra delay on top of delay and must satisfy 0 <= jitter <= delay "
            f"({d_hi:g} s at most)",
            f"lower jitter to at most {d_hi:g} or raise delay",
        )
    initial = t.get("initial_action", "zero")
    numbers = isinstance(initial, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in initial
    )
    if initial not in ("zero", "first") and not numbers:
        raise _err(
            "latency.initial_action",
            initial,
            'expected "zero", "first" or a list of numbers (one action)',
            'write initial_action = "zero"',
        )
    taken = [k for k in (IN_FLIGHT_KEY, LATENCY_KEY) if k in sensors]
    if taken:
        raise _err(
            f"sensors.{taken[0]}",
            taken[0],
            "this name is reserved for the critic input [latency] adds",
            "rename the sensor",
        )
    return LatencyConfig(
        delay=times["delay"],
        jitter=times["jitter"],
        initial_action=initial,
        critic_in_flight=_typed(t, "latency", "critic_in_flight", bool, True),
        critic_latency=_typed(t, "latency", "critic_latency", bool, False),
    )


def apply_overrides(cfg: Config, overrides: Mapping[str, Any]) -> Config:
    """A new config with dotted-path overrides applied (``"sensors.angle.noise" = 0.1``)."""
    raw = copy.deepcopy(cfg.raw)
    for path, value in overrides.items():
        parts = path.split(".")
        if not parts or parts[0] not in ("env", "sensors", "policy", "critic", "algorithm", "latency"):
            raise ConfigError(
                f"config sweep override {path!r}: the path must start with env, sensors, policy, "
                'critic, algorithm or latency. Fix: write e.g. "sensors.angle.noise" or "latency.delay".'
            )
        node = raw
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                if parts[0] == "sensors" and i == 1:
                    raise ConfigError(
                        f"config sweep override {path!r}: no sensor {part!r}. Fix: use one of "
                        f"{sorted(raw.get('sensors', {}))}."
                    )
                nxt = node[part] = {}
            node = nxt
        node[parts[-1]] = value
    raw.pop("sweep", None)
    return dataclasses.replace(_parse(raw), sweep=cfg.sweep, raw={**raw, "sweep": cfg.raw.get("sweep", {})})


def _yaml_problem(e: Exception) -> str:
    """A YAML error in one line: what is wrong and where (PyYAML's own message spans several lines)."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    what = getattr(e, "problem", None) or getattr(e, "context", None) or str(e)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{what}{where}"


def load_config(path: str | Path) -> Config:
    """Read a TOML (``.toml``) or YAML (``.yaml``/``.yml``, needs PyYAML) or JSON config file.

    Every error is a :class:`ConfigError` whose one-line message starts with the file's path.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {str(path)!r} does not exist. Fix: check the path.")
    if path.is_dir():
        raise ConfigError(
            f"config file {str(path)!r} is a directory. Fix: pass a .toml, .yaml or .json file."
        )
    text = path.read_text()
    if path.suffix == ".toml":
        import tomllib

        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(
                f"{path}: cannot be parsed (TOML): {_clean(e)}. Fix: correct the TOML syntax there."
            ) from None
    elif path.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(
                f"{path}: reading YAML needs PyYAML, which is not installed. "
                "Fix: pip install pyyaml, or write the config as .toml."
            ) from None
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:  # syntax errors and tags such as !!python/object (safe_load refuses them)
            raise ConfigError(
                f"{path}: cannot be parsed (YAML): {_clean(_yaml_problem(e))}. "
                "Fix: correct the YAML there (plain values only: no !! tags)."
            ) from None
    elif path.suffix == ".json":
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise ConfigError(
                f"{path}: cannot be parsed (JSON): {_clean(e)}. Fix: correct the JSON syntax there."
            ) from None
    else:
        raise ConfigError(f"config file {str(path)!r}: unknown format. Fix: use .toml, .yaml or .json.")
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError(
            f"{path}: the file holds a {type(raw).__name__}, not a table of settings. "
            "Fix: write key = value settings ([env], [sensors.<name>], ...) at the top level."
        )
    try:
        return parse_config(raw or {})
    except ConfigError as e:
        raise ConfigError(f"{path}: {_clean(e)}") from None


def check_env_ids(cfg: Config, source: str) -> None:
    """Raise a :class:`ConfigError` naming ``source`` (the config file) if ``env.id`` (or a sweep cell's
    ``env.id``) is not a registered Gymnasium environment, with the closest registered ids as the fix.

    Example:
        >>> cfg = parse_config({"sensors": {"a": {"type": "StateSensorOptions", "key": "obs"}},
        ...                     "env": {"id": "Pendulm-v1"}})
        >>> try:
        ...     check_env_ids(cfg, "my.toml")
        ... except ConfigError as e:
        ...     print(e)  # doctest: +ELLIPSIS
        my.toml: config env.id = 'Pendulm-v1': no such Gymnasium environment (...). Fix: ... 'Pendulum-v1' ...
    """
    import gymnasium as gym

    from .. import envs as _register  # noqa: F401  (registers sensorgym/... ids)

    ids = [(cfg.env.id, "env.id")]
    for cell in cfg.sweep.cells():
        if "env.id" in cell:
            ids.append((cell["env.id"], "sweep env.id"))
    for env_id, key in ids:
        module = env_id.split(":", 1)[0] if ":" in env_id else None
        if module is not None:  # "package:Env-v0" registers by importing the package, as gym.make does
            try:
                __import__(module)
            except ImportError as e:
                raise ConfigError(
                    f"{source}: config {key} = {env_id!r}: cannot import {module!r} ({_clean(e)}). "
                    f"Fix: install the package that provides {module!r}, or correct the id."
                ) from None
            env_id = env_id.split(":", 1)[1]
        try:
            spec = gym.spec(env_id)
        except gym.error.Error as e:
            close = difflib.get_close_matches(env_id, list(gym.registry), n=3, cutoff=0.6)
            hint = f": did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ConfigError(
                f"{source}: config {key} = {env_id!r}: no such Gymnasium environment "
                f"({_clean(e).split('. ')[0].rstrip('.')}). Fix: use a registered id{hint} "
                '(python -c "import gymnasium; gymnasium.pprint_registry()" lists them).'
            ) from None
        if spec.entry_point is None:  # only a vector entry point: a natively batched env
            raise ConfigError(
                f"{source}: config {key} = {env_id!r}: a natively batched (vector-only) env; the app trains "
                "Sync or Async vector envs of a single-env id. Fix: use a single-env id such as "
                "'Pendulum-v1', or drive the batched env from Python (docs/integration.md)."
            )


def to_plain(value: Any) -> Any:
    """Options and distributions as plain JSON-able data (for saving beside a model)."""
    if isinstance(value, Distribution):
        return {
            "dist": type(value).__name__,
            **{f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if dataclasses.is_dataclass(value):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value
