"""``StateSensor``: a generic sensor reading one entry of the state mapping.

The state handed to the manager is a mapping; ``StateSensor`` reads ``state[key]`` (numpy or torch,
shape ``(B, *shape)``), optionally selecting ``index`` entries of the last axis. It is the sensor behind
every observation/info entry the Gymnasium wrapper exposes, and a template for custom sensors.

Example:
    >>> import numpy as np, sensorgym as sg
    >>> mgr = sg.SensorManager(num_envs=2, dt=0.05)
    >>> angle = mgr.add_sensor(sg.StateSensorOptions(key="obs", index=[0, 1], resolution=0.5))
    >>> mgr.reset({"obs": np.array([[0.2, 0.8, 5.0], [1.3, -0.3, 5.0]])})
    >>> angle.read().tolist()
    [[0.0, 1.0], [1.5, -0.5]]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core.options import SimpleSensorOptions, did_you_mean
from ..core.sensor import SimpleSensor
from ..core.values import as_int

__all__ = ["StateSensor", "StateSensorOptions"]


@dataclass(frozen=True, kw_only=True)
class StateSensorOptions(SimpleSensorOptions):
    """Options of :class:`StateSensor`.

    Args:
        key: the state entry to read (e.g. ``"obs"``, ``"obs.position"``, an info key).
        shape: shape of one reading; inferred from the first state when None.
        index: entries of the last axis to keep (e.g. ``[0, 1]``), or None for all.

    Example:
        >>> import sensorgym as sg
        >>> sg.StateSensorOptions(key="obs", index=[2], delay=0.02).index
        (2,)
    """

    key: str
    shape: tuple[int, ...] | None = None
    index: tuple[int, ...] | None = None

    def _validate(self) -> None:
        super()._validate()
        if not isinstance(self.key, str) or not self.key:
            raise TypeError(
                f"StateSensorOptions.key={self.key!r} is invalid: expected a non-empty str. "
                "Fix: pass key='obs' or the name of an info entry."
            )
        if self.shape is not None:
            shape = tuple(self.shape) if isinstance(self.shape, Sequence) else (self.shape,)
            if not all(as_int(d) is not None and d > 0 for d in shape):
                raise ValueError(
                    f"StateSensorOptions.shape={self.shape!r} is invalid: dimensions must "
                    "be positive ints. Fix: pass e.g. shape=(3,) or leave it None to infer."
                )
            object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        if self.index is not None:
            idx = tuple(self.index) if isinstance(self.index, Sequence) else (self.index,)
            if not idx or not all(as_int(i) is not None for i in idx):
                raise ValueError(
                    f"StateSensorOptions.index={self.index!r} is invalid: expected a "
                    "non-empty list of ints. Fix: pass e.g. index=[0, 1]."
                )
            object.__setattr__(self, "index", tuple(int(i) for i in idx))


_NUMPY_DTYPES = frozenset(
    {torch.float16, torch.float32, torch.float64, torch.uint8, torch.int32, torch.int64}
)


def _entry(state: Any, key: str, sensor: str) -> Any:
    if type(state) is not dict and not isinstance(state, Mapping):  # an ABC check costs more than dict's
        raise TypeError(
            f"sensor {sensor!r} reads state[{key!r}] but the state is a "
            f"{type(state).__name__}, not a mapping. Fix: pass a dict like {{{key!r}: array}}."
        )
    if key not in state:
        raise ValueError(
            f"sensor {sensor!r}: state has no key {key!r} (keys: {sorted(state)}). Fix: "
            f"{did_you_mean(key, list(state))}put it into the state mapping or change StateSensorOptions.key."
        )
    return state[key]


def _check_numeric(entry: Any, key: str, sensor: str) -> None:
    if torch.is_tensor(entry):
        if not entry.dtype.is_complex:
            return
        kind = str(entry.dtype)
    else:
        dtype = entry.dtype if isinstance(entry, np.ndarray) else np.asarray(entry).dtype
        if dtype.kind in "biuf":
            return
        kind = str(dtype)
    raise TypeError(
        f"sensor {sensor!r}: state[{key!r}] has dtype {kind}; expected numeric (bool, int or real "
        "float) values. Fix: convert it, e.g. np.asarray(x, dtype=np.float32)."
    )


def _runs(sensors: list) -> list[tuple[str, slice, list]]:
    """Runs of consecutive sensors reading the same state entry into consecutive raw columns."""
    plan: list[tuple[str, slice, list]] = []
    for s in sensors:
        if plan and plan[-1][0] == s.options.key and plan[-1][1].stop == s.cache_slice.start:
            key, cols, run = plan[-1]
            plan[-1] = (key, slice(cols.start, s.cache_slice.stop), [*run, s])
        else:
            plan.append((s.options.key, s.cache_slice, [s]))
    return plan


def _selection_plan(cols: slice, sensors: list, ndim: int, shape: tuple, device: Any) -> list[tuple]:
    """The column picks of a run of sensors reading one entry: ``[(raw columns, pick)]`` (``pick``: None,
    a slice, or an index array/tensor): one for the run when every sensor selects from a 2-D entry (the
    concatenated indices), else one per sensor (its ``index``, or the whole entry)."""
    n = shape[-1] if ndim > 1 else 1

    def pick(index: list[int]) -> Any:
        idx = [i % n for i in index]
        if idx == list(range(idx[0], idx[0] + len(idx))):
            return slice(idx[0], idx[0] + len(idx))
        if device is None:
            return np.asarray(idx, dtype=np.int64)
        return torch.tensor(idx, dtype=torch.long, device=device)

    if len(sensors) >= 2 and ndim == 2 and all(s.options.index is not None for s in sensors):
        return [(cols, pick([i for s in sensors for i in s.options.index]))]
    return [
        (s.cache_slice, None if s.options.index is None else pick(list(s.options.index))) for s in sensors
    ]


def _as_tensor(x: np.ndarray, raw: torch.Tensor) -> torch.Tensor:
    """A numpy entry as a tensor; a dtype torch has no counterpart for (``np.longdouble``, i.e. float128) is
    cast by numpy into the raw buffer's dtype first: the very cast the numpy executor's assignment makes,
    so both executors keep the same bits."""
    try:
        return torch.as_tensor(x)
    except TypeError:
        return torch.from_numpy(x.astype(torch.empty(0, dtype=raw.dtype).numpy().dtype))


class StateSensor(SimpleSensor):
    """Reads ``state[key]`` as a sensor; float32.

    Example: see the module docstring.
    """

    options_cls = StateSensorOptions

    def _on_build(self, state: Any) -> None:
        o: StateSensorOptions = self.options
        self._state_shape: tuple[int, ...] | None = None
        if state is not None and isinstance(state, Mapping) and o.key in state:
            src_shape = tuple(np.shape(state[o.key]))
            n = self._manager.num_envs
            if not src_shape or src_shape[0] != n:
                raise ValueError(
                    f"sensor {self.name!r}: state[{o.key!r}] has shape {src_shape}; "
                    f"expected a leading batch axis of num_envs={n}."
                )
            self._state_shape = src_shape[1:]
        if o.index is not None:
            if self._state_shape is not None:
                last = self._state_shape[-1] if self._state_shape else 1
                bad = [i for i in o.index if not -last <= i < last]
                if bad:
                    raise ValueError(
                        f"sensor {self.name!r}: index {bad} out of range for the last axis "
                        f"of state[{o.key!r}] (size {last}). Fix: use indices in "
                        f"[{-last}, {last - 1}], or read another key."
                    )
            inferred = (
                ((*self._state_shape[:-1], len(o.index)) if self._state_shape else (len(o.index),))
                if self._state_shape is not None
                else None
            )
        else:
            inferred = self._state_shape
        if o.shape is not None:
            if inferred is not None and math.prod(inferred) != math.prod(o.shape):
                picked = (
                    f"index={list(o.index)} picks {math.prod(inferred)} of the values of state[{o.key!r}] "
                    f"(per-env shape {self._state_shape}), so one reading has shape {inferred}"
                    if o.index is not None
                    else f"state[{o.key!r}] has per-env shape {inferred}"
                )
                raise ValueError(
                    f"sensor {self.name!r}: shape={o.shape} does not match: {picked}; `shape` is the shape "
                    f"of one reading, after `index`. Fix: pass shape={inferred} or leave shape out (it is "
                    "inferred from the state)."
                )
            self._shape = o.shape
        elif inferred is not None:
            self._shape = inferred if inferred else (1,)
        else:
            raise ValueError(
                f"sensor {self.name!r}: cannot infer its shape: state[{o.key!r}] is not "
                "available at build. Fix: pass shape=... in StateSensorOptions or call "
                "reset(state) with that key present."
            )
        self._width = math.prod(self._shape)

    def _get_return_format(self) -> tuple[int, ...]:
        return self._shape

    @classmethod
    def _get_cache_dtype(cls) -> torch.dtype:
        return torch.float32

    @classmethod
    def _init_metadata(cls, md: Any) -> None:
        super()._init_metadata(md)
        md.constants["state_plan"] = _runs(md.sensors)  # the read plan, made once at build
        md.constants["state_selections"] = {}  # per run, entry shape and device: the column picks
        md.constants["raw_views"] = {}  # numpy views of the raw slots, by address

    @classmethod
    def _check_state(cls, state: Any, md: Any) -> None:
        b = md.num_envs
        # an entry of the type, shape and dtype that passed last step passes again: the full check
        # (shape arithmetic, dtype kinds) runs only when one of them changes
        passed = md.constants.setdefault("checked_entries", {})
        for s in md.sensors:
            o = s.options
            # a dict holding the key: the entry (every step); anything else: _entry's checks and messages
            entry = state[o.key] if type(state) is dict and o.key in state else _entry(state, o.key, s.name)
            sig = (type(entry), getattr(entry, "shape", None), getattr(entry, "dtype", None))
            if sig[1] is not None and passed.get(s.name) == sig:
                continue
            _check_numeric(entry, o.key, s.name)
            shape = tuple(np.shape(entry))
            if not shape or shape[0] != b:
                raise ValueError(
                    f"sensor {s.name!r}: state[{o.key!r}] has shape {shape}; expected (num_envs={b}, ...)."
                )
            width = math.prod(shape[1:-1]) * len(o.index) if o.index is not None else math.prod(shape[1:])
            if width != s._width:
                raise ValueError(
                    f"sensor {s.name!r}: state[{o.key!r}] has {width} values per env "
                    f"after index selection; the sensor's shape {s._shape} needs {s._width}. Fix: hand over "
                    f"state[{o.key!r}] with the shape it had at build, (num_envs, *{tuple(shape[1:])}) now, "
                    "or give the sensor the shape of the new entry."
                )
            if sig[1] is not None:
                passed[s.name] = sig

    @classmethod
    def _update_raw_data(cls, state: Any, md: Any, raw: torch.Tensor) -> None:
        """One definition for numpy and torch entries: every run of sensors is selected from its entry
        (numpy arrays stay numpy, torch tensors stay torch) and written into its raw columns."""
        constants = md.constants
        plan, selections = constants["state_plan"], constants["state_selections"]
        # numpy entries into a CPU buffer are written through a numpy view of it: a numpy assignment
        # (which casts like copy_) costs a fraction of a torch op's dispatch. The views of the raw slots
        # (one per timeline phase) are made once each, then looked up by address
        view = None
        if raw.dtype in _NUMPY_DTYPES:
            views = constants["raw_views"]
            view = views.get(raw.data_ptr())
            if view is None:  # made once (False: numpy cannot view it, e.g. on a GPU); a copied manager's
                # entries are None (its views are not copied) and its slots have other addresses
                made = md.numpy_view(raw)
                view = views[raw.data_ptr()] = False if made is None else made
        numpy_route = view is not None and view is not False
        for key, _, _ in plan:
            if torch.is_tensor(state[key]):
                numpy_route = False
                break
        target = view if numpy_route else raw
        entries: dict[str, Any] = {}  # each state entry converted once per step
        parts: list[tuple[slice, Any]] = []  # (raw columns, (B, c) source), in column order
        for key, cols, sensors in plan:
            x = entries.get(key)
            if x is None:
                src = state[key]
                if numpy_route:
                    x = np.asarray(src)
                else:
                    x = src if torch.is_tensor(src) else _as_tensor(np.asarray(src), raw)
                entries[key] = x
            # the run's column picks, decided once per entry shape and device (two runs may read one
            # entry: their columns tell them apart); a slice for a contiguous ascending range: a view
            device = x.device if torch.is_tensor(x) else None  # None: a numpy array
            picks = selections.get((cols.start, x.shape, device))
            if picks is None:
                picks = selections[(cols.start, x.shape, device)] = _selection_plan(
                    cols, sensors, x.ndim, x.shape, device
                )
            b, ndim = x.shape[0], x.ndim
            if ndim == 1:
                x = x[:, None]
            for columns, pick in picks:
                if pick is None:
                    y = x
                elif isinstance(pick, slice) or device is None:
                    y = x[..., pick]
                else:
                    y = x.index_select(-1, pick)
                # a 1-D or 2-D entry's selection is (B, c) already: a reshape would cost as much as the pick
                parts.append((columns, y.reshape(b, -1) if ndim > 2 else y))
        if (
            not numpy_route
            and len(parts) > 1
            and raw.is_contiguous()
            and all(x.device == raw.device for _, x in parts)
        ):
            # the sources tile raw's columns in order: one cat writes every row once, where a copy per
            # source into a narrow column slice would pay a loop per row and source (~6x slower at large B)
            torch.cat([x for _, x in parts], dim=1, out=raw)
            return
        for cols, x in parts:
            if numpy_route:
                target[:, cols] = x
            else:
                raw[:, cols].copy_(x)
