"""``fitted.toml`` and ``fitted_config.toml``: the fitted options as config tables (docs/fit.md).

``fitted.toml`` holds one ``[sensors.NAME]`` table per fitted name with the options ``fit`` identified
(a per-component list where a name has several channels; ``TABLE.FIELD`` names write an IMU's per-field
options ``FIELD_noise_density``, ...). ``--into CONFIG`` writes ``CONFIG``'s copy in which the sensor
tables of those names describe the sensor the fit simulated: their sources (``type``, ``key``, ``index``,
body, history) unchanged, and every error-model term the fit estimates (:func:`owned_keys`: noise and
random walk in either unit, bias instability and its correlation time, bandwidth, resolution, the
sample interval, the losses, and the delay with ``--reference``) either the fitted value or removed
(not identifiable from this log; an IMU field whose table gives the 9-component option gets its field's
option written as 0 instead, so that the table's value does not apply to it). What a log at rest cannot
show (a constant bias, a scale factor, jitter, a mount, the delay without a reference) is kept, and listed
as kept, not fitted. The copy is plain TOML (the original's comments are not kept).

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

__all__ = [
    "FITTED_TERMS",
    "PER_SENSOR",
    "Merge",
    "fitted_tables",
    "merge_into",
    "owned_keys",
    "read_config",
    "sweep_keys",
    "to_toml",
]

#: options that belong to a whole sensor (one value, no field prefix), not to a component or an IMU field
PER_SENSOR = ("update_period", "dropout", "dropout_burst", "delay")
#: a fitted option -> the option it replaces (a component may not have both)
REPLACES = {"noise_density": "noise", "random_walk_density": "random_walk"}
#: the per-component error-model terms the fit estimates (per field for an IMU field)
FITTED_TERMS = (
    "noise_density",
    "random_walk_density",
    "bias_instability",
    "bias_correlation_time",
    "bandwidth",
    "resolution",
)
#: the per-sensor terms the fit estimates from the time stamps
SAMPLER_TERMS = ("update_period", "dropout", "dropout_burst")
#: keys of a sensor table that are not part of its error model (never listed as kept)
_NOT_ERROR_MODEL = frozenset(
    ("type", "key", "index", "shape", "body", "history_length", "padding_type", "nan_policy", "max_delay",
     "magnetic_field")
)  # fmt: skip
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


def owned_keys(field: str = "", delay: bool = False) -> list[str]:
    """The keys of a sensor table whose values the fit decides for a channel named ``TABLE`` (``field``
    empty) or ``TABLE.FIELD``: the per-component terms it estimates and their per-step twins (prefixed
    ``FIELD_`` for a field), the sampler's, and ``delay`` with a reference."""
    terms = [*FITTED_TERMS, *REPLACES.values()]
    keys = [f"{field}_{t}" if field else t for t in terms]
    return keys + list(SAMPLER_TERMS) + (["delay"] if delay else [])


def sweep_keys(raw: Mapping[str, Any]) -> list[str]:
    """The dotted paths a config's ``[sweep]`` sets (its grid's axes and its list's keys)."""
    sweep = raw.get("sweep")
    if not isinstance(sweep, Mapping):
        return []
    keys = list(sweep.get("grid", {}) or {}) if isinstance(sweep.get("grid"), Mapping) else []
    cells = sweep.get("list") if isinstance(sweep.get("list"), list) else []
    for cell in cells:
        if isinstance(cell, Mapping):
            keys += [k for k in cell if k not in keys]
    return keys


@dataclasses.dataclass
class Merge:
    """``merge_into``'s result: the new config, one line per table saying what changed, and per table the
    keys removed (with why) and the error-model keys kept from the config (not fitted)."""

    config: dict[str, Any]
    changes: list[str]
    removed: dict[str, list[str]]
    kept: dict[str, list[str]]

    def __iter__(self):  # ``merged, changes = merge_into(...)``
        return iter((self.config, self.changes))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def merge_into(
    raw: Mapping[str, Any],
    fitted: Mapping[str, Mapping[str, Any]],
    counts: Mapping[str, int],
    source: str,
    delay: bool = False,
) -> Merge:
    """``raw`` with the ``fitted`` options (``{name: {option: value}}``, names possibly ``TABLE.FIELD``)
    written into its sensor tables, every other key the fit decides (:func:`owned_keys`) removed;
    ``counts[name]`` is the number of channels of each name, ``delay`` whether the delay was fitted (a
    reference). Refused in one line: a table that is not there, another number of components, an
    options class without the options, a ``[sweep]`` that sets a key the fit decides. With ``fitted``
    empty per name it is the check before the work."""
    out = copy.deepcopy(dict(raw))
    sensors = out["sensors"]
    by_class = {cls.__name__: cls for cls in SENSOR_REGISTRY}
    by_class.update({sensor.__name__: opts for opts, sensor in SENSOR_REGISTRY.items()})
    owned_by_table: dict[str, dict[str, str]] = {}  # table -> owned key -> the fitted name it is for
    for name in fitted:
        table_name, _, field_name = name.partition(".")
        for key in owned_keys(field_name, delay):
            owned_by_table.setdefault(table_name, {})[key] = name
    for path in sweep_keys(raw):
        parts = path.split(".")
        if len(parts) == 3 and parts[0] == "sensors" and parts[2] in owned_by_table.get(parts[1], {}):
            table_name, key = parts[1], parts[2]
            term = key.split("_", 1)[1] if key.split("_", 1)[0] in ("acc", "gyro", "mag") else key
            why = (
                "a noise level per step cannot coexist with the fitted noise_density"
                if term in REPLACES.values()
                else "each level would replace the fitted value"
            )
            raise FitError(
                f"--into {source}: its [sweep] varies {path!r}, which the fit decides for "
                f"[sensors.{table_name}] ({why})",
                f'remove "{path}" from the [sweep] of {source} (sweep the critic, the seeds or another '
                "sensor), or fit into a config without it",
            )
    changes: list[str] = []
    removed: dict[str, list[str]] = {}
    kept: dict[str, list[str]] = {}
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
                f"--into {source}: [sensors.{table_name}] has {_plural(n, 'component')} and "
                f"{_plural(counts[name], 'channel')} {'was' if counts[name] == 1 else 'were'} fitted to it",
                f"give it {_plural(n, 'channel')} with --names, in component order",
            )
        original = dict(raw["sensors"][table_name])
        written, gone = [], []
        for key in owned_keys(field_name, delay):
            option = key[len(field_name) + 1 :] if field_name and key not in PER_SENSOR else key
            if fields is not None and key not in fields:
                if option in options or option in FITTED_TERMS or option in SAMPLER_TERMS:
                    raise FitError(
                        f"--into {source}: {table.get('type')} of [sensors.{table_name}] has no option "
                        f"{key!r}",
                        "fit its channels into a sensor type that has the error-model options "
                        "(e.g. StateSensorOptions)",
                    )
                continue
            if option in options:
                table[key] = options[option]
                written.append(key)
                continue
            if field_name and key not in PER_SENSOR and option in table:
                # the table's 9-component option would apply to this field: switch it off here
                table[key] = 0.0
                gone.append(f"{key} = 0 (the table's {option} no longer applies to {field_name})")
            elif key in table and not (key in PER_SENSOR and name != owned_by_table[table_name][key]):
                del table[key]
                replaced = {v: k for k, v in REPLACES.items()}.get(option)
                if replaced is not None and replaced in options:
                    gone.append(f"{key} (replaced by {f'{field_name}_' if field_name else ''}{replaced})")
                else:
                    gone.append(f"{key} (not identifiable from this log)")
        if written or gone:
            line = f"[sensors.{table_name}]" + (f" ({field_name})" if field_name else "")
            line += f": {', '.join(written) or 'nothing'} written"
            line += f"; removed {', '.join(gone)}" if gone else ""
            changes.append(line)
        removed.setdefault(table_name, []).extend(g for g in gone if g not in removed.get(table_name, []))
        owned = owned_by_table[table_name]
        kept[table_name] = [k for k in original if k not in _NOT_ERROR_MODEL and k not in owned]
    for table_name, keys in kept.items():
        if keys:
            changes.append(f"[sensors.{table_name}]: kept from {source}, not fitted: {', '.join(keys)}")
    return Merge(out, changes, removed, kept)


def fitted_tables(options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``[sensors.*]`` tables of ``fitted.toml`` (``TABLE.FIELD`` names as ``FIELD_option`` keys)."""
    tables: dict[str, dict[str, Any]] = {}
    for name, opts in options.items():
        table, _, field_name = name.partition(".")
        body = tables.setdefault(table, {})
        for key, value in opts.items():
            body[key if (key in PER_SENSOR or not field_name) else f"{field_name}_{key}"] = value
    return {"sensors": tables}
