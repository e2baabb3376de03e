"""``fitted.toml`` and ``fitted_config.toml``: the fitted options as config tables (docs/fit.md).

``fitted.toml`` holds one ``[sensors.NAME]`` table per fitted name with the options ``fit`` identified
(a per-component list where a name has several channels; ``TABLE.FIELD`` names write an IMU's per-field
options ``FIELD_noise_density``, ...). ``--into CONFIG`` writes ``CONFIG``'s copy in which the sensor
tables of those names take the fitted options, their sources (``type``, ``key``, ``index``, body) and
every other key unchanged; an option the fit replaces by its density form (``noise`` by
``noise_density``, ``random_walk`` by ``random_walk_density``) is removed, since a component may not
have both. The copy is plain TOML (the original's comments are not kept).

Example:
    >>> import tomllib
    >>> text = to_toml({"sensors": {"gyro": {"noise_density": [0.01, 0.02], "update_period": 0.005}}})
    >>> print(text)
    [sensors.gyro]
    noise_density = [0.01, 0.02]
    update_period = 0.005
    <BLANKLINE>
    >>> tomllib.loads(text)["sensors"]["gyro"]["update_period"]
    0.005
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.sensor import SENSOR_REGISTRY
from .errors import FitError, require

__all__ = ["PER_SENSOR", "fitted_tables", "merge_into", "read_config", "to_toml"]

#: options that belong to a whole sensor (one value, no field prefix), not to a component or an IMU field
PER_SENSOR = ("update_period", "dropout", "dropout_burst", "delay")
#: a fitted option -> the option it replaces (a component may not have both)
REPLACES = {"noise_density": "noise", "random_walk_density": "random_walk"}
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE.match(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(str(k))} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if hasattr(value, "item"):  # numpy scalars
        return _value(value.item())
    raise TypeError(f"cannot write {value!r} ({type(value).__name__}) as TOML")


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) and "dist" not in value


def to_toml(data: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """``data`` as TOML text: mappings become tables (a distribution ``{dist = ...}`` stays inline),
    lists and scalars values. ``header`` lines are written first as comments."""
    lines = [f"# {h}" if h else "#" for h in header]
    if lines:
        lines.append("")

    def table(path: list[str], body: Mapping[str, Any]) -> None:
        plain = [(k, v) for k, v in body.items() if not _is_table(v)]
        nested = [(k, v) for k, v in body.items() if _is_table(v)]
        if path and (plain or not nested):
            lines.append("[" + ".".join(_key(p) for p in path) + "]")
        for k, v in plain:
            lines.append(f"{_key(str(k))} = {_value(v)}")
        if path and (plain or not nested):
            lines.append("")
        for k, v in nested:
            table([*path, str(k)], v)

    table([], data)
    return "\n".join(lines).rstrip("\n") + "\n"


def read_config(path: str | Path) -> dict[str, Any]:
    """The raw mapping of a TOML, YAML or JSON config (for ``--into``)."""
    path = Path(path)
    if not path.is_file():
        raise FitError(
            f"--into {str(path)!r}: no such config file", "pass the config to write the fitted options into"
        )
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            import tomllib

            raw = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            raw = require("yaml", "fit", "reading a YAML config").safe_load(text)
        elif path.suffix == ".json":
            raw = json.loads(text)
        else:
            raise FitError(f"--into {path}: unknown config format", "use a .toml, .yaml or .json config")
    except FitError:
        raise
    except Exception as e:  # the parser's own error: one line with where it is
        raise FitError(
            f"--into {path}: cannot be parsed ({' '.join(str(e).split())})", "correct the file"
        ) from None
    if not isinstance(raw, Mapping) or not isinstance(raw.get("sensors"), Mapping):
        raise FitError(
            f"--into {path}: no [sensors.*] tables",
            "pass a sensorgym config (sensorgym inspect/train --config)",
        )
    return dict(raw)


def _components(table: Mapping[str, Any]) -> int | None:
    if isinstance(table.get("index"), list):
        return len(table["index"])
    shape = table.get("shape")
    if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
        return math.prod(shape)
    return None


def merge_into(
    raw: Mapping[str, Any], fitted: Mapping[str, Mapping[str, Any]], counts: Mapping[str, int], source: str
) -> tuple[dict[str, Any], list[str]]:
    """``raw`` with the ``fitted`` options (``{name: {option: value}}``, names possibly ``TABLE.FIELD``)
    written into its sensor tables; ``counts[name]`` is the number of channels of each name. Returns the
    new mapping and one line per table saying what changed."""
    out = copy.deepcopy(dict(raw))
    sensors = out["sensors"]
    by_class = {cls.__name__: cls for cls in SENSOR_REGISTRY}
    by_class.update({sensor.__name__: opts for opts, sensor in SENSOR_REGISTRY.items()})
    changes = []
    for name, options in fitted.items():
        table_name, _, field_name = name.partition(".")
        if table_name not in sensors or not isinstance(sensors[table_name], Mapping):
            raise FitError(
                f"--into {source}: no [sensors.{table_name}] for the fitted {name!r}",
                f"map the channels onto its tables with --names (it has {sorted(sensors)})",
            )
        table = sensors[table_name]
        cls = by_class.get(table.get("type"))
        fields = {f.name for f in dataclasses.fields(cls)} if cls else None
        n = _components(table)
        if not field_name and n is not None and n != counts[name]:
            raise FitError(
                f"--into {source}: [sensors.{table_name}] has {n} components and {counts[name]} channels "
                "were fitted to it",
                f"give it {n} channels with --names, in component order",
            )
        written = []
        for option, value in options.items():
            key = option if (option in PER_SENSOR or not field_name) else f"{field_name}_{option}"
            if fields is not None and key not in fields:
                raise FitError(
                    f"--into {source}: {table.get('type')} of [sensors.{table_name}] has no option {key!r}",
                    "fit its channels into a sensor type that has the error-model options "
                    "(e.g. StateSensorOptions)",
                )
            table[key] = value
            written.append(key)
            if option in REPLACES:
                old = REPLACES[option] if not field_name else f"{field_name}_{REPLACES[option]}"
                if table.pop(old, None) is not None:
                    written.append(f"(removed {old})")
        changes.append(f"[sensors.{table_name}]: {', '.join(written)}")
    return out, changes


def fitted_tables(options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``[sensors.*]`` tables of ``fitted.toml`` (``TABLE.FIELD`` names as ``FIELD_option`` keys)."""
    tables: dict[str, dict[str, Any]] = {}
    for name, opts in options.items():
        table, _, field_name = name.partition(".")
        body = tables.setdefault(table, {})
        for key, value in opts.items():
            body[key if (key in PER_SENSOR or not field_name) else f"{field_name}_{key}"] = value
    return {"sensors": tables}
