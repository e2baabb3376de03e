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
                 or list = [{"sensors.angle.noise" = 0.0}, ...]    # explicit cells, each optionally
                        named: {arm = "fitted", ...} (the name labels the cell in summary.md and figures)
    [deploy.<name>]  "sensors.angle.noise" = 0.1, "latency.delay" = 0.04   # a deployment condition: ablate
                 also scores every run with these overrides (levels only; see app/config_deploy.py)

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
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.randomization import Distribution
from .config_deploy import check_deploy, parse_deploy
from .config_values import (
    ARM,
    AlgorithmConfig,
    Config,
    ConfigError,
    CriticConfig,
    EnvConfig,
    LatencyConfig,
    SweepConfig,
    UserError,
    check_arm_names,
    clean_message,
    config_error,
    parse_sensor,
    parse_value,
    read_table,
    sensor_names,
    typed_key,
)

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


def parse_config(raw: Mapping[str, Any]) -> Config:
    """Validate a config mapping (e.g. parsed TOML/YAML) into a :class:`Config`."""
    cfg = _parse(raw)
    for cell in cfg.sweep.cells():  # every sweep cell must give a valid config
        if not isinstance(cell, Mapping):
            raise config_error(
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
    if cfg.deploy:  # every condition on every cell: a refusal before any training, not after it
        check_deploy(cfg, cfg.sweep.cells(), apply_overrides)
    return cfg


def _parse(raw: Mapping[str, Any]) -> Config:
    """The config's tables, each validated in this order (the first mistake is the one reported)."""
    tables = ["env", "sensors", "policy", "critic", "algorithm", "latency", "sweep", "deploy"]
    top = read_table(raw, "<root>", tables)
    sensors_raw = top.get("sensors")
    if not isinstance(sensors_raw, Mapping) or not sensors_raw:
        raise config_error(
            "sensors",
            sensors_raw,
            "at least one sensor is needed",
            'add [sensors.angle] with type = "StateSensorOptions" and key = "obs"',
        )
    sensors = {name: parse_sensor(name, value, f"sensors.{name}") for name, value in sensors_raw.items()}
    env = _env(top.get("env"))
    p = read_table(top.get("policy"), "policy", ["sensors", "age"])
    policy = sensor_names(p.get("sensors"), "policy.sensors", sensors)
    policy_age = sensor_names(p.get("age"), "policy.age", sensors) or []
    critic, critic_age = _critic(top.get("critic"), sensors)
    algorithm = _algorithm(top.get("algorithm"))
    latency = _latency(top.get("latency"), sensors)
    sweep = _sweep(top.get("sweep"), algorithm.seed)
    deploy = parse_deploy(top.get("deploy"), sensors)
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
        deploy=deploy,
    )


def _env(raw: Any) -> EnvConfig:
    """The ``[env]`` table."""
    e = read_table(raw, "env", ["id", "n_envs", "vectorization", "kwargs", "dt"])
    env = EnvConfig(
        id=typed_key(e, "env", "id", str, "Pendulum-v1"),
        n_envs=typed_key(e, "env", "n_envs", int, 4),
        vectorization=typed_key(e, "env", "vectorization", str, "sync"),
        kwargs=dict(typed_key(e, "env", "kwargs", dict, {})),
        dt=e.get("dt"),
    )
    if env.dt is not None and (
        isinstance(env.dt, bool) or not isinstance(env.dt, (int, float)) or env.dt <= 0
    ):
        raise config_error("env.dt", env.dt, "must be a number of seconds > 0", "write e.g. dt = 0.02")
    if env.n_envs < 1:
        raise config_error("env.n_envs", env.n_envs, "must be >= 1", "write n_envs = 4")
    if env.vectorization not in ("sync", "async"):
        raise config_error("env.vectorization", env.vectorization, "must be sync or async", 'write "sync"')
    return env


def _critic(raw: Any, sensors: Mapping) -> tuple[CriticConfig, list[str]]:
    """The ``[critic]`` table: the critic and the sensors whose age it reads."""
    c = read_table(raw, "critic", ["type", "sensors", "env_obs", "randomization", "age"])
    critic_age = sensor_names(c.get("age"), "critic.age", sensors) or []
    critic = CriticConfig(
        type=typed_key(c, "critic", "type", str, "asymmetric"),
        sensors=sensor_names(c.get("sensors"), "critic.sensors", sensors),
        env_obs=typed_key(c, "critic", "env_obs", bool, True),
        randomization=typed_key(c, "critic", "randomization", bool, False),
    )
    if critic.type not in ("symmetric", "asymmetric"):
        raise config_error(
            "critic.type", critic.type, "must be symmetric or asymmetric", 'write type = "asymmetric"'
        )
    if critic.sensors == [] and not critic.env_obs:
        raise config_error(
            "critic.sensors", [], "with env_obs = false the critic would read nothing",
            "list at least one sensor, or set env_obs = true",
        )  # fmt: skip
    return critic, critic_age


def _algorithm(raw: Any) -> AlgorithmConfig:
    """The ``[algorithm]`` table."""
    a = read_table(
        raw,
        "algorithm",
        ["name", "timesteps", "seed", "eval_episodes", "eval_every", "normalize", "kwargs"],
    )
    algorithm = AlgorithmConfig(
        name=typed_key(a, "algorithm", "name", str, "PPO"),
        timesteps=typed_key(a, "algorithm", "timesteps", int, 100_000),
        seed=typed_key(a, "algorithm", "seed", int, 0),
        eval_episodes=typed_key(a, "algorithm", "eval_episodes", int, 10),
        eval_every=typed_key(a, "algorithm", "eval_every", int, 0),
        normalize=typed_key(a, "algorithm", "normalize", bool, True),
        kwargs=dict(typed_key(a, "algorithm", "kwargs", dict, {})),
    )
    if algorithm.name != "PPO":
        raise config_error(
            "algorithm.name", algorithm.name, "only PPO (Stable-Baselines3) is supported", 'write "PPO"'
        )
    if algorithm.timesteps < 1:
        raise config_error(
            "algorithm.timesteps", algorithm.timesteps, "must be >= 1 (env steps to train)", "write 100000"
        )
    if algorithm.eval_episodes < 1:
        raise config_error(
            "algorithm.eval_episodes", algorithm.eval_episodes, "must be >= 1 (episodes to score)", "write 20"
        )
    if algorithm.eval_every < 0:
        raise config_error(
            "algorithm.eval_every",
            algorithm.eval_every,
            "must be >= 0 (0: no learning curve)",
            "write 0 or e.g. 20000",
        )
    return algorithm


def _sweep(raw: Any, seed: int) -> SweepConfig:
    """The ``[sweep]`` table (its seeds default to the algorithm's ``seed``)."""
    s = read_table(raw, "sweep", ["seeds", "critic", "grid", "list"])
    sweep = SweepConfig(
        seeds=list(typed_key(s, "sweep", "seeds", list, [seed])),
        critic=list(typed_key(s, "sweep", "critic", list, ["symmetric", "asymmetric"])),
        grid=dict(typed_key(s, "sweep", "grid", dict, {})),
        list=list(typed_key(s, "sweep", "list", list, [])),
    )
    for k in sweep.critic:
        if k not in ("symmetric", "asymmetric"):
            raise config_error(
                "sweep.critic",
                sweep.critic,
                f"unknown critic type {k!r}",
                'use "symmetric" and/or "asymmetric"',
            )
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in sweep.seeds) or not sweep.seeds:
        raise config_error(
            "sweep.seeds", sweep.seeds, "expected a non-empty list of integers", "write seeds = [0, 1, 2]"
        )
    if sweep.grid and sweep.list:
        raise config_error("sweep", s, "give either grid or list, not both", "remove one of them")
    for name, values in (("seeds", sweep.seeds), ("critic", sweep.critic)):
        if len(set(values)) != len(values):  # each run would be trained and counted twice
            raise config_error(f"sweep.{name}", values, "has repeated values", "list each value once")
    for key, values in sweep.grid.items():
        if not isinstance(values, list) or not values:
            raise config_error(
                f"sweep.grid.{key}", values, "expected a non-empty list of values", f'write "{key}" = [..]'
            )
        if len({repr(v) for v in values}) != len(values):
            raise config_error(f"sweep.grid.{key}", values, "has repeated values", "list each level once")
    check_arm_names(sweep.list)
    own_axes = {"critic.type": "sweep.critic", "algorithm.seed": "sweep.seeds"}
    for key in [*sweep.grid, *(k for cell in sweep.list if isinstance(cell, Mapping) for k in cell)]:
        if key in own_axes:  # every run takes these from the sweep's own axes: a level would change nothing
            where = f"sweep.grid.{key}" if key in sweep.grid else "sweep.list"
            raise config_error(
                where, key, "is set by the sweep itself for every run", f"use {own_axes[key]} = [...]"
            )
    return sweep


def _latency(raw: Any, sensors: Mapping) -> LatencyConfig | None:
    """The ``[latency]`` table (``None`` when absent): delay and jitter checked like ActionLatency does."""
    if raw is None:
        return None
    keys = ["delay", "jitter", "initial_action", "critic_in_flight", "critic_latency"]
    t = read_table(raw, "latency", keys)
    from ..core.options import bounds_of
    from ..wrappers.latency import IN_FLIGHT_KEY, LATENCY_KEY, _check_time

    times = {}
    for key in ("delay", "jitter"):
        value = parse_value(t.get(key, 0.0), f"latency.{key}")
        if isinstance(value, (bool, list)):
            raise config_error(
                f"latency.{key}", value, "expected seconds or a distribution", f"write {key} = 0.02"
            )
        try:
            times[key] = _check_time(key, value)
        except (TypeError, ValueError) as e:
            raise ConfigError(clean_message(f"config latency.{key}: {e}")) from None
    d_hi, j_hi = bounds_of(times["delay"])[1], bounds_of(times["jitter"])[1]
    if j_hi > d_hi + 1e-12:
        raise config_error(
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
        raise config_error(
            "latency.initial_action",
            initial,
            'expected "zero", "first" or a list of numbers (one action)',
            'write initial_action = "zero"',
        )
    taken = [k for k in (IN_FLIGHT_KEY, LATENCY_KEY) if k in sensors]
    if taken:
        raise config_error(
            f"sensors.{taken[0]}",
            taken[0],
            "this name is reserved for the critic input [latency] adds",
            "rename the sensor",
        )
    return LatencyConfig(
        delay=times["delay"],
        jitter=times["jitter"],
        initial_action=initial,
        critic_in_flight=typed_key(t, "latency", "critic_in_flight", bool, True),
        critic_latency=typed_key(t, "latency", "critic_latency", bool, False),
    )


def apply_overrides(cfg: Config, overrides: Mapping[str, Any]) -> Config:
    """A new config with dotted-path overrides applied (``"sensors.angle.noise" = 0.1``); a sweep cell's
    ``arm`` (its name) is not a setting and changes nothing."""
    raw = copy.deepcopy(cfg.raw)
    for path, value in overrides.items():
        if path == ARM:  # a sweep cell's name, not a setting
            continue
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
                f"{path}: cannot be parsed (TOML): {clean_message(e)}. Fix: correct the TOML syntax there."
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
                f"{path}: cannot be parsed (YAML): {clean_message(_yaml_problem(e))}. "
                "Fix: correct the YAML there (plain values only: no !! tags)."
            ) from None
    elif path.suffix == ".json":
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise ConfigError(
                f"{path}: cannot be parsed (JSON): {clean_message(e)}. Fix: correct the JSON syntax there."
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
        raise ConfigError(f"{path}: {clean_message(e)}") from None


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
                    f"{source}: config {key} = {env_id!r}: cannot import {module!r} ({clean_message(e)}). "
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
                f"({clean_message(e).split('. ')[0].rstrip('.')}). Fix: use a registered id{hint} "
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
